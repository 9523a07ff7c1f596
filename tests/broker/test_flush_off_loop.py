"""The broker's flushes and config writes in worker threads (``rmqcli.broker.services.messagestore``,
``rmqcli.store.write.configsync``), in this process over a real store: the checkpoint vouches only
for what was appended before its flush started, a SYNC_FLUSH send waits for a flush that started
after its append, config files end with the newest text, and a clean shutdown leaves a consistent
store with no ``abort``. No timing is asserted: what is checked is what ends on disk."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

from rmqcli.broker.services.messagestore import MessageStore
from rmqcli.store.checkpoint import read_checkpoint
from rmqcli.store.configfiles import OFFSETS, TOPICS, load_config
from rmqcli.store.settings import StoreSettings
from rmqcli.store.write.configsync import ConfigWriter
from rmqcli.store.write.messages import Message
from rmqcli.store.write.writer import StoreWriter

TOPIC = "TopicFlush"
SETTINGS = StoreSettings(mapped_file_size_commitlog=64 * 1024, mapped_file_size_consume_queue=20 * 100)


class Clock:
    """Store timestamps the test chooses: 1 ms apart, from a fixed start."""

    def __init__(self) -> None:
        self.ticks = itertools.count(1_700_000_000_000)

    def __call__(self) -> int:
        return next(self.ticks)


def put(store: MessageStore, count: int, start: int = 0) -> int:
    """``count`` 1 KiB messages over 4 queues; the store time of the last."""
    for i in range(start, start + count):
        store.put(Message(TOPIC, i % 4, b"x" * 1024, {"KEYS": f"k{i}", "UNIQ_KEY": f"{i:032X}"}))
    return store.writer.checkpoint.physic_msg_timestamp


def test_the_checkpoint_vouches_only_for_appends_made_before_its_flush(tmp_path: Path) -> None:
    root = tmp_path / "store"

    async def main() -> tuple[int, int, int, int]:
        store = MessageStore(StoreWriter(root, SETTINGS, clock=Clock()))
        try:
            before = put(store, 150)  # three CommitLog files
            flushing = asyncio.ensure_future(store.flush_with_checkpoint())
            await asyncio.sleep(0)  # the stamps are taken and the thread's flush has started
            after = put(store, 150, start=150)  # new files created while the thread flushes
            await flushing
            first = read_checkpoint(root / "checkpoint")
            await store.flush_with_checkpoint()
            second = read_checkpoint(root / "checkpoint")
            return before, after, first.physic_msg_timestamp, second.physic_msg_timestamp
        finally:
            await store.settle()
            store.close()

    before, after, first, second = asyncio.run(main())
    assert after > before
    assert first == before  # not the appends made while it flushed
    assert second == after
    assert not (root / "abort").exists()


def test_the_logical_stamp_follows_the_dispatch_taken_before_the_flush(tmp_path: Path) -> None:
    root = tmp_path / "store"

    async def main() -> tuple[int, int, int]:
        store = MessageStore(StoreWriter(root, SETTINGS, clock=Clock()))
        try:
            before = put(store, 40)
            flushing = asyncio.ensure_future(store.flush_with_checkpoint())
            await asyncio.sleep(0)
            put(store, 40, start=40)  # their consume-queue units come after the stamps were taken
            await flushing
            checkpoint = read_checkpoint(root / "checkpoint")
            return before, checkpoint.physic_msg_timestamp, checkpoint.logics_msg_timestamp
        finally:
            await store.settle()
            store.close()

    before, physic, logics = asyncio.run(main())
    assert physic == logics == before


def test_sync_flush_sends_appended_during_a_flush_wait_for_the_next(tmp_path: Path) -> None:
    root = tmp_path / "store"

    async def main() -> None:
        store = MessageStore(StoreWriter(root, SETTINGS, clock=Clock()), sync_flush=True)
        try:
            put(store, 3)
            first = store.flushed()
            assert store.flushed() is first  # sends before the flush starts share it
            await asyncio.sleep(0)  # the group commit takes them and its thread flushes
            put(store, 3, start=3)
            end = store.writer.max_offset
            second = store.flushed()
            assert second is not first  # appended during the running flush: the next one
            await first
            assert not second.done()  # its flush started after the first had finished
            await second
            assert store._flushed_offset == end
            assert store.flushed() is not second  # a new wait, a new flush
            await store.flushed()
        finally:
            await store.settle()
            store.close()

    asyncio.run(main())


def test_many_concurrent_persists_end_with_the_newest_complete_files(tmp_path: Path) -> None:
    root = tmp_path / "store"

    async def main() -> dict[int, int]:
        store = MessageStore(StoreWriter(root, SETTINGS, clock=Clock()))
        try:
            wanted = {}
            for round_ in range(60):
                for queue in range(4):
                    store.writer.set_consumer_offset(TOPIC, "GroupFlush", queue, round_ * 10 + queue)
                    wanted[queue] = round_ * 10 + queue
                if round_ % 7 == 3:
                    store.persist_config()  # an admin request: written at once, after the one running
                else:
                    store.persist_config_soon()
                if round_ % 5 == 0:
                    await asyncio.sleep(0)  # let the writer take a batch, sometimes
            await store.config_writer.settle()
            return wanted
        finally:
            # the state on disk before ``close`` writes it again
            on_disk = load_config(root / "config", OFFSETS).data["offsetTable"][f"{TOPIC}@GroupFlush"]
            assert {int(q): o for q, o in on_disk.items()} == wanted
            assert load_config(root / "config", TOPICS).source == root / "config" / TOPICS
            await store.settle()
            store.close()

    asyncio.run(main())
    assert not list((root / "config").glob("*.tmp"))


def test_a_queued_older_text_never_replaces_a_newer_one(tmp_path: Path) -> None:
    config = tmp_path / "config"

    async def main() -> None:
        writer = ConfigWriter(config)
        for i in range(50):
            writer.write_later({"a.json": f"old {i}"})
            await asyncio.sleep(0)  # the background writer may have taken it, or not
            writer.write_now({"a.json": f"new {i}"})
            await writer.settle()
            assert (config / "a.json").read_text() == f"new {i}"

    asyncio.run(main())


def test_a_clean_shutdown_during_flushes_leaves_a_consistent_store(tmp_path: Path) -> None:
    root = tmp_path / "store"

    async def main() -> int:
        store = MessageStore(StoreWriter(root, SETTINGS, clock=Clock()), flush_interval_ms=10)
        loop = asyncio.ensure_future(store.flush_loop())
        try:
            for part in range(10):
                put(store, 30, start=part * 30)
                store.persist_config_soon()
                await asyncio.sleep(0.02)
            waits = [store.flushed() for _ in range(3)]
            loop.cancel()  # maybe in the middle of a thread's flush
            await asyncio.gather(loop, return_exceptions=True)
            await store.settle()
            assert all(w.done() for w in waits)
            return store.writer.max_offset
        finally:
            store.close()

    end = asyncio.run(main())
    assert not (root / "abort").exists()
    with StoreWriter(root, SETTINGS) as reopened:
        assert reopened.max_offset == end
        assert sum(reopened.queue_max_offset(TOPIC, q) for q in range(4)) == 300
    assert read_checkpoint(root / "checkpoint").physic_msg_timestamp > 0
