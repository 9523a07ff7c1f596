"""``rmq serve`` whose sends are answered without being stored: the ceiling ``tests.bench.broker``
prints beside the real sync-send rate.

Every request is handled as usual (the send lane's parsing and checks, the general path for the
rest, which stores a topic's first send and so creates the topic), except that the lane's append
is skipped: a send it takes gets its answer with a made-up message id and queue offset, and
nothing is written or dispatched. What is left is the client, the socket round trip, the event
loop and the handling of a request, without the store: the most the broker could reach with this
client on this machine. Bench-only; never used by the tests.

Run as ``python -m tests.bench.answer_only serve STORE ...`` (the arguments of ``rmq serve``).
"""

from __future__ import annotations

import itertools
import sys

from rmqcli.broker.services.messagestore import MessageStore

_offsets = itertools.count()


def put_unstored(self: MessageStore, *args: object, **kwargs: object) -> tuple[int, int]:
    """``put_serialized`` that writes nothing: a made-up physical offset and queue offset."""
    offset = next(_offsets)
    return offset * 1024, offset


def main() -> None:
    MessageStore.put_serialized = put_unstored  # type: ignore[method-assign]
    from rmqcli.cli.main import run

    run(sys.argv[1:])


if __name__ == "__main__":
    main()
