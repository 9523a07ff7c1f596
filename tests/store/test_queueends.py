"""``queueends`` gives the answers ``ConsumeQueue`` gives: the same min and max offsets and the same
units, on the real broker's stores and on queues of several files, torn or emptied."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from formats.consumequeue import CQ_UNIT_SIZE
from rmqcli.store import Store
from rmqcli.store.read.queueends import queue_ends
from rmqcli.store.settings import StoreSettings
from rmqcli.store.write.messages import Message
from rmqcli.store.write.writer import StoreWriter
from tests.support.realfixtures import variant_params


def assert_same_as_consume_queue(store: Store) -> int:
    """Every queue of ``store`` read both ways; returns the number of queues compared."""
    low = store.commitlog.min_offset if store.commitlog.files else 0
    explicit = "mapped_file_size_consume_queue" in store.settings.explicit
    size = store.settings.mapped_file_size_consume_queue if explicit else None
    compared = 0
    for topic, queue_id in store.queue_ids():
        cq = store.consume_queue(topic, queue_id)
        ends = queue_ends(str(cq.directory), size, low)
        assert (ends.min_offset, ends.max_offset) == (cq.min_offset(low), cq.max_offset), (topic, queue_id)
        units = {u.queue_offset: u for u in cq.units(cq.min_logic_offset)}
        for offset in range(ends.min_offset - 1, ends.max_offset + 2):
            unit = units.get(offset)
            wanted = None
            if unit is not None and ends.min_offset <= offset < ends.max_offset and not unit.is_filler:
                wanted = unit.commitlog_offset
            assert ends.commitlog_offset(offset) == wanted, (topic, queue_id, offset)
        compared += 1
    return compared


@pytest.mark.parametrize("variant", variant_params())
def test_the_real_brokers_queues_read_the_same_both_ways(variant) -> None:
    store = Store.open(variant.store)
    try:
        assert assert_same_as_consume_queue(store) > 0
    finally:
        store.close()


def small_file_store(root: Path, messages: int) -> None:
    """One queue of ``messages`` units in files of 30 units (several full files, one partly)."""
    settings = StoreSettings(
        mapped_file_size_commitlog=1024 * 1024,
        mapped_file_size_consume_queue=30 * CQ_UNIT_SIZE,
        message_index_enable=False,
        explicit=frozenset({"mapped_file_size_commitlog", "mapped_file_size_consume_queue"}),
    )
    writer = StoreWriter(root, settings)
    try:
        writer.config.set_topic("Ends", 2, 0)
        for i in range(messages):
            writer.append(Message("Ends", 0, b"m%d" % i))
    finally:
        writer.close()


@pytest.mark.parametrize("messages", [1, 29, 30, 31, 75, 120])
def test_queues_of_several_files_read_the_same_both_ways(tmp_path: Path, messages: int) -> None:
    small_file_store(tmp_path, messages)
    store = Store.open(tmp_path)
    try:
        assert assert_same_as_consume_queue(store) == 1
        cq = store.consume_queue("Ends", 0)
        assert cq.max_offset == messages
    finally:
        store.close()


def test_a_torn_middle_file_and_a_missing_first_file(tmp_path: Path) -> None:
    small_file_store(tmp_path, 100)  # files at units 0, 30, 60, 90
    directory = tmp_path / "consumequeue" / "Ends" / "0"
    files = sorted(directory.iterdir())
    middle = files[2]  # units 60..89: zeros from its 11th unit on (a torn write)
    data = bytearray(middle.read_bytes())
    data[10 * CQ_UNIT_SIZE :] = bytes(len(data) - 10 * CQ_UNIT_SIZE)
    middle.write_bytes(bytes(data))
    os.unlink(files[0])  # the first file deleted (retention): the queue starts at unit 30
    store = Store.open(tmp_path)
    try:
        assert assert_same_as_consume_queue(store) == 1
        ends = queue_ends(str(directory), 30 * CQ_UNIT_SIZE, 0)
        assert (ends.min_offset, ends.max_offset) == (30, 70)
    finally:
        store.close()


def test_an_empty_or_missing_directory_has_no_units(tmp_path: Path) -> None:
    for directory in (tmp_path, tmp_path / "absent"):
        ends = queue_ends(str(directory), None, 0)
        assert (ends.min_offset, ends.max_offset, ends.starts) == (0, 0, [])
        assert ends.commitlog_offset(0) is None
