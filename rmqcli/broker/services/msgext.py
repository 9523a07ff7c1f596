"""A stored record taken back as a message to store again (``MessageExt`` -> ``MessageExtBrokerInner``).

The broker re-puts stored messages in four places: consumer send-back
(``SendMessageProcessor.asyncConsumerSendMsgBack``), delayed delivery
(``ScheduleMessageService.messageTimeup``), the end of a transaction
(``EndTransactionProcessor.endMessageTransaction``) and the transaction check
(``TransactionalMessageBridge.renewHalfMessageInner``). Each starts from
``lookMessageByOffset``: the record decoded with its body as stored (still compressed when the
compressed bit is set) and its properties in a ``HashMap`` filled in stored order; each then
serialises that map again (``MessageDecoder.messageProperties2String``), so the insertion order of
the dict kept here is the one Java's map has (formats.md §1.7).
"""

from __future__ import annotations

from formats import commitlog as fmt
from formats.commitlog import (  # noqa: F401 - MessageConst names the broker's modules take from here
    PROPERTY_CHECK_IMMUNITY_TIME,
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_PREPARED_QUEUE_OFFSET,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_PREPARED,
)
from rmqcli.store.read.commitlog import Record
from rmqcli.store.write.messages import Host, InnerMessage


def born_host(rec: Record) -> Host:
    return Host(rec.born_address, rec.born_port)


def store_host(rec: Record) -> Host:
    return Host(rec.store_address, rec.store_port)


def serialise(props: dict[str, str], grown_to: int = 0) -> bytes:
    """``messageProperties2String`` of a broker-side map that held ``grown_to`` entries before
    some were cleared (``hashmap_order``)."""
    return fmt.encode_properties_as_broker(props, grown_to=grown_to)


def inner_from_record(
    rec: Record,
    topic: str,
    queue_id: int,
    props: dict[str, str],
    properties_string: bytes | None,
    *,
    sys_flag: int | None = None,
    reconsume_times: int | None = None,
    prepared_transaction_offset: int = 0,
) -> InnerMessage:
    """The fields every re-put copies from the stored message: body (as stored), flag, sysFlag,
    born time and host, store host, reconsume times."""
    return InnerMessage(
        topic,
        queue_id,
        rec.stored_body,
        props,
        properties_string,
        flag=rec.flag,
        sys_flag=rec.sys_flag if sys_flag is None else sys_flag,
        born_timestamp=rec.born_timestamp,
        born_host=born_host(rec),
        store_host=store_host(rec),
        reconsume_times=rec.reconsume_times if reconsume_times is None else reconsume_times,
        prepared_transaction_offset=prepared_transaction_offset,
    )
