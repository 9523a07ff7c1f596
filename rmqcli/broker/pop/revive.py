"""The revive service: ``PopReviveService`` of RocketMQ 5.1.1 as one asyncio task (research notes
issue21 §2 "Revive").

Every ``reviveInterval`` it reads what is new in each revive queue of ``rmq_sys_REVIVE_LOG_<cluster>``:
a ``ck`` is kept (keyed topic+group+queue+startOffset+popTime, as 5.1.1's merge key) until its
revive time (popTime + invisibleTime) has passed; an ``ack`` sets its message's bit in the ck. A due
ck's un-acked messages are put again into ``%RETRY%<group>_<topic>`` queue 0 (created on demand:
1 queue, perm 6, the group's offset there initialised to 0) with ``reconsumeTimes + 1`` and
``1ST_POP_TIME`` (set on the first revive), born and store host the broker's, then held POPs of the
group are woken. A ck whose topic or group is gone, or whose message is gone or newer than the ck
(a previous store's), revives nothing.

Progress is the consume offset of group ``CID_RMQ_SYS_REVIVE_GROUP`` on each revive queue, in the
same offset table as every consumer's (5.1.1's meaning: the offset of the last message handled).
It moves only past messages whose cks are all revived or fully acked, so after a restart (a SIGKILL
included) the queue is read again from there: a ck is never lost; at worst a message comes back
twice. A ck not due yet is kept in memory and the offset stays before it; due ones behind it are
revived and remembered so that they are not revived twice while this process runs. Acks come
through the timer (``revivelog``), delivered at the revive time or up to a precision unit later,
so every ck waits 2 s past its revive time for them, as 5.1.1's ``mergeAndRevive`` revives only
what is older than the newest message seen less 2 s (a ck whose time had passed when it was put
is stored in the revive queue at once, and waits the same).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from formats import commitlog as fmt
from formats.records import RecordError
from rmqcli.broker.pop import constants as k
from rmqcli.broker.pop.checkpoint import CheckpointError, PopCheckPoint, decode_ack, decode_ck
from rmqcli.store.write.messages import InnerMessage

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext
    from rmqcli.broker.pop.config import PopConfig
    from rmqcli.broker.pop.order import OrderInfoManager

log = logging.getLogger(__name__)

SCAN_BATCH = 4096  # revive-queue messages read per queue and round
MAX_PENDING = 1_000_000  # cks held per revive queue; past it the scan waits for some to be due
TIMER_GRACE_MS = k.ACK_TIME_INTERVAL + 1000
MAX_REVIVED = 2048  # messages put again per queue and round (the loop is not held longer)


@dataclass
class _Queue:
    """What one revive queue's scan holds between rounds."""

    next_offset: int = -1  # next revive-queue offset to read (-1: from the committed one)
    pending: dict[str, PopCheckPoint] = field(default_factory=dict)  # not revived yet
    due: dict[str, int] = field(default_factory=dict)  # when each pending ck is revived (ms)


class PopState(Protocol):
    """What the revive service uses of the broker's POP state (``service.PopService``, which makes
    the revive service: named here by its shape, so that this module does not import it back)."""

    revive_topic: str
    config: PopConfig
    order: OrderInfoManager

    def wake(self, topic: str, group: str, queue_id: int = -1) -> None: ...


class ReviveService:
    def __init__(self, ctl: BrokerContext, svc: PopState):
        self.ctl = ctl
        self.svc = svc
        self.queues: dict[int, _Queue] = {}

    @property
    def topic(self) -> str:
        return self.svc.revive_topic

    async def run(self) -> None:
        """Revive rounds until cancelled; the order info is persisted with the offsets."""
        interval = self.svc.config.revive_interval_ms / 1000
        persist_every = max(self.ctl.config.flush_consumer_offset_interval, 100) / 1000
        since_persist = 0.0
        try:
            while True:
                await asyncio.sleep(interval)
                if not self.ctl.config.is_slave:
                    try:
                        self.round()
                    except Exception:  # a round that fails is logged; the next one retries
                        log.exception("revive round failed")
                since_persist += interval
                if since_persist >= persist_every:
                    since_persist = 0.0
                    self.svc.order.persist()
        finally:
            self.svc.order.persist(now=True)

    def round(self, now: int | None = None) -> int:
        """One pass over every revive queue; the number of messages revived."""
        now = int(time.time() * 1000) if now is None else now
        revived = 0
        for qid in range(self.svc.config.revive_queue_num):
            revived += self._queue_round(qid, now)
        return revived

    def _queue_round(self, qid: int, now: int) -> int:
        q = self.queues.setdefault(qid, _Queue())
        committed = self.ctl.offsets.query(k.REVIVE_GROUP, self.topic, qid)
        if q.next_offset < 0:
            q.next_offset = max(committed + 1, self.ctl.store.min_offset(self.topic, qid))
        self._scan(qid, q)
        revived = 0
        if self.ctl.store.disk_full:  # nothing can be put: the cks wait
            return 0
        due = [(key, ck) for key, ck in q.pending.items() if q.due[key] <= now]
        for key, ck in sorted(due, key=lambda item: item[1].revive_offset):
            if revived >= MAX_REVIVED:
                break  # the rest next round
            revived += self._revive_ck(ck)
            del q.pending[key]
            del q.due[key]
        first_pending = min((ck.revive_offset for ck in q.pending.values()), default=q.next_offset)
        done = first_pending - 1
        if done > committed:
            self.ctl.offsets.commit(k.REVIVE_GROUP, self.topic, qid, done)
        return revived

    def _scan(self, qid: int, q: _Queue) -> None:
        store = self.ctl.store
        end = store.max_offset(self.topic, qid)
        low = store.min_offset(self.topic, qid)
        if q.next_offset < low:
            q.next_offset = low
        read = 0
        while q.next_offset < end and read < SCAN_BATCH and len(q.pending) < MAX_PENDING:
            units = store.units(self.topic, qid, q.next_offset, min(SCAN_BATCH - read, end - q.next_offset))
            if not units:  # a hole in the queue: skip to the next file
                per_file = store.units_per_file(self.topic, qid)
                q.next_offset += per_file - q.next_offset % per_file
                continue
            for unit in units:
                offset = q.next_offset
                q.next_offset += 1
                read += 1
                found = store.record_at(unit.physical_offset)
                if found is None:
                    continue
                self.ctl.metrics.message_out(self.topic, k.REVIVE_GROUP, 1, unit.size)  # as 5.1.1 counts it
                self._take(q, found[0], offset, qid)

    def _take(self, q: _Queue, rec, offset: int, qid: int) -> None:  # type: ignore[no-untyped-def]
        tag = rec.tags
        if (rec.born_address, rec.born_port) != (rec.store_address, rec.store_port):
            # rmq's own: only what a broker wrote itself (born host = store host) is a ck or ack;
            # a client's send to the revive topic could otherwise have any message copied
            return
        body = rec.body(raw=True)
        try:
            if tag == k.CK_TAG:
                ck = decode_ck(body)
                self.ctl.metrics.revive_out(ck.group, ck.topic, qid, "CK")
                ck.revive_offset = offset
                key = ck.merge_key()
                q.pending[key] = ck
                # its acks come through the timer at the revive time (or a precision unit later):
                # wait for them as 5.1.1's mergeAndRevive does (ackTimeInterval + 1 s)
                q.due[key] = ck.revive_time + TIMER_GRACE_MS
            elif tag == k.ACK_TAG:
                ack = decode_ack(body)
                self.ctl.metrics.revive_out(ack.group, ack.topic, qid, "ACK")
                ck = q.pending.get(ack.merge_key())
                if ck is not None:
                    index = ck.index_of_ack(ack.ack_offset)
                    if index >= 0:
                        ck.bit_map |= 1 << index
        except CheckpointError as exc:
            log.warning("revive queue %s offset %d: %s ignored: %s", self.topic, offset, tag, exc)

    def _revive_ck(self, ck: PopCheckPoint) -> int:
        """``reviveMsgFromCk``: every un-acked message of ``ck`` to its pop-retry topic."""
        ctl = self.ctl
        normal = k.normal_topic(ck.topic, ck.group)
        if ctl.topics.get(normal) is None or ctl.groups.find(ck.group) is None:
            return 0
        revived = 0
        for i in range(ck.num):
            if ck.bit_map & (1 << i):
                continue
            rec = self._message(ck.topic, ck.queue_id, ck.ack_offset(i))
            if rec is None or ck.pop_time < rec.store_timestamp:
                continue
            if self._retry(ck, rec):
                revived += 1
        if revived:
            self.svc.wake(normal, ck.group, -1)
        return revived

    def _message(self, topic: str, queue_id: int, offset: int):  # type: ignore[no-untyped-def]
        units = self.ctl.store.units(topic, queue_id, offset, 1)
        if not units:
            return None
        found = self.ctl.store.record_at(units[0].physical_offset)
        return found[0] if found is not None else None

    def _retry(self, ck: PopCheckPoint, rec) -> bool:  # type: ignore[no-untyped-def]
        """``reviveRetry``."""
        ctl = self.ctl
        topic = ck.topic if k.is_retry(ck.topic) else k.pop_retry_topic(ck.topic, ck.group)
        if ctl.topics.get(topic) is None:
            if ctl.topics.create_system(topic, k.RETRY_QUEUE_NUM, k.REVIVE_PERM) is None:
                log.warning("revive: cannot create %s", topic)
                return False
            if ctl.offsets.query(ck.group, topic, 0) < 0:
                ctl.offsets.commit(ck.group, topic, 0, 0)
        props: dict[str, str] = {}
        if rec.tags is not None:
            props[fmt.PROPERTY_TAGS] = rec.tags
        props.update(rec.properties)
        if rec.reconsume_times == 0 or k.PROPERTY_FIRST_POP_TIME not in props:
            props[k.PROPERTY_FIRST_POP_TIME] = str(ck.pop_time)
        host = ctl.writer.store_host
        try:
            data = rec.stored_body
        except (RecordError, IndexError):
            return False
        inner = InnerMessage(
            topic,
            0,
            data,
            props,
            None,
            flag=rec.flag,
            sys_flag=rec.sys_flag,
            born_timestamp=rec.born_timestamp,
            born_host=host,
            store_host=host,
            reconsume_times=rec.reconsume_times + 1,
        )
        if ctl.store.disk_full:
            return False
        ctl.store.put_inner(inner)
        ctl.metrics.revive_retry(ck.group, ck.topic, "PUT_OK")
        return True
