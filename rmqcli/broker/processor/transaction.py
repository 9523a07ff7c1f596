"""Transactional messages: ``TransactionalMessageBridge``, ``EndTransactionProcessor`` (END_TRANSACTION,
37) and ``TransactionalMessageCheckService`` (CHECK_TRANSACTION_STATE, 39) of RocketMQ 4.9.x.

A send with ``TRAN_MSG=true`` is stored as a *half* message: ``REAL_TOPIC``/``REAL_QID`` are added,
the transaction bits of sysFlag cleared and the record goes to ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0
(``parseHalfMessageInner``), where no consumer sees it. END_TRANSACTION resolves it: COMMIT (8)
stores the real message (sysFlag COMMIT, ``preparedTransactionOffset`` = the half record's offset,
properties as the half record's), then both COMMIT and ROLLBACK (12) write an *op* message to
``RMQ_SYS_TRANS_OP_HALF_TOPIC`` (tag ``d``, body: the half message's queue offset).

The check service walks the half queue from the offset of the system group ``CID_RMQ_SYS_TRANS``:
half messages with an op message are done; one older than ``transactionTimeOut`` is stored again
with ``TRANSACTION_CHECK_TIMES`` incremented and its producer group is asked for the outcome
(CHECK_TRANSACTION_STATE, oneway, the encoded message as body); after ``transactionCheckMax``
checks it is moved to ``TRANS_CHECK_MAX_TIME_TOPIC``. Both queue offsets are kept in
consumerOffset.json as the Java broker keeps them.

END_TRANSACTION's producer group must pass ``validate_group``, and a COMMIT stores nothing unless
the record's ``REAL_TOPIC`` passes ``validate_topic`` and ``REAL_QID`` is a queue number
(SYSTEM_ERROR otherwise; 4.9.8 checks none of these).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import TYPE_CHECKING

from formats import commitlog as fmt
from formats.javatext import INT_RANGE, LONG_RANGE, parse_boolean, parse_integer
from formats.names import TRANS_CHECK_GROUP, TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from rmqcli.broker.services.msgext import (
    PROPERTY_CHECK_IMMUNITY_TIME,
    PROPERTY_PREPARED_QUEUE_OFFSET,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    inner_from_record,
    serialise,
)
from rmqcli.broker.state import PERM_READ_WRITE, validate_group, validate_topic
from rmqcli.broker.timer import api as timer
from rmqcli.remoting import headers as hd
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.remoting.server.connection import Connection, Reply
from rmqcli.store.read.commitlog import Record
from rmqcli.store.write.messages import AppendResult, Host, InnerMessage, Message, inner_from_message
from rmqcli.store.write.records import encode_again, host_flags

if TYPE_CHECKING:
    from rmqcli.broker.acting.escape import EscapeBridge
    from rmqcli.broker.context import BrokerContext

log = logging.getLogger(__name__)

HALF_TOPIC = TRANS_HALF_TOPIC
OP_TOPIC = TRANS_OP_HALF_TOPIC
CHECK_MAX_TIME_TOPIC = TRANS_CHECK_MAX_TIME_TOPIC
SYSTEM_GROUP = TRANS_CHECK_GROUP  # MixAll.CID_SYS_RMQ_TRANS
REMOVE_TAG = "d"
COMMIT = int(fmt.TransactionType.COMMIT)
ROLLBACK = int(fmt.TransactionType.ROLLBACK)


def is_transactional(props: dict[str, str]) -> bool:
    """``Boolean.parseBoolean(TRAN_MSG)``."""
    return parse_boolean(props.get("TRAN_MSG"))


# --- the records ---------------------------------------------------------------------------------
def half_message(inner: InnerMessage) -> InnerMessage:
    """``parseHalfMessageInner``: the half record stored for a transactional send."""
    inner.properties[fmt.PROPERTY_REAL_TOPIC] = inner.topic
    inner.properties[fmt.PROPERTY_REAL_QID] = str(inner.queue_id)
    inner.sys_flag &= ~fmt.TRANSACTION_MASK
    inner.topic = HALF_TOPIC
    inner.queue_id = 0
    inner.properties_string = serialise(inner.properties)
    return inner


def committed_message(half: Record) -> InnerMessage:
    """``endMessageTransaction`` + COMMIT: the real message, properties string as the half record's
    map serialises it (``REAL_TOPIC``/``REAL_QID`` are cleared from the map only afterwards)."""
    props = dict(half.properties)
    text = serialise(props)
    topic = props.pop(fmt.PROPERTY_REAL_TOPIC, "")
    queue_id = int(props.pop(fmt.PROPERTY_REAL_QID, "0"))
    props[fmt.PROPERTY_WAIT] = "false"
    props.pop("TRAN_MSG", None)
    sys_flag = (half.sys_flag & ~fmt.TRANSACTION_MASK) | COMMIT
    return inner_from_record(
        half,
        topic,
        queue_id,
        props,
        text,
        sys_flag=sys_flag,
        prepared_transaction_offset=half.physical_offset,
    )


def escaped_half_message(half: Record) -> InnerMessage:
    """A half message as an acting master escapes it (``renewHalfMessageInner`` +
    ``buildTransactionalMessageFromHalfMessage`` of 5.1.1): a new prepared message of the real
    topic, ``TRAN_MSG=true``, without ``REAL_QID`` and ``TRAN_PREPARED_QUEUE_OFFSET``."""
    props = dict(half.properties)
    grown_to = len(props) + (fmt.PROPERTY_TRANSACTION_PREPARED not in props)  # 5.1.1 puts it, then clears two
    topic = props.get(fmt.PROPERTY_REAL_TOPIC, "")
    queue_id = int(props.pop(fmt.PROPERTY_REAL_QID, "0"))
    props.pop(PROPERTY_PREPARED_QUEUE_OFFSET, None)
    props[fmt.PROPERTY_TRANSACTION_PREPARED] = "true"
    sys_flag = (half.sys_flag & ~fmt.TRANSACTION_MASK) | int(fmt.TransactionType.PREPARED)
    text = serialise(props, grown_to)
    return inner_from_record(half, topic, queue_id, props, text, sys_flag=sys_flag)


def op_message(half_queue_offset: int, queue_id: int, host: Host, now: int) -> InnerMessage:
    """``addRemoveTagInTransactionOp`` / ``makeOpMessageInner``: tag ``d``, body the half offset.

    ``new Message(topic, "d", body)`` puts ``TAGS`` then ``WAIT=true``; the string is serialised
    before ``WAIT=false`` and the ``UNIQ_KEY`` are put into the map, so neither is stored.
    """
    props = {fmt.PROPERTY_TAGS: REMOVE_TAG, fmt.PROPERTY_WAIT: "true"}
    text = serialise(props)
    props[fmt.PROPERTY_WAIT] = "false"
    return InnerMessage(
        OP_TOPIC,
        queue_id,
        str(half_queue_offset).encode(),
        props,
        text,
        born_timestamp=now,
        born_host=host,
        store_host=host,
    )


def renewed_half_message(half: Record, props: dict[str, str]) -> InnerMessage:
    """``renewHalfMessageInner``: the half message stored again before a check (``props`` carries the
    incremented ``TRANSACTION_CHECK_TIMES``)."""
    text = serialise(props)
    props = dict(props)
    props[fmt.PROPERTY_WAIT] = "false"
    return inner_from_record(half, half.topic, half.queue_id, props, text, reconsume_times=0)


def immunity_half_message(half: Record, props: dict[str, str]) -> InnerMessage:
    """``renewImmunityHalfMessageInner``: stored again, with the first queue offset remembered."""
    inner = renewed_half_message(half, props)  # its map already has WAIT=false: serialised this time
    inner.properties.setdefault(PROPERTY_PREPARED_QUEUE_OFFSET, str(half.queue_offset))
    inner.properties_string = serialise(inner.properties)
    return inner


def _number_or_minus_one(text: str, bounds: tuple[int, int] = LONG_RANGE) -> int:
    """``getLong`` (``getInt`` with ``INT_RANGE``): the number, -1 when Java does not read one."""
    try:
        return parse_integer(text, bounds)
    except ValueError:
        return -1


def discarded_message(half: Record, props: dict[str, str]) -> InnerMessage:
    """``toMessageExtBrokerInner``: a half message checked too often, moved to TRANS_CHECK_MAX_TIME_TOPIC."""
    text = serialise(props)
    return inner_from_record(half, CHECK_MAX_TIME_TOPIC, 0, dict(props), text)


def check_body(half: Record, props: dict[str, str], queue_offset: int, physical_offset: int) -> bytes:
    """``MessageDecoder.encode(msgExt, false)`` of the message a check asks about: the real topic and
    queue, the renewed half record's offsets, the half record's other fields."""
    topic = props.get(fmt.PROPERTY_REAL_TOPIC, "").encode()
    queue_id = int(props.get(fmt.PROPERTY_REAL_QID, "0"))
    born_v6, store_v6 = len(half.born_address) == 16, len(half.store_address) == 16
    return encode_again(
        half,
        topic,
        serialise(props),
        sys_flag=(half.sys_flag & ~fmt.HOST_FLAGS) | host_flags(born_v6, store_v6),
        queue_id=queue_id,
        queue_offset=queue_offset,
        physical_offset=physical_offset,
    )


# --- the send side ---------------------------------------------------------------------------------
def prepare(ctl: BrokerContext, message: Message) -> AppendResult:
    """``asyncPrepareMessage``: store a transactional send as a half message."""
    ctl.topics.create_system(HALF_TOPIC, 1, PERM_READ_WRITE)
    inner = inner_from_message(message, ctl.writer.cluster)
    return ctl.store.put_inner(half_message(inner))


def put_op(ctl: BrokerContext, half: Record) -> None:
    """``deletePrepareMessage``: the op message for a resolved half message."""
    ctl.topics.create_system(OP_TOPIC, 1, PERM_READ_WRITE)
    host = ctl.writer.store_host
    ctl.store.put_inner(op_message(half.queue_offset, half.queue_id, host, int(time.time() * 1000)))


def real_queue_problem(half: Record) -> str | None:
    """Why the record's ``REAL_TOPIC``/``REAL_QID`` cannot take the committed message. 4.9.8 checks
    neither (nor that the record is a half message), so any stored message whose sender put its
    own ``REAL_TOPIC`` in the properties could be committed to a topic named like a path."""
    problem = validate_topic(half.properties.get(fmt.PROPERTY_REAL_TOPIC))
    if problem:
        return problem
    text = half.properties.get(fmt.PROPERTY_REAL_QID, "0")
    if not (text.isascii() and text.isdigit()) or int(text) > 0x7FFFFFFF:
        return f"REAL_QID[{text}] is not a queue number"
    return None


def end_transaction(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """END_TRANSACTION: COMMIT or ROLLBACK a half message; anything else gets no answer."""
    h = req.header(hd.EndTransactionRequestHeader)
    if ctl.config.is_slave:  # its CommitLog is its master's: "end transaction is forbidden"
        return req.response(RS.SLAVE_NOT_AVAILABLE)
    if h.commit_or_rollback not in (COMMIT, ROLLBACK):
        return None
    problem = validate_group(h.producer_group)
    if problem:
        return req.response(RS.SYSTEM_ERROR, problem)
    half = ctl.store.look_message(h.commit_log_offset)
    if half is None:
        return req.response(RS.SYSTEM_ERROR, "Find prepared transaction message failed")
    if half.properties.get(PROPERTY_PRODUCER_GROUP) != h.producer_group:
        return req.response(RS.SYSTEM_ERROR, "The producer group wrong")
    if half.queue_offset != h.tran_state_table_offset:
        return req.response(RS.SYSTEM_ERROR, "The transaction state table offset wrong")
    if half.physical_offset != h.commit_log_offset:
        return req.response(RS.SYSTEM_ERROR, "The commit log offset wrong")
    if h.commit_or_rollback == COMMIT:
        problem = real_queue_problem(half)
        if problem:
            return req.response(RS.SYSTEM_ERROR, problem)
        if ctl.store.disk_full:  # the final message's putMessage: SERVICE_NOT_AVAILABLE
            return req.response(RS.SERVICE_NOT_AVAILABLE, "Service not available now.")
        try:  # 5.x: putMessage's timer hook times a committed message with a timer property
            timer.put_inner(ctl, committed_message(half))
        except timer.TimerRefusal:  # sendFinalMessage's default case; the half stays for the check
            return req.response(RS.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT")
    if not ctl.store.disk_full:  # a rollback's op message cannot be stored either; the check finds it
        put_op(ctl, half)
    return req.response()


# --- the check service -----------------------------------------------------------------------------
class TransactionCheckService:
    """``TransactionalMessageCheckService`` + ``TransactionalMessageServiceImpl.check``."""

    def __init__(self, ctl: BrokerContext):
        self.ctl = ctl
        self.checks_sent = 0
        self.escaped = 0
        self.escape: EscapeBridge | None = None  # where a slave acting as master sends half messages

    def _offset(self, topic: str, queue_id: int) -> int:
        offset = self.ctl.offsets.query(SYSTEM_GROUP, topic, queue_id)
        return offset if offset >= 0 else self.ctl.store.min_offset(topic, queue_id)

    def _op_offsets(self, queue_id: int, op_offset: int, half_offset: int) -> tuple[dict[int, int], list]:
        """``fillOpRemoveMap`` over every op message: half offset -> op offset, and the done ops."""
        store = self.ctl.store
        removed: dict[int, int] = {}
        done: list[int] = []
        offset, end = op_offset, store.max_offset(OP_TOPIC, queue_id)
        while offset < end:
            units = store.units(OP_TOPIC, queue_id, offset, 256)
            if not units:
                break
            for unit in units:
                rec = store.look_message(unit.physical_offset)
                try:
                    half_offset_of_op = int(rec.stored_body.decode()) if rec is not None else -1
                except ValueError:
                    half_offset_of_op = -1
                if rec is None or rec.properties.get(fmt.PROPERTY_TAGS) != REMOVE_TAG:
                    done.append(offset)
                elif half_offset_of_op < half_offset:  # unreadable bodies count as done too
                    done.append(offset)
                else:
                    removed[half_offset_of_op] = offset
                offset += 1
        return removed, done

    def check(self, now: int | None = None) -> int:
        """One run over the half queue; returns how many checks were sent."""
        store, config = self.ctl.store, self.ctl.config
        sent = 0
        if store.queue(HALF_TOPIC, 0) is None or store.disk_full:  # its puts would be refused
            return 0
        start = int(time.time() * 1000) if now is None else now
        queue_id = 0
        half_offset = self._offset(HALF_TOPIC, queue_id)
        op_offset = self._offset(OP_TOPIC, queue_id)
        removed, done = self._op_offsets(queue_id, op_offset, half_offset)
        i = new_offset = half_offset
        end = store.max_offset(HALF_TOPIC, queue_id)
        while i < end:
            if i in removed:
                done.append(removed.pop(i))
            else:
                units = store.units(HALF_TOPIC, queue_id, i, 1)
                half = store.look_message(units[0].physical_offset) if units else None
                if half is not None:
                    props = dict(half.properties)
                    times = _number_or_minus_one(props.get(PROPERTY_TRANSACTION_CHECK_TIMES, "0"), INT_RANGE)
                    # needDiscard (checked transactionCheckMax times; else the count goes up) or
                    # needSkip (born longer than fileReservedTime ago): both are moved aside
                    discard = (
                        PROPERTY_TRANSACTION_CHECK_TIMES in props and times >= config.transaction_check_max
                    )
                    if not discard:
                        props[PROPERTY_TRANSACTION_CHECK_TIMES] = str(times + 1)
                        discard = start - half.born_timestamp > config.retention.reserved_ms
                    if discard:
                        self.ctl.topics.create_system(CHECK_MAX_TIME_TOPIC, 1, PERM_READ_WRITE)
                        store.put_inner(discarded_message(half, props))
                        log.warning(
                            "half message %s checked %d times or too old; discarded", half.msg_id, times
                        )
                    else:
                        if half.store_timestamp >= start:
                            break
                        age = start - half.born_timestamp
                        immunity_text = props.get(PROPERTY_CHECK_IMMUNITY_TIME)
                        if immunity_text is None:
                            if 0 <= age < config.transaction_timeout:
                                break
                        else:
                            immunity = _number_or_minus_one(immunity_text)
                            immunity = config.transaction_timeout if immunity == -1 else immunity * 1000
                            if age < immunity:
                                if not self._immune(half, props, removed, done):
                                    break
                                i += 1
                                new_offset = i
                                continue
                        renewed = store.put_inner(renewed_half_message(half, props))
                        if self._send_check(half, props, renewed):
                            sent += 1
            i += 1
            new_offset = i
        self._commit(queue_id, half_offset, new_offset, op_offset, done)
        self.checks_sent += sent
        return sent

    def _commit(
        self, queue_id: int, half_offset: int, new_offset: int, op_offset: int, done: list[int]
    ) -> None:
        """The half queue's new offset, and the op queue's past every op done in a row."""
        if new_offset != half_offset:
            self.ctl.offsets.commit(SYSTEM_GROUP, HALF_TOPIC, queue_id, new_offset)
        done.sort()
        new_op = op_offset
        for offset in done:
            if offset != new_op:
                break
            new_op += 1
        if new_op != op_offset:
            self.ctl.offsets.commit(SYSTEM_GROUP, OP_TOPIC, queue_id, new_op)

    async def escape_check(self) -> int:
        """The check on a slave acting as master (SlaveActingMaster, 5.1.1): it asks no producer;
        every half message without an op goes through ``escape`` as a new prepared message of its
        real topic to another group's master, which checks it back. Its offset moves on once it
        is stored there; one that cannot go stops the run and is tried again at the next."""
        store = self.ctl.store
        if self.escape is None or store.queue(HALF_TOPIC, 0) is None:
            return 0
        half_offset = self._offset(HALF_TOPIC, 0)
        op_offset = self._offset(OP_TOPIC, 0)
        removed, done = self._op_offsets(0, op_offset, half_offset)
        i, end, sent = half_offset, store.max_offset(HALF_TOPIC, 0), 0
        while i < end:
            if i in removed:
                done.append(removed.pop(i))
            else:
                units = store.units(HALF_TOPIC, 0, i, 1)
                half = store.look_message(units[0].physical_offset) if units else None
                if half is not None:
                    try:
                        inner = escaped_half_message(half)
                    except ValueError:
                        log.error("half message %s has a bad REAL_QID; not escaped", half.msg_id)
                    else:
                        if not await self.escape.put(inner):
                            break
                        sent += 1
            i += 1
        self._commit(0, half_offset, i, op_offset, done)
        self.escaped += sent
        return sent

    def _immune(self, half: Record, props: dict[str, str], removed: dict[int, int], done: list[int]) -> bool:
        """``checkPrepareQueueOffset``: a half message still within its own immunity time is done when
        its first queue offset (``TRAN_PREPARED_QUEUE_OFFSET``) has an op message, else stored again
        (remembering that offset); False when the remembered offset does not parse."""
        text = props.get(PROPERTY_PREPARED_QUEUE_OFFSET)
        if text is not None:
            prepared = _number_or_minus_one(text)
            if prepared == -1:
                return False
            if prepared in removed:
                done.append(removed.pop(prepared))
                return True
        self.ctl.store.put_inner(immunity_half_message(half, props))
        return True

    def _send_check(self, half: Record, props: dict[str, str], renewed: AppendResult) -> bool:
        """``sendCheckMessage``: CHECK_TRANSACTION_STATE to one live producer of the group."""
        group = props.get(PROPERTY_PRODUCER_GROUP, "")
        channels = [
            ch for ch in self.ctl.clients.producers.get(group, {}).values() if not ch.connection.closed
        ]
        if not channels:
            return False
        uniq = props.get(fmt.PROPERTY_UNIQ_KEY)
        header = hd.CheckTransactionStateRequestHeader(
            tran_state_table_offset=renewed.queue_offset,
            commit_log_offset=renewed.physical_offset,
            msg_id=uniq,
            transaction_id=uniq,
            offset_msg_id=renewed.msg_id,
        )
        try:
            body = check_body(half, props, renewed.queue_offset, renewed.physical_offset)
        except ValueError:  # REAL_QID not a number: Java's sendCheckMessage fails and logs too
            log.error("half message %s has a bad REAL_QID; not checked", half.msg_id)
            return False
        return random.choice(channels).connection.send_oneway(
            RC.CHECK_TRANSACTION_STATE, header.to_ext_fields(), body
        )

    async def run(self) -> None:
        interval = max(self.ctl.config.transaction_check_interval, 100) / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                if self.escape is not None and not self.escape.local:
                    await self.escape_check()
                else:
                    self.check()
            except Exception:
                log.exception("transaction check failed")


HANDLERS = {RC.END_TRANSACTION: end_transaction}
