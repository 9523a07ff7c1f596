"""Orderly POP: ``ConsumerOrderInfoManager`` of RocketMQ 5.1.1 (research notes issue21 §2 "FIFO").

One ``OrderInfo`` per (``topic@group``, queue): the last popped batch (offsets, pop time, invisible
time, per-offset next visible time and consumed count, acked bits, attempt id). A queue is blocked
while an un-acked message of its batch is still invisible; an ack moves the consumer offset to the
first un-acked offset. Persisted as ``config/consumerOrderInfo.json`` (fastjson keys ``t i o ot oc
l cm a``) through the store's config writer (written beside, fsynced, renamed), taken on the loop.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from formats import fastjson
from rmqcli.broker.pop import constants as k
from rmqcli.errors import CorruptDataError
from rmqcli.store.configfiles import load_config
from rmqcli.store.write.configsync import ConfigWriter

log = logging.getLogger(__name__)

FILE_NAME = "consumerOrderInfo.json"
CLEAN_SPAN_MS = 24 * 3600 * 1000  # an order info not consumed for a day is dropped
MAX_BATCH = 64  # offsets of one batch (a POP gives at most 32); commitOffsetBit is a Java long


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class OrderInfo:
    pop_time: int
    invisible_time: int | None
    offsets: list[int]  # absolute queue offsets of the batch
    last_consume: int
    commit_bits: int = 0
    attempt_id: str | None = None
    next_visible: dict[int, int] = field(default_factory=dict)
    consumed: dict[int, int] = field(default_factory=dict)

    def not_acked(self, i: int) -> bool:
        return not self.commit_bits & (1 << i)

    def need_block(self, attempt_id: str | None, invisible_time: int, now: int) -> bool:
        """``OrderInfo.needBlock``."""
        if not self.offsets:
            return False
        if self.attempt_id is not None and self.attempt_id == attempt_id:
            return False
        if self.invisible_time is None or self.invisible_time <= 0:
            self.invisible_time = invisible_time
        for i, offset in enumerate(self.offsets):
            if self.not_acked(i):
                visible = self.next_visible.get(offset, self.pop_time + (self.invisible_time or 0))
                if now < visible:
                    return True
        return False

    def next_offset(self) -> int:
        """``getNextOffset``: the first un-acked offset, or last + 1 once all are acked."""
        for i, offset in enumerate(self.offsets):
            if self.not_acked(i):
                return offset
        return self.offsets[-1] + 1

    def to_json(self) -> dict[str, Any]:
        first = self.offsets[0] if self.offsets else 0
        data: dict[str, Any] = {}
        if self.attempt_id is not None:
            data["a"] = self.attempt_id
        data["cm"] = self.commit_bits
        if self.invisible_time is not None:  # fastjson leaves null fields out
            data["i"] = self.invisible_time
        data["l"] = self.last_consume
        data["o"] = [first] + [o - first for o in self.offsets[1:]]
        if self.consumed:
            data["oc"] = {o: c for o, c in sorted(self.consumed.items())}
        if self.next_visible:
            data["ot"] = {o: t for o, t in sorted(self.next_visible.items())}
        data["t"] = self.pop_time
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OrderInfo:
        raw = [int(x) for x in data.get("o") or []][:MAX_BATCH]
        offsets = raw[:1] + [raw[0] + d for d in raw[1:]] if raw else []
        inv = data.get("i")
        return cls(
            pop_time=int(data.get("t", 0)),
            invisible_time=int(inv) if inv is not None else None,
            offsets=offsets,
            last_consume=int(data.get("l", 0)),
            commit_bits=int(data.get("cm", 0)),
            attempt_id=data.get("a") if isinstance(data.get("a"), str) else None,
            next_visible={int(o): int(t) for o, t in (data.get("ot") or {}).items()},
            consumed={int(o): int(c) for o, c in (data.get("oc") or {}).items()},
        )


class OrderInfoManager:
    """``ConsumerOrderInfoManager``: ``table[topic@group][queueId] -> OrderInfo``."""

    def __init__(self, config_dir: Any, writer: ConfigWriter | None = None):
        self.config_dir = config_dir
        self.writer = writer
        self.table: dict[str, dict[int, OrderInfo]] = {}
        self.changed = False

    @staticmethod
    def key(topic: str, group: str) -> str:
        return f"{topic}{k.SPLIT}{group}"

    def get(self, topic: str, group: str, queue_id: int) -> OrderInfo | None:
        return self.table.get(self.key(topic, group), {}).get(queue_id)

    def update(
        self,
        attempt_id: str | None,
        retry: bool,
        topic: str,
        group: str,
        queue_id: int,
        pop_time: int,
        invisible_time: int,
        offsets: list[int],
        count_info: list[str],
    ) -> None:
        """``update``: the new batch replaces the old one; the counts of offsets popped again go up
        by one (unless the same attempt); appends ``type qo<qid>%<offset> count`` per counted offset
        and the legacy ``type qid minCount`` to ``count_info``."""
        qs = self.table.setdefault(self.key(topic, group), {})
        old = qs.get(queue_id)
        info = OrderInfo(pop_time, invisible_time, list(offsets[:MAX_BATCH]), now_ms(), 0, attempt_id)
        if old is not None:
            if old.attempt_id is not None and old.attempt_id == attempt_id:
                info.consumed = dict(old.consumed)
            else:
                previous = set(old.offsets)
                info.consumed = {o: old.consumed.get(o, 0) + 1 for o in info.offsets if o in previous}
        qs[queue_id] = info
        self.changed = True
        tag = k.type_tag(retry)
        min_count = None
        for offset, count in sorted(info.consumed.items()):
            count_info.append(f"{tag} qo{queue_id}%{offset} {count}")
            min_count = count if min_count is None else min(min_count, count)
        if min_count is None or len(info.consumed) != len(info.offsets):
            min_count = 0
        count_info.append(f"{tag} {queue_id} {min_count}")

    def check_block(
        self, attempt_id: str | None, topic: str, group: str, queue_id: int, invisible_time: int
    ) -> bool:
        info = self.get(topic, group, queue_id)
        return info is not None and info.need_block(attempt_id, invisible_time, now_ms())

    def clear_block(self, topic: str, group: str, queue_id: int) -> None:
        if self.table.get(self.key(topic, group), {}).pop(queue_id, None) is not None:
            self.changed = True

    def commit_and_next(self, topic: str, group: str, queue_id: int, offset: int, pop_time: int) -> int:
        """``commitAndNext``: the offset to commit; -1 illegal (not in the batch), -2 stale pop time."""
        info = self.get(topic, group, queue_id)
        if info is None:
            return offset + 1
        if not info.offsets:
            return -1
        if pop_time != info.pop_time:
            return -2
        try:
            i = info.offsets.index(offset)
        except ValueError:
            return -1
        info.commit_bits |= 1 << i
        self.changed = True
        return info.next_offset()

    def update_next_visible(
        self, topic: str, group: str, queue_id: int, offset: int, pop_time: int, next_visible: int
    ) -> None:
        info = self.get(topic, group, queue_id)
        if info is None or pop_time != info.pop_time:
            return
        if len(info.next_visible) < MAX_BATCH or offset in info.next_visible:
            info.next_visible[offset] = next_visible
            self.changed = True

    def lock_free_time(self, topic: str, group: str, queue_id: int) -> int | None:
        """When a blocked queue becomes free (``getLockFreeTimestamp``), None when not blocked."""
        info = self.get(topic, group, queue_id)
        if info is None or not info.offsets or not info.invisible_time:
            return None
        now = now_ms()
        for i, offset in enumerate(info.offsets):
            if info.not_acked(i):
                visible = info.next_visible.get(offset, info.pop_time + info.invisible_time)
                if now < visible:
                    return visible
        return None

    # --- persistence --------------------------------------------------------------------------
    def load(self) -> None:
        try:
            data = load_config(self.config_dir, FILE_NAME).data
        except CorruptDataError as exc:
            log.warning("%s: %s; starting without order info", FILE_NAME, exc)
            return
        table = data.get("table") or {}
        if not isinstance(table, dict):
            return
        for key, queues in table.items():
            if not isinstance(queues, dict):
                continue
            for qid, info in queues.items():
                try:
                    self.table.setdefault(str(key), {})[int(qid)] = OrderInfo.from_json(info)
                except (TypeError, ValueError, AttributeError):
                    log.warning("%s: order info %s/%s ignored", FILE_NAME, key, qid)

    def text(self) -> str:
        """``encode(prettyFormat)`` after ``autoClean`` of the entries not consumed for a day."""
        now = now_ms()
        table: dict[str, dict[int, Any]] = {}
        for key in list(self.table):
            qs = self.table[key]
            for qid in [q for q, info in qs.items() if now - info.last_consume > CLEAN_SPAN_MS]:
                del qs[qid]
            if not qs:
                del self.table[key]
                continue
            table[key] = {qid: info.to_json() for qid, info in sorted(qs.items())}
        return fastjson.dumps({"table": table}, pretty=True)

    def persist(self, now: bool = False) -> None:
        """Write the file (behind, in a worker thread; ``now``: here and now) when changed."""
        if not self.changed or self.writer is None:
            return
        self.changed = False
        texts = {FILE_NAME: self.text()}
        if now:
            self.writer.write_now(texts)
        else:
            self.writer.write_later(texts)
