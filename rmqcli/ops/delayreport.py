"""``rmq delay-report``: the delayed messages a store holds and when they are due.

Delayed messages wait in ``SCHEDULE_TOPIC_XXXX``, queue ``level - 1`` for delay level ``level``; the
schedule service's progress per level is in ``config/delayOffset.json`` (``ScheduleMessageService``),
and the tags code of each waiting unit is its due time (store time plus the level's delay). A level's
next delivery is the due time of the unit at its progress offset; messages past it are waiting.
Levels come from ``messageDelayLevel`` (broker.conf, else the default 18).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from formats.commitlog import PROPERTY_KEYS, PROPERTY_REAL_QID, PROPERTY_REAL_TOPIC, parse_delay_levels
from formats.names import SCHEDULE_TOPIC
from rmqcli.errors import CorruptDataError
from rmqcli.remoting.javanames import camel_fields
from rmqcli.store import Store
from rmqcli.store.configfiles import DELAY, load_config, parse_delay_offsets
from rmqcli.store.store import CONFIG_DIR


@dataclass(frozen=True)
class LevelRow:
    level: int
    delay_ms: int
    progress: int
    max_offset: int
    next_due: int | None  # the due time of the first waiting message
    last_due: int | None  # the due time of the last one

    @property
    def waiting(self) -> int:
        return max(self.max_offset - self.progress, 0)

    def to_dict(self) -> dict[str, Any]:
        return camel_fields(
            self, "level", "delay_ms", "progress", "max_offset", "waiting", "next_due", "last_due"
        )


@dataclass(frozen=True)
class Waiting:
    level: int
    queue_offset: int
    due: int
    topic: str
    queue_id: int | None
    keys: str
    msg_id: str | None
    store_timestamp: int

    def to_dict(self) -> dict[str, Any]:
        return camel_fields(
            self, "level", "queue_offset", "due", "topic", "queue_id", "keys", "uniqKey=msg_id",
            "store_timestamp",
        )  # fmt: skip


def _progress(store: Store) -> dict[int, int]:
    return parse_delay_offsets(load_config(store.root / CONFIG_DIR, DELAY).data, f"{CONFIG_DIR}/{DELAY}")


def levels(store: Store) -> Iterator[LevelRow]:
    """One row per delay level."""
    progress = _progress(store)
    queues = set(store.queue_ids(SCHEDULE_TOPIC))
    for level, delay in enumerate(
        parse_delay_levels(store.effective_settings().message_delay_level), start=1
    ):
        if (SCHEDULE_TOPIC, level - 1) not in queues:
            yield LevelRow(level, delay, progress.get(level, 0), 0, None, None)
            continue
        cq = store.consume_queue(SCHEDULE_TOPIC, level - 1)
        high = cq.max_offset
        done = max(
            progress.get(level, 0), cq.min_offset(store.commitlog.min_offset if store.commitlog.files else 0)
        )
        first = next(iter(cq.units(done, 1)), None) if done < high else None
        last = next(iter(cq.units(high - 1, 1)), None) if done < high else None
        yield LevelRow(
            level,
            delay,
            progress.get(level, 0),
            high,
            first.tags_code if first else None,
            last.tags_code if last else None,
        )


def waiting(store: Store) -> Iterator[Waiting]:
    """Every message still waiting, level by level, in queue order."""
    for row in levels(store):
        if not row.waiting:
            continue
        for unit in store.consume_queue(SCHEDULE_TOPIC, row.level - 1).units(row.progress):
            try:
                rec = store.commitlog.read(unit.commitlog_offset)
            except (CorruptDataError, LookupError):
                continue
            props = rec.properties
            qid = props.get(PROPERTY_REAL_QID)
            yield Waiting(
                row.level,
                unit.queue_offset,
                unit.tags_code,
                props.get(PROPERTY_REAL_TOPIC, ""),
                int(qid) if qid and qid.isdigit() else None,
                props.get(PROPERTY_KEYS, ""),
                rec.uniq_key,
                rec.store_timestamp,
            )
