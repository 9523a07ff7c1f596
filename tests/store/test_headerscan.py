"""The vectorised header scan agrees with the record-by-record scan, and falls back on bad bytes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from formats import commitlog as fmt
from rmqcli.errors import CorruptDataError
from rmqcli.store import Store
from rmqcli.store.naming import offset_to_name
from rmqcli.store.scan.headerscan import scan_file
from tests.support.realfixtures import variant_params
from tests.support.records import record

FILE_SIZE = 64 * 1024


def flatten(batches):
    return [
        (
            int(b.position[i]),
            int(b.total_size[i]),
            int(b.queue_id[i]),
            int(b.queue_offset[i]),
            int(b.sys_flag[i]),
            int(b.store_timestamp[i]),
            b.topics[b.topic_index[i]],
        )
        for b in batches
        for i in range(len(b))
    ]


@pytest.mark.parametrize("variant", variant_params())
def test_batches_equal_headers_on_real_stores(variant):
    store = Store.open(variant.store)
    assert flatten(store.commitlog.header_batches()) == [tuple(h) for h in store.commitlog.headers()]


def write_store(tmp_path: Path, bodies: list[tuple[bytes, str, int, int]]) -> Path:
    data = b""
    for body, topic, flags, magic in bodies:
        data += record(len(data), body, topic, flags, magic)
    data += fmt.BlankRecord.build(dict(total_size=FILE_SIZE - len(data)))
    (tmp_path / "commitlog").mkdir()
    (tmp_path / "commitlog" / offset_to_name(0)).write_bytes(data.ljust(FILE_SIZE, b"\0"))
    return tmp_path


def test_mixed_hosts_versions_and_magic_in_body(tmp_path):
    magic_bytes = fmt.MAGIC_V1.to_bytes(4, "big", signed=True)
    store_dir = write_store(
        tmp_path,
        [
            (b"plain", "TopicA", 0, fmt.MAGIC_V1),
            (magic_bytes * 8, "TopicB", fmt.BORNHOST_V6_FLAG | fmt.STOREHOST_V6_FLAG, fmt.MAGIC_V1),
            (b"v2", "T" * 200, fmt.STOREHOST_V6_FLAG, fmt.MAGIC_V2),
            (b"", "TopicA", 0, fmt.MAGIC_V1),
        ],
    )
    store = Store.open(store_dir)
    expected = [tuple(h) for h in store.commitlog.headers()]
    assert len(expected) == 4
    assert flatten(store.commitlog.header_batches()) == expected
    assert scan_file(store.commitlog.files[0].map(), 0, 0) is not None  # the fast path took it


def test_corrupt_record_falls_back_and_names_file_and_offset(tmp_path):
    store_dir = write_store(tmp_path, [(b"a" * 100, "TopicA", 0, fmt.MAGIC_V1)] * 3)
    path = store_dir / "commitlog" / offset_to_name(0)
    data = bytearray(path.read_bytes())
    second = len(record(0, b"a" * 100, "TopicA"))
    data[second + 4 : second + 8] = b"\x12\x34\x56\x78"  # break the second record's magic code
    path.write_bytes(bytes(data))
    store = Store.open(store_dir)
    assert scan_file(store.commitlog.files[0].map(), 0, 0) is None
    with pytest.raises(CorruptDataError) as err:
        list(store.commitlog.header_batches())
    assert err.value.offset == second and str(path) in str(err.value)


def test_blank_in_the_last_bytes_of_a_file(tmp_path):
    """A file whose BLANK record starts fewer than 48 bytes (one record prefix) before its end."""
    one = record(0, b"", "TopicA")
    body = b"b" * (FILE_SIZE - 2 * len(one) - 20)
    store_dir = write_store(tmp_path, [(b"", "TopicA", 0, fmt.MAGIC_V1), (body, "TopicA", 0, fmt.MAGIC_V1)])
    data = (store_dir / "commitlog" / offset_to_name(0)).read_bytes()
    assert FILE_SIZE - (len(one) + len(record(len(one), body, "TopicA"))) < fmt.PREFIX_SIZE
    store = Store.open(store_dir)
    assert len(list(store.commitlog.headers())) == 2
    assert flatten(store.commitlog.header_batches()) == [tuple(h) for h in store.commitlog.headers()]
    assert len(data) == FILE_SIZE


@pytest.fixture(scope="module")
def generated_store(tmp_path_factory):
    from fixtures.generate import generate

    root = tmp_path_factory.mktemp("gen") / "store"
    generate(root, "small", seed=7)
    return root


def test_hints_give_the_same_headers(generated_store):
    """Consume-queue positions only save hops: full, partial and wrong hints give the same scan."""
    store = Store.open(generated_store)
    expected = [tuple(h) for h in store.commitlog.headers()]
    assert len({h[6] for h in expected}) > 3  # several topics, one of them not ASCII
    full = store.record_offsets()
    assert len(full) > 100
    partial = full[::3]
    bogus = np.sort(np.concatenate([full, full[:50] + 7]))
    for hints in (full, partial, bogus, np.empty(0, dtype=np.int64)):
        assert flatten(store.commitlog.header_batches(hints=hints)) == expected


def test_topics_differing_after_eight_bytes(tmp_path):
    names = ["TopicNameA", "TopicNameB", "TopicName", "TopicNameA-long-suffix", "T", "主题-Ünïcode"]
    store_dir = write_store(tmp_path, [(b"x", name, 0, fmt.MAGIC_V1) for name in names * 2])
    store = Store.open(store_dir)
    batches = list(store.commitlog.header_batches())
    assert [row[6] for row in flatten(batches)] == names * 2
    assert sorted(batches[0].topics) == sorted(names)
