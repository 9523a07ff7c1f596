"""``rmq offsets STORE reset|set|merge``: committed consumer offsets changed offline.

The offsets live in ``config/consumerOffset.json`` (``topic@group -> {queueId: offset}``); a change
replaces that file under the usual rules (plan, ``--yes``, lock check, backup). A broker reads it at
start, so a change takes effect when the broker next starts.

- ``reset``: every read queue of the topic to the offset of the first message stored at or near a
  time (``getOffsetInQueueByTime``, as mqadmin's resetOffsetByTime asks a live broker), or to the
  queue's min or max offset. Offline there is no consumer to tell: the offset is set whatever it was
  (the ``-f`` force of resetOffsetByTime).
- ``set``: one queue to one offset (0 up to the queue's max offset).
- ``merge OTHER``: per group, topic and queue, the larger committed offset of the two stores. After a
  master that went down comes back in 4.x, its offsets are older than those its slave's consumers
  committed meanwhile (the slave's store has them): merging the slave's offsets into the master's
  store keeps consumers from consuming the same messages again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from formats import fastjson
from rmqcli.errors import UsageError
from rmqcli.ops.safety import Change, Plan, PlanStep
from rmqcli.remoting.javanames import camel_fields
from rmqcli.store import Store
from rmqcli.store.configfiles import OFFSETS, TOPICS, load_config, parse_consumer_offsets
from rmqcli.store.store import CONFIG_DIR
from rmqcli.store.timesearch import offset_by_time

OFFSETS_REL = f"{CONFIG_DIR}/{OFFSETS}"


@dataclass(frozen=True)
class OffsetChange:
    group: str
    topic: str
    queue_id: int
    old: int | None  # None: none was committed
    new: int

    def to_dict(self) -> dict[str, Any]:
        return camel_fields(self, "group", "topic", "queue_id", "old", "new")


@dataclass
class OffsetsResult:
    plan: Plan
    changes: list[OffsetChange] = field(default_factory=list)
    content: bytes = b""

    def to_dict(self) -> dict[str, Any]:
        return {"changes": [c.to_dict() for c in self.changes], "plan": self.plan.to_dict()}


def _table(store: Store) -> dict[tuple[str, str], dict[int, int]]:
    return parse_consumer_offsets(load_config(store.root / CONFIG_DIR, OFFSETS).data, OFFSETS_REL)


def _queue_ids(store: Store, topic: str) -> list[int]:
    config = load_config(store.root / CONFIG_DIR, TOPICS).data.get("topicConfigTable", {}).get(topic)
    if config is None:
        raise UsageError(f"topic {topic!r} is not in {CONFIG_DIR}/{TOPICS}")
    return list(range(int(config.get("readQueueNums", 0))))


def _bounds(store: Store, topic: str, queue_id: int) -> tuple[int, int]:
    if (topic, queue_id) not in set(store.queue_ids(topic)):
        return 0, 0
    cq = store.consume_queue(topic, queue_id)
    low = store.commitlog.min_offset if store.commitlog.files else 0
    return cq.min_offset(low), cq.max_offset


def _offset_at(store: Store, topic: str, queue_id: int, timestamp: int) -> int:
    low, end = _bounds(store, topic, queue_id)
    cq = store.consume_queue(topic, queue_id) if end else None

    def store_time(offset: int) -> int | None:
        unit = next(iter(cq.units(offset, 1)), None) if cq is not None else None
        return store.commitlog.store_timestamp(unit.commitlog_offset) if unit is not None else None

    return offset_by_time(low, end, store_time, timestamp)


def stage_reset(
    store: Store, group: str, topic: str, *, time_ms: int | None, to: str | None
) -> OffsetsResult:
    """``to`` is ``"min"`` or ``"max"`` when ``time_ms`` is None."""
    table = _table(store)
    wanted = {}
    for queue_id in _queue_ids(store, topic):
        if time_ms is not None:
            wanted[queue_id] = _offset_at(store, topic, queue_id, time_ms)
        else:
            low, high = _bounds(store, topic, queue_id)
            wanted[queue_id] = low if to == "min" else high
    return _staged(store, table, {(topic, group): wanted}, committed_before=table)


def stage_set(store: Store, group: str, topic: str, queue_id: int, offset: int) -> OffsetsResult:
    if queue_id not in _queue_ids(store, topic):
        raise UsageError(f"queue {queue_id} is not a read queue of topic {topic!r}")
    _, high = _bounds(store, topic, queue_id)
    if not 0 <= offset <= high:
        raise UsageError(f"offset {offset} is outside queue {queue_id} of {topic!r}: 0 to {high}")
    table = _table(store)
    return _staged(store, table, {(topic, group): {queue_id: offset}}, committed_before=table)


def stage_merge(store: Store, other: Path) -> OffsetsResult:
    theirs_store = Store.open(other)
    try:
        theirs = _table(theirs_store)
    finally:
        theirs_store.close()
    ours = _table(store)
    wanted: dict[tuple[str, str], dict[int, int]] = {}
    for key, queues in theirs.items():
        mine = ours.get(key, {})
        larger = {q: o for q, o in queues.items() if o > mine.get(q, -1)}
        if larger:
            wanted[key] = larger
    result = _staged(store, ours, wanted, committed_before=ours)
    result.plan.notes.append(f"the larger committed offset of {store.root} and {other}, per queue")
    return result


def _staged(
    store: Store,
    table: dict[tuple[str, str], dict[int, int]],
    wanted: dict[tuple[str, str], dict[int, int]],
    *,
    committed_before: dict[tuple[str, str], dict[int, int]],
) -> OffsetsResult:
    """The new consumerOffset.json with ``wanted`` put in (the file's other entries as they were)."""
    plan = Plan("offsets", store.root)
    result = OffsetsResult(plan)
    loaded = load_config(store.root / CONFIG_DIR, OFFSETS).data
    doc: dict[str, Any] = dict(loaded) if loaded else {}
    offset_table: dict[str, Any] = doc.setdefault("offsetTable", {})
    for (topic, group), queues in sorted(wanted.items()):
        before = committed_before.get((topic, group), {})
        entry = offset_table.setdefault(f"{topic}@{group}", {})
        for queue_id, offset in sorted(queues.items()):
            if before.get(queue_id) == offset:
                continue
            result.changes.append(OffsetChange(group, topic, queue_id, before.get(queue_id), offset))
            key = next((k for k in entry if int(k) == queue_id), queue_id)
            entry[key] = offset
    if result.changes:
        result.content = fastjson.dumps(doc, pretty=True).encode("utf-8")
        plan.steps.append(
            PlanStep("replace", OFFSETS_REL, f"{len(result.changes)} committed offset(s) changed")
        )
        for c in result.changes:
            was = "none" if c.old is None else str(c.old)
            plan.notes.append(f"{c.group} {c.topic} queue {c.queue_id}: {was} -> {c.new}")
        plan.notes.append(
            "a broker reads config/consumerOffset.json at start: the offsets count from its next start"
        )
    plan.details = {"changes": [c.to_dict() for c in result.changes]}
    return result


def apply_offsets(
    store_root: Path, result: OffsetsResult, argv: list[str] | None = None, *, force_unlocked: bool = False
) -> Path:
    with Change(store_root, "offsets", argv, force_unlocked=force_unlocked) as change:
        change.replace_file(OFFSETS_REL, result.content)
        return change.commit()


def discard(result: OffsetsResult) -> None:
    """Nothing was staged."""


STAGING_NAME = "offsets"  # nothing is staged; the name the repair skeleton removes
