"""Receipt handles cannot be forged (issue 41): over a real socket with grpcio and rmq's stubs, a
handle rmq did not give out, one given to another group or for another topic, and one whose fields
were edited are INVALID_RECEIPT_HANDLE, do nothing (the message is not replayed early) and cost
little; after a flood of forged acks a timer and a POP redelivery still arrive on time."""

from __future__ import annotations

import base64
import time

from rmqcli.broker.grpc.stubs import load
from tests.support.grpcserve import server_fixture, stub_fixture

S = load()
D, SV = S.definition, S.service
TOPIC, OTHER_TOPIC = "TopicForged", "TopicForgedOther"
GROUP, VICTIM = "GID_FORGER", "GID_VICTIM"
META = [("x-mq-client-id", "forger@1@0@x"), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2")]

server = server_fixture(TOPIC)
stub = stub_fixture()


def send(stub, body: bytes, deliver_at_ms: int | None = None) -> str:  # type: ignore[no-untyped-def]
    m = D.Message(body=body)
    m.topic.name = TOPIC
    m.system_properties.message_id = f"01FORGED{time.time_ns():024d}"[:34]
    m.system_properties.message_type = D.NORMAL if deliver_at_ms is None else D.DELAY
    m.system_properties.born_timestamp.FromMilliseconds(int(time.time() * 1000))
    if deliver_at_ms is not None:
        m.system_properties.delivery_timestamp.FromMilliseconds(deliver_at_ms)
    answer = stub.SendMessage(SV.SendMessageRequest(messages=[m]), metadata=META)
    assert answer.status.code == D.OK, answer.status
    return str(answer.entries[0].message_id)


def receive(stub, group: str, invisible_s: int = 10, polling_s: int = 5) -> list:  # type: ignore[no-untyped-def]
    queue = D.MessageQueue(topic=D.Resource(name=TOPIC), broker=D.Broker(name="broker-a"))
    request = SV.ReceiveMessageRequest(group=D.Resource(name=group), message_queue=queue, batch_size=32)
    request.invisible_duration.FromSeconds(invisible_s)
    request.long_polling_timeout.FromSeconds(polling_s)
    return [
        r.message for r in stub.ReceiveMessage(request, metadata=META, timeout=30) if r.HasField("message")
    ]


def ack(stub, group: str, handles: list[str], topic: str = TOPIC) -> object:  # type: ignore[no-untyped-def]
    entries = [SV.AckMessageEntry(message_id="00", receipt_handle=h) for h in handles]
    request = SV.AckMessageRequest(
        group=D.Resource(name=group), topic=D.Resource(name=topic), entries=entries
    )
    return stub.AckMessage(request, metadata=META)


def change(stub, group: str, handle: str, seconds: int, topic: str = TOPIC) -> object:  # type: ignore[no-untyped-def]
    request = SV.ChangeInvisibleDurationRequest(
        group=D.Resource(name=group), topic=D.Resource(name=topic), receipt_handle=handle, message_id="00"
    )
    request.invisible_duration.FromSeconds(seconds)
    return stub.ChangeInvisibleDuration(request, metadata=META)


def forged(pop_time: int, offset: int, queue: int = 0, mac: str = "") -> str:
    """A well-formed handle for a far invisible time (not expired), optionally with a made-up MAC."""
    plain = f"{offset} {pop_time} 43200000 0 0 broker-a {queue} {offset} 0"
    return f"{plain}:{mac}" if mac else plain


def test_foreign_edited_and_made_up_handles_are_refused_and_change_nothing(stub) -> None:  # type: ignore[no-untyped-def]
    for group in (GROUP, VICTIM):
        receive(stub, group, polling_s=1)  # first receives: the groups start at the queues' ends
    send(stub, b"victim's")
    [mine] = receive(stub, VICTIM, invisible_s=60)
    handle = mine.system_properties.receipt_handle
    plain, _, mac = handle.rpartition(":")
    fields = plain.split(" ")
    assert len(fields) == 9 and len(mac) == 22  # still the proxy's 9 fields, the MAC after the last
    later = " ".join([fields[0], str(int(fields[1]) + 1), *fields[2:]])
    now = int(time.time() * 1000)
    bad = [
        later + ":" + mac,  # the retrieve time edited
        forged(now, int(fields[7])),  # no seal
        forged(now, int(fields[7]), mac=base64.urlsafe_b64encode(b"\0" * 16).decode().rstrip("=")),
    ]
    refused = ack(stub, VICTIM, bad)
    assert [e.status.code for e in refused.entries] == [D.INVALID_RECEIPT_HANDLE] * 3
    assert {e.status.message for e in refused.entries} == {"receipt handle is invalid"}
    # the victim's handle in another group's call, or for another topic: refused, no replay
    assert ack(stub, GROUP, [handle]).entries[0].status.code == D.INVALID_RECEIPT_HANDLE
    assert change(stub, GROUP, handle, 0).status.code == D.INVALID_RECEIPT_HANDLE
    assert change(stub, VICTIM, later + ":" + mac, 0).status.code == D.INVALID_RECEIPT_HANDLE
    assert change(stub, VICTIM, handle, 0, OTHER_TOPIC).status.code == D.INVALID_RECEIPT_HANDLE
    assert receive(stub, VICTIM, polling_s=2) == []  # still invisible: nothing was changed
    [theirs] = receive(stub, GROUP, polling_s=1)  # the other group's own copy, with its own handle
    assert theirs.system_properties.receipt_handle != handle
    assert ack(stub, GROUP, [theirs.system_properties.receipt_handle]).status.code == D.OK
    # its own handle works, and a second ack of it is answered OK without another ack message
    assert ack(stub, VICTIM, [handle]).status.code == D.OK
    assert ack(stub, VICTIM, [handle]).status.code == D.OK


def test_a_forged_ack_flood_is_cheap_and_delays_no_timer_nor_redelivery(stub) -> None:  # type: ignore[no-untyped-def]
    receive(stub, GROUP, polling_s=1)
    now = int(time.time() * 1000)
    batch = [forged(now + 86_400_000, i, queue=i % 8) for i in range(1024)]
    started = time.monotonic()
    for _ in range(40):  # 40,960 forged acks
        answer = ack(stub, GROUP, batch)
        assert {e.status.code for e in answer.entries} == {D.INVALID_RECEIPT_HANDLE}
    flood_s = time.monotonic() - started
    assert flood_s < 30, flood_s
    # after it: a 3 s timer and a 10 s redelivery arrive on time
    send(stub, b"popped")
    [popped] = receive(stub, GROUP, invisible_s=10)
    popped_at = time.monotonic()
    send(stub, b"timer", deliver_at_ms=int(time.time() * 1000) + 3000)
    timer_sent = time.monotonic()
    seen: dict[bytes, float] = {}
    while len(seen) < 2 and time.monotonic() - popped_at < 30:
        for m in receive(stub, GROUP, invisible_s=30, polling_s=5):
            seen.setdefault(m.body, time.monotonic())
            ack(stub, GROUP, [m.system_properties.receipt_handle])
    assert set(seen) == {b"popped", b"timer"}, seen
    assert popped.body == b"popped"
    assert seen[b"timer"] - timer_sent < 3 + 4
    assert 9 < seen[b"popped"] - popped_at < 10 + 6
    print(
        f"40,960 forged acks: {flood_s:.1f} s; then the 3 s timer in {seen[b'timer'] - timer_sent:.1f} s, "
        f"the 10 s redelivery in {seen[b'popped'] - popped_at:.1f} s"
    )
