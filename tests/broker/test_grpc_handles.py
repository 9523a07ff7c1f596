"""What the real 5.1.1 proxy was seen to answer (tests/broker/test_grpc_proxy_diff.py), checked on
rmq alone: receipt handles expire (``ReceiptHandle.isExpired``: retrieve time + invisible time),
so an ack or change with a handle whose time is up is INVALID_RECEIPT_HANDLE "receipt handle is
expired"; the invisible-time refusals' texts; a ``ProxyException``'s status text (its class name
first); every send's ``transaction_id``; ``__transactionId__`` on a committed transactional
message. Over a real socket with grpcio and rmq's stubs."""

from __future__ import annotations

import time

import pytest

from rmqcli.broker.grpc import consumer as cons
from rmqcli.broker.grpc import status as st
from rmqcli.broker.grpc.stubs import load
from tests.support.grpcserve import server_fixture, stub_fixture
from tests.support.serve import wait_until

S = load()
D, SV = S.definition, S.service
TOPIC, GROUP = "TopicHandles", "GID_HANDLES"
META = [("x-mq-client-id", "handles@1@0@x"), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2")]
EXPIRED = st.PROXY_EXCEPTION + "receipt handle is expired"


def test_a_handle_is_expired_from_its_retrieve_time_plus_its_invisible_time() -> None:
    extra = cons.handle_of("0 1700000000000 10000 1 0 broker-a 3 7 4096")
    cons.check_unexpired(extra, now=1700000009999)
    with pytest.raises(st.GrpcStatusError) as caught:
        cons.check_unexpired(extra, now=1700000010000)  # nextVisibleTime <= now
    assert (caught.value.code, caught.value.status_text) == (st.INVALID_RECEIPT_HANDLE, EXPIRED)
    assert caught.value.message == "receipt handle is expired"
    status = st.of_exception(D, caught.value, "AckMessage")
    assert (status.code, status.message) == (st.INVALID_RECEIPT_HANDLE, EXPIRED)


def test_invisible_time_refusals_say_what_the_proxy_says() -> None:
    with pytest.raises(st.GrpcStatusError) as caught:
        cons.check_invisible(5000, cons.MIN_INVISIBLE_MS)
    assert caught.value.message == "the invisibleTime is too small. min is 10000"
    with pytest.raises(st.GrpcStatusError) as caught:
        cons.check_invisible(cons.MAX_INVISIBLE_MS + 1, 0)
    assert caught.value.message == "the invisibleTime is too large. max is 43200000"
    assert caught.value.code == cons.ILLEGAL_INVISIBLE_TIME
    cons.check_invisible(0, 0)
    cons.check_invisible(cons.MAX_INVISIBLE_MS, cons.MIN_INVISIBLE_MS)


server = server_fixture(TOPIC)
stub = stub_fixture()


def send(stub, body: bytes, message_id: str, message_type: int = D.NORMAL) -> object:  # type: ignore[no-untyped-def]
    m = D.Message(body=body)
    m.topic.name = TOPIC
    m.system_properties.message_id = message_id
    m.system_properties.message_type = message_type
    m.system_properties.born_timestamp.FromMilliseconds(int(time.time() * 1000))
    answer = stub.SendMessage(SV.SendMessageRequest(messages=[m]), metadata=META)
    assert answer.status.code == D.OK, answer.status
    return answer.entries[0]


def receive(stub, want: int) -> list:  # type: ignore[no-untyped-def]
    queue = D.MessageQueue(topic=D.Resource(name=TOPIC), broker=D.Broker(name="broker-a"))
    request = SV.ReceiveMessageRequest(group=D.Resource(name=GROUP), message_queue=queue, batch_size=32)
    request.invisible_duration.FromSeconds(10)
    request.long_polling_timeout.FromSeconds(5)
    got: list = []
    deadline = time.monotonic() + 30
    while True:  # at least one receive
        got += [
            r.message
            for r in stub.ReceiveMessage(request, metadata=META, timeout=30)
            if r.HasField("message")
        ]
        if len(got) >= want or time.monotonic() >= deadline:
            return got


def ack(stub, message_id: str, handle: str) -> object:  # type: ignore[no-untyped-def]
    entry = SV.AckMessageEntry(message_id=message_id, receipt_handle=handle)
    request = SV.AckMessageRequest(
        group=D.Resource(name=GROUP), topic=D.Resource(name=TOPIC), entries=[entry]
    )
    return stub.AckMessage(request, metadata=META)


def change(stub, message_id: str, handle: str, seconds: int) -> object:  # type: ignore[no-untyped-def]
    request = SV.ChangeInvisibleDurationRequest(
        group=D.Resource(name=GROUP),
        topic=D.Resource(name=TOPIC),
        receipt_handle=handle,
        message_id=message_id,
    )
    request.invisible_duration.FromSeconds(seconds)
    return stub.ChangeInvisibleDuration(request, metadata=META)


def test_sends_and_a_transaction_as_the_proxy_answers_them(stub) -> None:  # type: ignore[no-untyped-def]
    receive(stub, 0)  # the group's first receive: its offsets start at the (empty) queues' ends
    normal = send(stub, b"plain", "01HANDLES00000000000000000000000N1")
    assert normal.transaction_id == normal.message_id  # every send answers its UNIQ_KEY
    half = send(stub, b"half", "01HANDLES00000000000000000000000T1", D.TRANSACTION)
    assert half.transaction_id == half.message_id
    end = SV.EndTransactionRequest(
        topic=D.Resource(name=TOPIC), message_id=half.message_id, transaction_id=half.transaction_id,
        resolution=D.COMMIT, source=D.SOURCE_CLIENT,
    )  # fmt: skip
    assert stub.EndTransaction(end, metadata=META).status.code == D.OK
    got = {m.body: m for m in receive(stub, 2)}
    assert set(got) == {b"plain", b"half"}
    assert dict(got[b"half"].user_properties) == {"__transactionId__": half.message_id}
    assert "__transactionId__" not in got[b"plain"].user_properties
    for m in got.values():
        assert (
            ack(stub, m.system_properties.message_id, m.system_properties.receipt_handle).status.code == D.OK
        )


def test_a_handle_whose_time_is_up_neither_acks_nor_changes(stub) -> None:  # type: ignore[no-untyped-def]
    receive(stub, 0)
    sent = send(stub, b"slow", "01HANDLES00000000000000000000000S1")
    [m] = receive(stub, 1)
    old = m.system_properties.receipt_handle
    changed = change(stub, sent.message_id, old, 1)
    assert changed.status.code == D.OK
    new = changed.receipt_handle
    expiry = cons.handle_of(new.rpartition(":")[0])  # the 9 fields before the seal
    wait_until(lambda: time.time() * 1000 >= expiry.pop_time + expiry.invisible_time, 5, "the handle's time")
    late = ack(stub, sent.message_id, new)
    assert late.status.code == D.INVALID_RECEIPT_HANDLE
    assert [(e.status.code, e.status.message) for e in late.entries] == [(D.INVALID_RECEIPT_HANDLE, EXPIRED)]
    refused = change(stub, sent.message_id, new, 10)
    assert (refused.status.code, refused.status.message) == (D.INVALID_RECEIPT_HANDLE, EXPIRED)
    [again] = receive(stub, 1)  # it came back: another consumer may hold it now
    assert again.body == b"slow" and again.system_properties.delivery_attempt == 2
    assert ack(stub, sent.message_id, again.system_properties.receipt_handle).status.code == D.OK
