"""Stores of several small CommitLog files for the retention tests, written by rmq's writer as a
broker writes them, with their messages' places known."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rmqcli.store.settings import StoreSettings
from rmqcli.store.write.messages import Message
from rmqcli.store.write.writer import StoreWriter

COMMITLOG_SIZE = 64 * 1024
CQ_SIZE = 50 * 20
TOPIC = "RetainedTopic"
SIZES = {"mappedFileSizeCommitLog": str(COMMITLOG_SIZE), "mappedFileSizeConsumeQueue": str(CQ_SIZE)}


@dataclass(frozen=True)
class Placed:
    key: str
    queue_id: int
    queue_offset: int
    physical: int


def settings() -> StoreSettings:
    return StoreSettings(
        mapped_file_size_commitlog=COMMITLOG_SIZE,
        mapped_file_size_consume_queue=CQ_SIZE,
        explicit=frozenset({"mapped_file_size_commitlog", "mapped_file_size_consume_queue"}),
    )


def build_store(
    root: Path, count: int = 400, queues: int = 2, body: int = 500, offsets: dict[str, int] | None = None
) -> list[Placed]:
    """``count`` messages of ``TOPIC`` round robin over ``queues`` queues (4 CommitLog files for 400),
    and ``offsets``: groups with the queue offset they committed on every queue."""
    writer = StoreWriter(root, settings())
    placed = []
    try:
        for i in range(count):
            key = f"k{i}"
            result = writer.append(
                Message(TOPIC, i % queues, f"{key}:".ljust(body, "x").encode(), {"KEYS": key})
            )
            placed.append(Placed(key, i % queues, result.queue_offset, result.physical_offset))
        for group, offset in (offsets or {}).items():
            for queue_id in range(queues):
                writer.config.set_consumer_offset(TOPIC, group, queue_id, offset)
    finally:
        writer.close()
    return placed


def commitlog_names(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "commitlog").iterdir() if p.name.isdigit())


def store_files(root: Path) -> set[str]:
    """The CommitLog, consume-queue and index files, store-relative."""
    found = set()
    for part in ("commitlog", "consumequeue", "index"):
        base = root / part
        if base.is_dir():
            found |= {
                p.relative_to(root).as_posix() for p in base.rglob("*") if p.is_file() and p.name.isdigit()
            }
    return found


def age(root: Path, names: list[str], millis: int) -> None:
    """Set the mtime of the named CommitLog files to ``millis``."""
    for name in names:
        os.utime(root / "commitlog" / name, ns=(millis * 1_000_000, millis * 1_000_000))


def write_conf(path: Path, **keys: str) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in {**SIZES, **keys}.items()))
    return path


def add_half_message(root: Path, producer_group: str = "PG") -> tuple[int, int]:
    """A half message of ``TOPIC`` appended as END_TRANSACTION finds it (a transactional send's
    record in RMQ_SYS_TRANS_HALF_TOPIC): its (CommitLog offset, half queue offset)."""
    from formats.names import TRANS_HALF_TOPIC

    props = {
        "REAL_TOPIC": TOPIC,
        "REAL_QID": "0",
        "TRAN_MSG": "true",
        "PGROUP": producer_group,
        "KEYS": "half",
    }
    writer = StoreWriter(root, settings())
    try:
        result = writer.append(Message(TRANS_HALF_TOPIC, 0, b"half", props))
    finally:
        writer.close()
    return result.physical_offset, result.queue_offset
