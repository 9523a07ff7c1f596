"""``rmq clean``: one clean-up round of a broker, planned offline (``rmqcli.store.retention``'s rules).

The plan is what ``rmq serve`` (and a 4.9.8 broker) would delete in a clean-up round at ``--at``
with the disk at ``--disk-ratio``: the CommitLog files, then the consume-queue and index files wholly
below the new CommitLog minimum. It names the time range of the messages that go (from the first
stored in the first file to the first stored in the file that stays), and the consumer groups whose
committed offset (config/consumerOffset.json) lies below a queue's new minimum offset: the unread
messages they lose, per queue. A broker deletes at most ``deleteFileBatchMax`` files a round; a
re-run plans the next round.

Applying it (``--yes``) moves every deleted file into the change's backup, which frees no space; with
``no_backup`` the files are deleted for good (journalled, so a killed run is finished by re-running:
what was deleted stays deleted, as after a broker killed during its round).

On a DLedger CommitLog store the data files go by DLedger's rules (``rmqcli.ops.clean_dledger``),
with the entry-index files below the first entry left; queues and index files follow as above.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from formats.consumequeue import CQ_UNIT_SIZE
from formats.dledger import BODY_OFFSET
from rmqcli.errors import CorruptDataError
from rmqcli.ops import clean_dledger as dl
from rmqcli.ops.safety import Change, Plan, PlanStep, outside_roots, plan_path
from rmqcli.store import Store
from rmqcli.store import retention as rules
from rmqcli.store.configfiles import OFFSETS, load_config, parse_consumer_offsets
from rmqcli.store.mapped import MappedFile
from rmqcli.store.naming import CONSUMEQUEUE_DIR
from rmqcli.store.read.index import read_header
from rmqcli.store.store import CONFIG_DIR

STAGING_NAME = "clean"  # nothing is staged; the name the repair skeleton removes


@dataclass(frozen=True)
class QueueMove:
    """A queue whose minimum offset the round moves."""

    topic: str
    queue_id: int
    old_min: int
    new_min: int


@dataclass(frozen=True)
class Loss:
    """A group that had not consumed what the round deletes."""

    group: str
    topic: str
    queue_id: int
    committed: int
    new_min: int

    @property
    def lost(self) -> int:
        return self.new_min - self.committed


@dataclass
class CleanResult:
    plan: Plan
    at_ms: int
    disk: rules.Disk
    decision: rules.Round | dl.DLedgerRound
    commitlog: list[rules.CommitLogFile]
    min_offset: tuple[int, int]  # the CommitLog minimum before and after
    stored: tuple[int | None, int | None]  # first store time of what goes, and of what stays
    queues: list[QueueMove] = field(default_factory=list)
    losses: list[Loss] = field(default_factory=list)
    no_backup: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "at": self.at_ms,
            "hour": time.localtime(self.at_ms / 1000).tm_hour,
            "disk": {"commitLog": self.disk.commitlog, "consumeQueue": self.disk.consumequeue},
            "deletes": self.decision.deletes,
            "reasons": self.decision.reasons(),
            "diskFull": self.decision.disk_full,
            "commitLogFiles": [
                {"file": f.path.name, "bytes": f.size, "lastModified": f.mtime_ms} for f in self.commitlog
            ],
            "commitLogMinOffset": {"before": self.min_offset[0], "after": self.min_offset[1]},
            "storedFrom": self.stored[0],
            "storedBefore": self.stored[1],
            "queues": [
                {
                    "topic": q.topic,
                    "queueId": q.queue_id,
                    "minOffsetBefore": q.old_min,
                    "minOffsetAfter": q.new_min,
                }
                for q in self.queues
            ],
            "unreadLost": [
                {
                    "group": x.group,
                    "topic": x.topic,
                    "queueId": x.queue_id,
                    "committed": x.committed,
                    "minOffsetAfter": x.new_min,
                    "lost": x.lost,
                }
                for x in self.losses
            ],
            "backup": not self.no_backup,
            "plan": self.plan.to_dict(),
        }


def stage_clean(
    store: Store,
    config: rules.RetentionConfig,
    *,
    at_ms: int | None = None,
    disk_ratio: float | None = None,
    manual: bool = False,
    no_backup: bool = False,
) -> CleanResult:
    """One round at ``at_ms`` (now) with the disk at ``disk_ratio`` (measured when ``None``)."""
    at_ms = int(time.time() * 1000) if at_ms is None else at_ms
    hour = time.localtime(at_ms / 1000).tm_hour
    dledger = store.dledger is not None
    if store.dledger is not None:  # 4.9.8 deletes the old CommitLog first, the entries after: not planned
        store.dledger.refuse_mixed("rmq clean")
    if disk_ratio is not None:
        disk = rules.Disk(disk_ratio, disk_ratio)
    elif dledger:
        disk = dl.disk(store)
    else:
        dirs = store.commitlog_dirs
        disk = rules.Disk(
            min((rules.disk_used_ratio(d) for d in dirs), default=-1.0),
            rules.disk_used_ratio(store.root / CONSUMEQUEUE_DIR),
        )
    files = [_described(mf) for mf in store.commitlog.files]
    decision: rules.Round | dl.DLedgerRound
    if dledger:  # DLedger's CleanSpaceService deletes the data files (ops.clean_dledger)
        decision = dl.decide(config, hour, disk, manual)
        chosen = dl.expired(files, at_ms, config, decision.force) if decision.deletes else []
    else:
        decision = rules.decide(config, hour, disk, manual)
        chosen = (
            rules.expired_commitlog(files, at_ms, config, decision.clean_at_once) if decision.deletes else []
        )
    before = files[0].from_offset if files else 0
    after = files[len(chosen)].from_offset if chosen else before
    dirs = [store.commitlog.home, *(mf.path.parent for mf in store.commitlog.files)] if dledger else None
    plan = Plan("clean", store.root, roots=outside_roots(store.root, dirs or store.commitlog_dirs))
    result = CleanResult(
        plan, at_ms, disk, decision, chosen, (before, after), (None, None), no_backup=no_backup
    )
    verb = "deleted for good (--no-backup)" if no_backup else "moved to the backup"
    action = "discard" if no_backup else "delete"
    for f in chosen:
        plan.steps.append(
            PlanStep(action, plan_path(store.root, f.path), f"expired CommitLog file, {verb}", f.size)
        )
    if dledger and chosen:
        kept = store.commitlog.files[len(chosen)] if len(chosen) < len(files) else None
        for mf in dl.index_files_below(store, kept):
            detail = f"entry-index file below the first entry left, {verb}"
            plan.steps.append(PlanStep(action, plan_path(store.root, mf.path), detail, mf.size))
    if chosen:
        body = BODY_OFFSET if dledger else 0  # a DLedger entry's message follows its header
        result.stored = (_first_store_time(store, before + body), _first_store_time(store, after + body))
    # CleanConsumeQueueService runs on the CommitLog minimum whether or not this round moved it (a
    # broker's first round after start, or a clean killed between its CommitLog and queue files)
    _plan_queues(store, result, verb, action)
    _plan_index(store, result, verb, action)
    _notes(result, config)
    plan.details = {key: value for key, value in result.to_dict().items() if key != "plan"}
    return result


def _described(mf: MappedFile) -> rules.CommitLogFile:
    return rules.CommitLogFile(mf.path, mf.from_offset, mf.size, int(os.stat(mf.path).st_mtime * 1000))


def _first_store_time(store: Store, offset: int) -> int | None:
    try:
        return store.commitlog.read(offset).store_timestamp
    except (CorruptDataError, LookupError, ValueError):
        return None


def _min_offset(mf: MappedFile, low: int) -> int | None:
    index = rules.min_unit_index(lambda: mf.read(0, mf.size), low)
    return None if index is None else mf.from_offset // CQ_UNIT_SIZE + index


def _plan_queues(store: Store, result: CleanResult, verb: str, action: str) -> None:
    old_low, low = result.min_offset
    committed = _committed(store)
    for topic, queue_id in store.queue_ids():
        queue = store.consume_queue(topic, queue_id)
        files = queue.files
        if not files:
            continue
        last_units = [rules.last_unit_offset(mf.read, mf.size) for mf in files]  # a full file's last slot
        gone = rules.expired_queue_files(last_units, low)
        for mf in files[:gone]:
            step = PlanStep(
                action, plan_path(store.root, mf.path), f"consume-queue file below {low}, {verb}", mf.size
            )
            result.plan.steps.append(step)
        old_min = _min_offset(files[0], old_low)
        old_min = queue.min_logic_offset if old_min is None else old_min
        new_min = _min_offset(files[gone], low)
        new_min = old_min if new_min is None else new_min  # correctMinOffset finds none: unchanged
        if new_min == old_min:
            continue
        result.queues.append(QueueMove(topic, queue_id, old_min, new_min))
        for group, offset in committed.get((topic, queue_id), []):
            if offset < new_min:
                result.losses.append(Loss(group, topic, queue_id, max(offset, old_min), new_min))


def _committed(store: Store) -> dict[tuple[str, int], list[tuple[str, int]]]:
    loaded = load_config(store.root / CONFIG_DIR, OFFSETS)
    table: dict[tuple[str, int], list[tuple[str, int]]] = {}
    for (topic, group), queues in parse_consumer_offsets(loaded.data, f"{CONFIG_DIR}/{OFFSETS}").items():
        for queue_id, offset in queues.items():
            table.setdefault((topic, queue_id), []).append((group, offset))
    return table


def _plan_index(store: Store, result: CleanResult, verb: str, action: str) -> None:
    low = result.min_offset[1]
    directory = store.root / "index"
    names = sorted(p.name for p in directory.iterdir() if p.name.isdigit()) if directory.is_dir() else []
    ends = []
    for name in names:
        ends.append(read_header(directory / name).end_phy_offset)
    for name in names[: rules.expired_index_files(ends, low)]:
        path = directory / name
        step = PlanStep(
            action, plan_path(store.root, path), f"index file ending below {low}, {verb}", path.stat().st_size
        )
        result.plan.steps.append(step)


def _notes(result: CleanResult, config: rules.RetentionConfig) -> None:
    notes = result.plan.notes
    decision = result.decision
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(result.at_ms / 1000))
    disk = result.disk
    notes.append(
        f"at {when}, disk {disk.commitlog:.2f} used (CommitLog) / {disk.consumequeue:.2f} (consume queues): "
        + (
            f"a clean-up round deletes ({', '.join(decision.reasons())})"
            if decision.deletes
            else f"no clean-up round deletes (deleteWhen={config.delete_when}, diskMaxUsedSpaceRatio="
            f"{config.disk_max_used_space_ratio})"
        )
    )
    if decision.disk_full:
        notes.append(
            f"the disk is above diskSpaceWarningLevelRatio ({config.disk_space_warning_level_ratio}%): "
            "a broker refuses sends"
        )
    if result.commitlog:
        size = sum(f.size for f in result.commitlog)
        notes.append(
            f"{len(result.commitlog)} CommitLog file(s), {size} bytes, messages stored from "
            f"{_when(result.stored[0])} to before {_when(result.stored[1])}; CommitLog minimum "
            f"{result.min_offset[0]} -> {result.min_offset[1]}"
        )
    if result.queues:
        notes.append(f"{len(result.queues)} queue(s) get a higher minimum offset")
    for x in result.losses:
        notes.append(
            f"group {x.group} loses {x.lost} unread message(s) of {x.topic} queue {x.queue_id} "
            f"(committed {x.committed}, new minimum {x.new_min})"
        )
    if result.plan.steps:
        if result.no_backup:
            notes.append("--no-backup: the files are deleted for good; the space is freed")
        else:
            notes.append(
                "the files are moved into the backup, which frees no space on this disk: "
                "--no-backup deletes them for good"
            )


def _when(millis: int | None) -> str:
    if millis is None:
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(millis / 1000))


def apply_clean(
    store_root: Path, result: CleanResult, argv: list[str] | None = None, *, force_unlocked: bool = False
) -> Path:
    """Delete the planned files through one ``Change``, oldest CommitLog files first; the backup."""
    roots = result.plan.roots
    with Change(store_root, "clean", argv, roots=roots, force_unlocked=force_unlocked) as change:
        for step in result.plan.steps:
            if step.action == "discard":
                change.discard_file(step.path)
            else:
                change.delete_file(step.path)
        return change.commit()


def discard(result: CleanResult) -> None:
    """Nothing was staged."""
