"""One gRPC scenario of the Apache RocketMQ 5.x Python client (PyPI ``rocketmq-python-client``
5.1.2), run by the interpreter of ``.venv-rmq5`` against one server, for
tests/broker/test_grpc_proxy_diff.py: the test runs it against the real 5.1.1 proxy and against
``rmq serve`` and compares what the client observed, step by step.

Argument: a JSON object ``{"endpoint": host:port}``. The server must hold the topics ``DiffN``
(message.type NORMAL), ``DiffF`` (FIFO, order), ``DiffD`` (DELAY), ``DiffX`` (TRANSACTION) and
the orderly group ``GDiffF``; its transaction check must come within a few seconds.

Prints one JSON object ``{"steps": {name: observation}, "timing": {name: seconds}}``: every value
is already normalized where the two servers must differ (ids by the body they were sent with,
times, ports, commit log offsets and revive queues of receipt handles); the test only compares.
What is measured in seconds is kept apart in ``timing`` and judged by the test against bounds.
"""

from __future__ import annotations

import copy
import json
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

TN, TF, TD, TX = "DiffN", "DiffF", "DiffD", "DiffX"
GN, GF, GD, GX, GL = "GDiffN", "GDiffF", "GDiffD", "GDiffX", "GDiffLate"
AWAIT = 5  # the consumers' long polling, seconds (the proxy's minimum)
INVISIBLE = 10  # seconds: the proxy's minimum for a receive


class Run:
    """The observations of one run, and the names the ids of the sent messages stand for."""

    def __init__(self, endpoint: str):
        self.endpoint = endpoint
        self.port = endpoint.rsplit(":", 1)[1]
        self.steps: dict[str, Any] = {}
        self.timing: dict[str, float] = {}
        self.labels: dict[str, str] = {}  # message id -> the body it was sent with
        self.lock = threading.Lock()
        self.t0 = time.monotonic()

    def note(self, name: str, value: Any) -> None:
        with self.lock:
            assert name not in self.steps, name
            self.steps[name] = value

    def took(self, name: str, seconds: float) -> None:
        with self.lock:
            self.timing[name] = round(seconds, 3)

    def label(self, message_id: str) -> str:
        return self.labels.get(message_id, "<unknown id>")

    # --- normalization ----------------------------------------------------------------------------
    def settings(self, settings: Any) -> dict:
        """A Settings reply; the access point's port is the server's own."""
        from google.protobuf.json_format import MessageToDict

        out = MessageToDict(settings)
        publishing = out.get("publishing", {})
        if "topics" in publishing:  # the client's own order: a Python set's, per process
            publishing["topics"] = sorted(publishing["topics"], key=json.dumps)
        for address in out.get("accessPoint", {}).get("addresses", []):
            if str(address.get("port")) == self.port:
                address["port"] = "<grpc port>"
        return out

    def queue(self, queue: Any) -> dict:
        from google.protobuf.json_format import MessageToDict

        out = MessageToDict(queue.message_queue0())
        for address in out.get("broker", {}).get("endpoints", {}).get("addresses", []):
            if str(address.get("port")) == self.port:
                address["port"] = "<grpc port>"
        return out

    def message(self, m: Any) -> dict:
        """What the client decoded of a received or checked message, and the raw system
        properties it came with (``raw``, kept by the ``fromProtobuf`` hook)."""
        from google.protobuf.json_format import MessageToDict

        raw = MessageToDict(m.raw) if getattr(m, "raw", None) is not None else {}
        sp = raw.get("systemProperties", {})
        for key in ("bornTimestamp", "storeTimestamp"):  # times: only that they are there
            if key in sp:
                sp[key] = "<time>"
        if "storeHost" in sp:  # the broker's host:port, a free port of each run
            sp["storeHost"] = sp["storeHost"].rsplit(":", 1)[0] + ":<port>"
        if "bornHost" in sp:
            sp["bornHost"] = "<client host>" if sp["bornHost"] else ""
        if "messageId" in sp:
            sp["messageId"] = self.label(sp["messageId"])
        if "receiptHandle" in sp:
            sp["receiptHandle"] = handle_shape(sp["receiptHandle"])
        if m.message_type != 2:  # not FIFO: the queue is the server's pick (a round robin from a
            # random index in the proxy's MessageQueueSelector), so only that the handle agrees
            queue, offset = str(sp.pop("queueId", 0)), sp.pop("queueOffset", None)
            handle = sp.get("receiptHandle")
            if isinstance(handle, dict) and "queue" in handle:
                sp["handleNamesItsQueueAndOffset"] = (handle["queue"], handle["offset"]) == (
                    queue,
                    offset or "0",
                )
                for key in ("start", "queue", "offset"):
                    handle.pop(key)
            elif offset is not None:
                sp["queueOffset"] = offset  # a checked half message: the half queue's offset
        if "deliveryTimestamp" in sp:
            sp["deliveryTimestamp"] = "<set>"
        user = dict(raw.get("userProperties", {}))
        if "__transactionId__" in user:  # the broker's: the message id
            user["__transactionId__"] = self.label(user["__transactionId__"])
        raw.pop("body", None)
        raw.pop("userProperties", None)
        return {
            "body": m.body.decode(),
            "topic": m.topic,
            "tag": m.tag,
            "keys": sorted(m.keys),
            "group": m.message_group,
            "attempt": m.delivery_attempt,
            "type": m.message_type,
            "properties": dict(sorted(user.items())),
            "system": dict(sorted(sp.items())),
            "id_is_sent_id": m.message_id in self.labels and self.labels[m.message_id] == m.body.decode(),
        }


def handle_shape(handle: str) -> dict:
    """A receipt handle (``ReceiptHandle.encode``: start offset, retrieve time, invisible time,
    revive queue, topic type, broker name, queue id, offset, commit log offset) without what must
    differ: the retrieve time, the revive queue of a non-orderly pop (a counter of all the broker's
    pops) and the commit log offset (stored sizes differ)."""
    fields = handle.split(" ")
    if len(fields) < 8:
        return {"fields": len(fields)}
    return {
        "fields": len(fields),
        "start": fields[0],
        "invisible": fields[2],
        "revive": "order" if fields[3] == "999" else "queue",
        "type": fields[4],
        "broker": fields[5],
        "queue": fields[6],
        "offset": fields[7],
    }


def error(exc: BaseException) -> dict:
    """A refusal as the client raised it: its class, the server's code and message."""
    code = getattr(exc, "code", None)
    text = str(exc)
    if code is not None and text.startswith(f"{code}, "):
        text = text[len(f"{code}, ") :]
    return {"error": type(exc).__name__, "code": int(code) if code is not None else None, "message": text}


def hook_messages() -> None:
    """Keep the protobuf each client Message was decoded from (``raw``)."""
    from rocketmq.v5.model.message import Message

    decode = Message.fromProtobuf

    def from_protobuf(self: Any, message: Any) -> Any:
        out = decode(self, message)
        self.raw = message
        return out

    Message.fromProtobuf = from_protobuf  # type: ignore[method-assign]


def clients() -> tuple[type, type]:
    """A producer and a simple consumer that keep every Settings reply of their Telemetry stream."""
    from rocketmq import Producer, SimpleConsumer

    class Recording:
        def _record(self, settings: Any) -> None:
            copied = type(settings)()
            copied.CopyFrom(settings)
            self.replies.append(copied)  # type: ignore[attr-defined]
            self.got_settings.set()  # type: ignore[attr-defined]

        def wait_settings(self, timeout: float = 15.0) -> None:
            assert self.got_settings.wait(timeout), "no Settings reply"  # type: ignore[attr-defined]

    class RecordingProducer(Recording, Producer):
        def __init__(self, *args: Any, **kw: Any):
            self.replies: list = []
            self.got_settings = threading.Event()
            self.no_type_check = False
            super().__init__(*args, **kw)

        def reset_setting(self, settings: Any) -> None:
            self._record(settings)
            super().reset_setting(settings)
            if self.no_type_check:  # the client's own check off: the server's answer is wanted
                self._Producer__validate_message_type = False

    class RecordingConsumer(Recording, SimpleConsumer):
        def __init__(self, *args: Any, **kw: Any):
            self.replies = []
            self.got_settings = threading.Event()
            super().__init__(*args, **kw)

        def reset_setting(self, settings: Any) -> None:
            self._record(settings)
            super().reset_setting(settings)

    return RecordingProducer, RecordingConsumer


def attempt(call: Callable[[], Any]) -> Any:
    try:
        result = call()
    except Exception as exc:
        return error(exc)
    if isinstance(result, list):  # received messages: their bodies
        return [m.body.decode() for m in result]
    return {"ok": True}


def main() -> None:
    spec = json.loads(sys.argv[1])
    hook_messages()
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, TransactionChecker
    from rocketmq import TransactionResolution as Resolution

    run = Run(spec["endpoint"])
    Producer, Consumer = clients()
    config = ClientConfiguration(run.endpoint, Credentials(), request_timeout=10)
    checked: list[dict] = []
    checked_at: list[float] = []

    class Checker(TransactionChecker):
        def check(self, message: Any) -> int:
            checked_at.append(time.monotonic())
            checked.append(run.message(message))
            return Resolution.COMMIT

    def consumer(group: str, topic: str, expression: str = "*") -> Any:
        c = Consumer(config, group, {topic: FilterExpression(expression)}, await_duration=AWAIT)
        c.startup()
        c.wait_settings()  # a receive before the server has the settings fails on the proxy
        return c

    def receive(c: Any, invisible: int = INVISIBLE) -> list:
        return list(c.receive(32, invisible))

    def message(topic: str, body: str, **kw: Any) -> Any:
        m = Message()
        m.topic = topic
        m.body = body.encode()
        for key, value in kw.items():
            if key == "props":
                for k, v in value.items():
                    m.add_property(k, v)
            else:
                setattr(m, key, value)
        return m

    def sent(receipt: Any, body: str, placed: bool = True) -> dict:
        """A send receipt; ``placed``: the server picked the queue, so the offset is its own."""
        run.labels[receipt.message_id] = body
        return {
            "body": body,
            "offset": "<server's pick>" if placed else receipt.offset,
            "id_shape": [len(receipt.message_id), receipt.message_id[:2]],
            "transaction_id": "<message id>"
            if receipt.transaction_id == receipt.message_id
            else receipt.transaction_id,
        }

    producer = Producer(config, (TN, TF, TD, TX), checker=Checker())
    producer.startup()
    producer.wait_settings()
    run.note("producer.settings", run.settings(producer.replies[0]))
    for topic in (TN, TF, TD, TX):
        route = producer._retrieve_topic_route_data(topic)
        run.note(f"route.{topic}", sorted((run.queue(q) for q in route.message_queues), key=json.dumps))

    # A topic the server does not have: the route query's answer, then the client's send error.
    from rocketmq.grpc_protocol import QueryRouteRequest

    query = QueryRouteRequest()
    query.topic.name = "DiffMissing"
    query.endpoints.CopyFrom(config.rpc_endpoints.endpoints)
    answer = producer.rpc_client.query_topic_route_async(
        config.rpc_endpoints, query, metadata=producer.sign(), timeout=10
    ).result()
    run.note("route.missing", {"code": answer.status.code, "queues": len(answer.message_queues)})
    run.note("send.missing", attempt(lambda: producer.send(message("DiffMissing", "nowhere"))))

    # Consumers, all before the sends: each group's first receive finds empty queues.
    cn = consumer(GN, TN)
    cf = consumer(GF, TF)
    cd = consumer(GD, TD)
    cx = consumer(GX, TX)
    run.note("settings.consumer.group_missing", run.settings(cn.replies[0]))
    run.note("settings.consumer.fifo_group", run.settings(cf.replies[0]))

    # Invalid requests.
    run.note("receive.invisible_too_small", attempt(lambda: receive(cn, 5)))
    producer.no_type_check = True
    producer._Producer__validate_message_type = False
    run.note("send.fifo_to_normal", attempt(lambda: producer.send(message(TN, "wrong", message_group="g"))))
    run.note("send.normal_to_fifo", attempt(lambda: producer.send(message(TF, "wrong"))))
    later_ts = int(time.time()) + 60
    run.note(
        "send.delay_to_normal", attempt(lambda: producer.send(message(TN, "w", delivery_timestamp=later_ts)))
    )
    producer.no_type_check = False
    producer._Producer__validate_message_type = True

    # Empty receives, all four at once: each is held for the long polling time.
    empty: dict[str, Any] = {}

    def held(name: str, c: Any) -> None:
        started = time.monotonic()
        empty[name] = attempt(lambda: receive(c))
        run.took(f"empty.{name}", time.monotonic() - started)

    threads = [
        threading.Thread(target=held, args=(n, c)) for n, c in (("N", cn), ("F", cf), ("D", cd), ("X", cx))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    run.note("receive.empty", {name: empty[name] for name in sorted(empty)})

    # Sends of each type.
    normal = []
    for i in range(16):
        m = message(TN, f"n{i}", tag="TagA" if i % 2 == 0 else "TagB", keys=f"k{i}", props={"i": str(i)})
        normal.append(sent(producer.send(m), f"n{i}"))
    run.note("send.normal", sorted(normal, key=lambda s: int(s["body"][1:])))
    fifo = []
    for i in range(3):
        for group in ("A", "B"):
            body = f"{group.lower()}{i}"
            fifo.append(sent(producer.send(message(TF, body, message_group=group)), body, placed=False))
    run.note("send.fifo", fifo)
    target = int(time.time()) + 6  # the client sends whole seconds
    target_at = time.monotonic() + (target - time.time())
    run.note(
        "send.delay", sent(producer.send(message(TD, "d0", delivery_timestamp=target)), "d0", placed=False)
    )
    txs = {}
    for body in ("tx-commit", "tx-rollback", "tx-open"):
        transaction = producer.begin_transaction()
        txs[body] = transaction
        txs[body + ".receipt"] = sent(
            producer.send(message(TX, body, tag="TagT"), transaction), body, placed=False
        )
    run.note("send.transaction", {b: txs[b + ".receipt"] for b in ("tx-commit", "tx-rollback", "tx-open")})
    open_sent_at = time.monotonic()
    run.note("transaction.commit", attempt(txs["tx-commit"].commit))
    run.note("transaction.rollback", attempt(txs["tx-rollback"].rollback))

    # Delay and transactions are received in the background while the rest goes on.
    delayed: dict[str, Any] = {}

    def receive_delay() -> None:
        got: list = []
        deadline = time.monotonic() + 25
        while not got and time.monotonic() < deadline:
            got = receive(cd)
        delayed["at"] = time.monotonic()
        delayed["messages"] = [run.message(m) for m in got]
        for m in got:
            cd.ack(m)

    transactional: list = []

    def receive_transactions() -> None:
        deadline = time.monotonic() + 40
        while len(transactional) < 2 and time.monotonic() < deadline:
            for m in receive(cx):
                transactional.append(run.message(m))
                cx.ack(m)

    background = [threading.Thread(target=receive_delay), threading.Thread(target=receive_transactions)]
    for t in background:
        t.start()

    # Normal: one receive (or a few) for all 16; ack 13 of them.
    got: list = []
    deadline = time.monotonic() + 15
    while len(got) < 16 and time.monotonic() < deadline:
        got += receive(cn)
    run.note("receive.normal", sorted((run.message(m) for m in got), key=lambda d: int(d["body"][1:])))
    # Roles: the queue the server put a message in is its own pick, so the messages that play a part
    # are chosen by where they are: "changed" and "changed_acked" are not the first of their queue in
    # the batch (the handle's start offset is not the message's), "probe" is any other.
    ordered = sorted(got, key=lambda m: int(m.body.decode()[1:]))
    later = [
        m
        for m in ordered
        if handle_shape(m.receipt_handle)["start"] != handle_shape(m.receipt_handle)["offset"]
    ]
    roles = {"changed": later[-1], "changed_acked": later[-2]}
    roles["probe"] = next(m for m in ordered if m not in roles.values())
    role_of = {m.body.decode(): name for name, m in roles.items()}
    rest = [m for m in ordered if m.body.decode() not in role_of]
    run.note("ack.normal", [attempt(lambda m=m: cn.ack(m)) for m in rest])

    def with_handle(m: Any, handle: str, topic: str | None = None) -> Any:
        other = copy.copy(m)
        other.receipt_handle = handle
        if topic is not None:
            other._Message__topic = topic
        return other

    def handle_view(handle: str, original: str) -> dict:
        """A handle a change answered, its start offset said by what it equals."""
        shape, old = handle_shape(handle), handle_shape(original)
        start = shape.pop("start", None)
        shape["start_is"] = (
            "offset" if start == shape.get("offset") else "batch start" if start == old["start"] else start
        )
        for key in ("queue", "offset"):  # the server's pick of queue
            shape[key] = "same" if shape.get(key) == old[key] else shape.get(key)
        return shape

    # "changed": change to 3 s; ack with the old handle; after it came back: the changed handle.
    changed = roles["changed"]
    h_old = changed.receipt_handle
    run.note("change.changed", attempt(lambda: cn.change_invisible_duration(changed, 3)))
    h_new = changed.receipt_handle
    run.note("change.changed.new_handle", handle_view(h_new, h_old))
    run.note("ack.changed.old_handle", attempt(lambda: cn.ack(with_handle(changed, h_old))))
    # "changed_acked": change to 3 s, ack with the new handle at once, then with the old one.
    acked = roles["changed_acked"]
    h_acked_old = acked.receipt_handle
    run.note("change.changed_acked", attempt(lambda: cn.change_invisible_duration(acked, 3)))
    run.note(
        "ack.changed_acked.new_handle", attempt(lambda: cn.ack(with_handle(acked, acked.receipt_handle)))
    )
    run.note("ack.changed_acked.old_handle_after", attempt(lambda: cn.ack(with_handle(acked, h_acked_old))))
    # "probe": handles of another group, another topic, garbage; then its own.
    probe = roles["probe"]
    cl = consumer(GL, TN)  # a group created after the sends
    run.note("settings.consumer.late_group", run.settings(cl.replies[0]))
    run.note("ack.probe.other_group", attempt(lambda: cl.ack(probe)))
    run.note("ack.probe.other_topic", attempt(lambda: cn.ack(with_handle(probe, probe.receipt_handle, TF))))
    run.note("ack.garbage_handle", attempt(lambda: cn.ack(with_handle(probe, "garbage"))))
    run.note("ack.short_handle", attempt(lambda: cn.ack(with_handle(probe, "1 2 3"))))
    run.note(
        "change.garbage_handle", attempt(lambda: cn.change_invisible_duration(with_handle(probe, "x"), 10))
    )
    run.note("ack.probe", attempt(lambda: cn.ack(probe)))

    # The late group's first receive: the newest message of each queue (init mode MAX).
    newest: dict[str, int] = {}
    for m in got:
        shape = handle_shape(m.receipt_handle)
        newest[shape["queue"]] = max(newest.get(shape["queue"], -1), int(shape["offset"]))
    late = receive(cl)
    shapes = [handle_shape(m.receipt_handle) for m in late]
    run.note("receive.late_group", {
        "count_is_queues_with_messages": len(late) == len(newest),
        "each_newest_of_its_queue": all(int(s["offset"]) == newest.get(s["queue"]) for s in shapes),
        "attempts": sorted({m.delivery_attempt for m in late}),
    })  # fmt: skip
    for m in late:
        cl.ack(m)

    # A consumer of a group that exists now: the group's settings.
    cs = consumer(GN, TN)
    run.note("settings.consumer.group_exists", run.settings(cs.replies[0]))
    cs.shutdown()

    # FIFO: both groups in order; nothing more before the ack; the same again after the invisible time.
    first_fifo = receive(cf)
    popped_at = time.monotonic()

    def fifo_view(messages: list) -> dict:
        groups: dict[str, list] = {}
        for m in messages:
            groups.setdefault(m.message_group, []).append([m.body.decode(), m.delivery_attempt])
        return dict(sorted(groups.items()))

    run.note("receive.fifo", fifo_view(first_fifo))
    run.note("receive.fifo.messages", sorted((run.message(m) for m in first_fifo), key=lambda d: d["body"]))
    started = time.monotonic()
    run.note("receive.fifo.before_ack", attempt(lambda: receive(cf)))
    run.took("fifo.before_ack", time.monotonic() - started)

    # "changed" came back (the 3 s it was changed to, then the revive): its changed handle is expired.
    back: list = []
    deadline = time.monotonic() + 30
    while changed.body not in [m.body for m in back] and time.monotonic() < deadline:
        back += receive(cn)
    back_changed = [m for m in back if m.body == changed.body]
    run.note(
        "receive.changed.again",
        [[m.delivery_attempt, handle_shape(m.receipt_handle)["type"]] for m in back_changed],
    )
    run.note(
        "ack.changed.changed_handle_after_redelivery", attempt(lambda: cn.ack(with_handle(changed, h_new)))
    )
    run.note("change.changed.changed_handle_after_redelivery",
             attempt(lambda: cn.change_invisible_duration(with_handle(changed, h_new), 10)))  # fmt: skip
    run.note("ack.changed.redelivered", [attempt(lambda m=m: cn.ack(m)) for m in back_changed])
    for m in back:  # anything else that came back ("receive.normal.redelivered")
        if m.body != changed.body:
            attempt(lambda m=m: cn.ack(m))

    again: list = []
    deadline = popped_at + 40
    while len(again) < 6 and time.monotonic() < deadline:
        again += receive(cf)
    run.took("fifo.redelivered_after", time.monotonic() - popped_at)
    run.note("receive.fifo.redelivered", fifo_view(again))
    run.note("ack.fifo", [attempt(lambda m=m: cf.ack(m)) for m in again])
    run.note(
        "ack.fifo.first_handles_after_redelivery", [attempt(lambda m=m: cf.ack(m)) for m in first_fifo[:1]]
    )

    for t in background:
        t.join()
    run.took("delay.late_ms", (delayed.get("at", 0) - target_at) * 1000)
    run.note("receive.delay", delayed.get("messages"))
    run.note("transaction.checked", checked)
    if checked_at:
        run.took("transaction.checked_after", checked_at[0] - open_sent_at)
    run.note("receive.transaction", sorted(transactional, key=lambda d: d["body"]))

    # Nothing else comes: not the rolled back message, not what was acked (see "changed_acked").
    final: dict[str, Any] = {}

    def last(name: str, c: Any) -> None:
        got = receive(c)
        final[name] = [m.body.decode() for m in got]
        if name == "N":
            back.extend(got)

    threads = [threading.Thread(target=last, args=(n, c)) for n, c in (("N", cn), ("F", cf), ("X", cx))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    run.note("receive.final", {"F": final["F"], "X": final["X"]})
    # What came back on the normal topic after the handles were tried, by role.
    run.note("receive.normal.redelivered", sorted({role_of.get(m.body.decode(), "other") for m in back}))

    for c in (cn, cf, cd, cx, cl):
        c.shutdown()
    producer.shutdown()
    run.took("total", time.monotonic() - run.t0)
    print(json.dumps({"steps": run.steps, "timing": run.timing}), flush=True)


if __name__ == "__main__":
    main()
