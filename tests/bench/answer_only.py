"""``rmq serve`` whose sends are answered without being stored: the ceiling ``tests.bench.broker``
prints beside the real sync-send rate.

A send to a topic is stored as usual the first time (which creates the topic and its route);
every later one gets a SUCCESS answer at once, with a made-up message id and queue offset. What
is left is the client, the socket round trip, the event loop and the remoting codec: the most
any handler could reach with this client on this machine. Bench-only; never used by the tests.

Run as ``python -m tests.bench.answer_only serve STORE ...`` (the arguments of ``rmq serve``).
"""

from __future__ import annotations

import itertools
import sys

from formats.remoting import FLAG_RESPONSE
from rmqcli.broker import controller, send
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC

_SEND_CODES = (RC.SEND_MESSAGE, RC.SEND_MESSAGE_V2)
_offsets = itertools.count()
_stored_topics: set[str] = set()


def answer(ctl, req: RemotingCommand, conn):  # type: ignore[no-untyped-def]
    """The first send to a topic is stored; later ones are answered at once."""
    topic = req.ext_fields.get("topic") or req.ext_fields.get("b") or ""
    if topic not in _stored_topics:
        _stored_topics.add(topic)
        return send.send(ctl, req, conn)
    return RemotingCommand(
        code=0,
        opaque=req.opaque,
        flag=FLAG_RESPONSE,
        ext_fields={
            "msgId": "7F00000100002A9F0000000000000000",
            "queueId": req.ext_fields.get("queueId") or req.ext_fields.get("e") or "0",
            "queueOffset": str(next(_offsets)),
            "MSG_REGION": ctl.config.region_id,
            "TRACE_ON": "true",
        },
        serialize_type=req.serialize_type,
    )


def main() -> None:
    original = controller.BrokerController.__init__

    def init(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        original(self, *args, **kwargs)
        self.send_lane = None  # every send goes through the handlers below
        for code in _SEND_CODES:
            self.handlers[code] = answer

    controller.BrokerController.__init__ = init  # type: ignore[method-assign]
    from rmqcli.cli.main import run

    run(sys.argv[1:])


if __name__ == "__main__":
    main()
