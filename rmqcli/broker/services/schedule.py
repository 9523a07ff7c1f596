"""Delayed delivery: ``ScheduleMessageService`` of RocketMQ 4.9.x.

A message with a ``DELAY`` level (a producer's, or a send-back's) is stored in
``SCHEDULE_TOPIC_XXXX`` queue ``level - 1`` with its delivery time as the consume-queue tags code
(``CommitLog.putMessage`` and the dispatch do that, ``rmqcli.store.write.messages.apply_delay``,
formats.md §1.13). This service walks each level's queue from its offset in
``config/delayOffset.json``: every unit whose time has come (a time further away than the level's
delay counts as now, ``correctDeliverTimestamp``) is read back, turned into the message to deliver
(``messageTimeup``) and stored in its real topic and queue; the offset then moves past it. The
first unit not yet due stops the level until the next round (every 100 ms,
``DELAY_FOR_A_WHILE``). Offsets are persisted every ``flushDelayOffsetInterval`` and at shutdown,
so after a crash the messages delivered since the last persist are delivered again, as with the
Java broker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from formats import commitlog as fmt
from formats.names import SCHEDULE_TOPIC, TRANS_HALF_TOPIC
from rmqcli.broker.services.msgext import inner_from_record, serialise
from rmqcli.store.naming import is_safe_topic_dir
from rmqcli.store.read.commitlog import Record
from rmqcli.store.write.messages import InnerMessage

if TYPE_CHECKING:
    from rmqcli.broker.acting.escape import EscapeBridge
    from rmqcli.broker.context import BrokerContext

log = logging.getLogger(__name__)

FIRST_DELAY_SECONDS = 1.0  # FIRST_DELAY_TIME
ROUND_SECONDS = 0.1  # DELAY_FOR_A_WHILE
UNITS_PER_ROUND = 256
MAX_PER_ROUND = 4096  # per level and round, so a large backlog does not stall the event loop


def delivered_message(rec: Record) -> InnerMessage:
    """``messageTimeup``: the message to store in ``REAL_TOPIC``/``REAL_QID``.

    The properties string is serialised before ``WAIT=false`` is set and ``DELAY`` cleared, so
    the stored record keeps ``DELAY``, ``REAL_TOPIC``, ``REAL_QID`` and the scheduled ``WAIT``;
    only the map (which decides the store's delay handling) loses ``DELAY``.
    """
    props = dict(rec.properties)
    text = serialise(props)
    props[fmt.PROPERTY_WAIT] = "false"
    props.pop(fmt.PROPERTY_DELAY, None)
    topic = props.get(fmt.PROPERTY_REAL_TOPIC, "")
    queue_id = int(props.get(fmt.PROPERTY_REAL_QID, "0"))
    return inner_from_record(rec, topic, queue_id, props, text)


class ScheduleService:
    """Delivers due messages of every delay level; offsets live in ``writer.config.delay_offsets``."""

    def __init__(self, ctl: BrokerContext):
        self.ctl = ctl
        self.delays = fmt.parse_delay_levels(ctl.writer.settings.message_delay_level)
        self.changed = False
        self.delivered = 0
        self.escape: EscapeBridge | None = None  # where a slave acting as master delivers

    @property
    def offsets(self) -> dict[int, int]:
        return self.ctl.writer.config.delay_offsets

    def correct_offsets(self) -> None:
        """``correctDelayOffset``: an offset outside its queue's ``[min, max]`` is moved into it."""
        store = self.ctl.store
        for level, offset in list(self.offsets.items()):
            if level < 1 or level > len(self.delays) or store.queue(SCHEDULE_TOPIC, level - 1) is None:
                continue
            low = store.min_offset(SCHEDULE_TOPIC, level - 1)
            high = store.max_offset(SCHEDULE_TOPIC, level - 1)
            fixed = min(max(offset, low), high)
            if fixed != offset:
                log.warning("delay level %d: offset %d moved into [%d, %d]", level, offset, low, high)
                self.offsets[level] = fixed
                self.changed = True

    def deliver_due(self, now: int | None = None) -> int:
        """One round over every level, stored here; returns how many messages were delivered."""
        total = 0
        for level in range(1, len(self.delays) + 1):
            total += self._deliver_level(level, now)
        return total

    async def escape_due(self, now: int | None = None) -> int:
        """One round over every level on a slave acting as master (SlaveActingMaster): each due
        message goes through ``escape`` to another group's master; one that cannot go stops its
        level until the next round (nothing is skipped)."""
        total = 0
        for level in range(1, len(self.delays) + 1):
            for inner, after, physical, _ in self._due(level, now):
                if inner is not None and not self._delivered_by_master(inner, physical):
                    if self.escape is None or not await self.escape.put(inner):
                        break
                    total += 1
                    self.delivered += 1
                self._advance(level, after)
        return total

    def _delivered_by_master(self, inner: InnerMessage, scheduled_at: int) -> bool:
        """Whether the master sent this one on before it left: its delay offsets reach a slave up to
        ``SlaveSynchronize``'s period late, but the message it stored in the real topic (same
        ``UNIQ_KEY``, after the scheduled record) was replicated and indexed."""
        uniq = inner.properties.get(fmt.PROPERTY_UNIQ_KEY)
        if not uniq:
            return False
        for raw in self.ctl.store.query(inner.topic, uniq, 32, 0, 1 << 62):
            physical = fmt.stored_physical_offset(raw)
            if physical > scheduled_at:
                return True
        return False

    def _deliver_level(self, level: int, now: int | None) -> int:
        count = 0
        for inner, after, _, size in self._due(level, now):
            if inner is not None:
                if self.ctl.store.disk_full:  # putMessage refused: the level waits for the next round
                    return count
                try:
                    stored = self.ctl.store.put_inner(inner)
                except Exception:
                    log.exception("delivering delay level %d offset %d failed", level, after - 1)
                    return count
                count += 1
                self.delivered += 1
                self.ctl.metrics.scheduled(inner.topic, size, stored.size)
            self._advance(level, after)
        return count

    def _due(self, level: int, now: int | None) -> Iterator[tuple[InnerMessage | None, int, int, int]]:
        """The due units of ``level`` from its offset, in order: the message to deliver (None for
        a unit that is skipped), the offset after it, the scheduled record's CommitLog offset and
        size; at most ``MAX_PER_ROUND`` a round."""
        store = self.ctl.store
        queue_id = level - 1
        if store.queue(SCHEDULE_TOPIC, queue_id) is None:
            return
        offset = self.offsets.get(level, 0)
        count = 0
        while True:
            units = store.units(SCHEDULE_TOPIC, queue_id, offset, UNITS_PER_ROUND)
            if not units:
                if offset < store.min_offset(SCHEDULE_TOPIC, queue_id):
                    self._advance(level, store.min_offset(SCHEDULE_TOPIC, queue_id))
                return
            if count >= MAX_PER_ROUND:
                return
            for unit in units:
                clock = int(time.time() * 1000) if now is None else now
                deliver_at = unit.tags_code
                if deliver_at > clock + self.delays[level - 1]:  # correctDeliverTimestamp
                    deliver_at = clock
                if deliver_at > clock:
                    return
                offset += 1
                count += 1
                yield self._message(unit.physical_offset), offset, unit.physical_offset, unit.size

    def _message(self, physical: int) -> InnerMessage | None:
        """``messageTimeup`` of the record at ``physical``; None (logged) when it cannot be delivered."""
        rec = self.ctl.store.look_message(physical)
        try:
            inner = delivered_message(rec) if rec is not None else None
        except ValueError:  # REAL_QID not a number: Java retries it forever; skipped here
            log.error("scheduled record at %d has a bad REAL_QID; skipped", physical)
            return None
        if inner is not None and inner.topic and not is_safe_topic_dir(inner.topic):
            log.error("scheduled record at %d names no topic directory; skipped", physical)
            return None
        if inner is not None and (not inner.topic or inner.topic == TRANS_HALF_TOPIC):
            log.error("scheduled record at %d: real topic %r; discarded", physical, inner.topic)
            return None
        return inner

    def _advance(self, level: int, offset: int) -> None:
        self.offsets[level] = offset
        self.changed = True

    async def run(self) -> None:
        """The timer tasks: one round every 100 ms after a first delay of 1 s."""
        self.correct_offsets()
        await asyncio.sleep(FIRST_DELAY_SECONDS)
        while True:
            try:
                if self.escape is not None and not self.escape.local:
                    await self.escape_due()
                elif self.deliver_due() and self.ctl.store.sync_flush:
                    self.ctl.store.flushed()  # GroupCommitService.wakeup for the unwaited puts
            except Exception:
                log.exception("delayed delivery failed")
            await asyncio.sleep(ROUND_SECONDS)
