"""The bulk scan's alternative paths give what the record-by-record reader gives: topics told apart
one by one or by sorting, the property search and the hashes in small chunks, KEYS hashed from the
rows read to look for spaces, and the keys of records with and without UNIQ_KEY."""

from __future__ import annotations

import numpy as np
import pytest

from formats import commitlog as fmt
from formats import indexfile
from formats.javahash import string_hash
from rmqcli.store import Store
from rmqcli.store.scan import headerscan, propscan
from tests.support.records import build, mixed_records, props, reference, write_file


def expected_keys(records) -> list[tuple[int, int]]:
    return [
        (i, indexfile.key_hash(indexfile.index_key(r.topic, key)))
        for i, r in enumerate(records)
        for key in ([r.uniq_key] if r.uniq_key else []) + [k for k in r.keys if k]
    ]


def scan_and_reference(tmp_path, specs):
    write_file(tmp_path, build(specs))
    buf = Store.open(tmp_path).commitlog.files[0].map()
    scan = propscan.scan_file(buf, 0, 0, names=propscan.DISPATCH_PROPERTIES)
    assert scan is not None
    return scan, reference(buf, len(buf))


@pytest.mark.parametrize("count", [3, 17, 40])
def test_topics_are_grouped_exactly_few_or_many(count):
    """Up to 16 topics are picked off one by one, more are grouped by sorting; both are exact."""
    names = [f"T{i}" for i in range(count // 2)] + [
        f"TopicName-{i:03d}-suffix" for i in range(count - count // 2)
    ]
    names += ["主题-Ünïcode", "TopicName-000-suffiX", ""]
    order = [names[(i * 7) % len(names)] for i in range(5 * len(names))]
    raw = [n.encode() for n in order]
    data = np.frombuffer(b"".join(raw) + bytes(8), dtype=np.uint8)
    length = np.array([len(r) for r in raw], dtype=np.int64)
    start = np.cumsum(length) - length
    index, topics, bad = headerscan.group_topics(data, start, length)
    assert not bad and sorted(topics) == sorted(set(order))
    assert [topics[i] for i in index.tolist()] == order


def test_property_search_and_hashes_in_small_chunks(tmp_path, monkeypatch):
    """Chunks of two rows and of one value give the same values, tags codes and index keys."""
    specs = mixed_records() * 5
    whole, expected = scan_and_reference(tmp_path / "a", specs)
    monkeypatch.setattr(propscan, "_CHUNK_BYTES", 1)
    monkeypatch.setattr(propscan, "_HASH_CHUNK", 1)
    scan, _ = scan_and_reference(tmp_path / "b", specs)
    rows = np.arange(len(scan))
    for name in propscan.DISPATCH_PROPERTIES:
        got = scan.strings(name, rows)
        assert got == whole.strings(name, rows) == [r.properties.get(name) for r in expected], name
    assert propscan.tags_codes(scan, rows).tolist() == [fmt.tags_code(r.tags) for r in expected]
    local, hashes = propscan.index_keys(scan, rows)
    assert list(zip(local.tolist(), hashes.tolist(), strict=True)) == expected_keys(expected)


@pytest.mark.parametrize("missing_uniq", [False, True])
def test_single_token_keys(tmp_path, missing_uniq):
    """KEYS without a space are their own token (hashed from the rows read to look for spaces); one
    UNIQ_KEY and one token per record interleave, and a record without UNIQ_KEY shifts the rest."""
    specs = []
    for i in range(40):
        pairs = [("TAGS", "TagA" if i % 3 else "标签"), ("KEYS", f"key-{i}" + "é" * (i % 4))]
        if not (missing_uniq and i == 17):
            pairs.append(("UNIQ_KEY", f"{i:032X}"))
        specs.append((b"body", "TopicA" if i % 2 else "主题", props(*pairs), 0, fmt.MAGIC_V1))
    scan, expected = scan_and_reference(tmp_path, specs)
    rows = np.arange(len(scan))
    local, hashes = propscan.index_keys(scan, rows)
    assert list(zip(local.tolist(), hashes.tolist(), strict=True)) == expected_keys(expected)
    odd = rows[1::2]  # a subset of the rows
    local, hashes = propscan.index_keys(scan, odd)
    want = [(j, h) for i, h in expected_keys(expected) if i % 2 for j in [i // 2]]
    assert list(zip(local.tolist(), hashes.tolist(), strict=True)) == want


def assert_java_hashes(texts: list[str]) -> None:
    """``java_hashes`` of the texts laid end to end equals ``String.hashCode`` and UTF-16 length."""
    raw = [t.encode() for t in texts]
    data = np.frombuffer(b"".join(raw), dtype=np.uint8)
    lengths = np.array([len(r) for r in raw], dtype=np.int64)
    hashes, units = propscan.java_hashes(data, np.cumsum(lengths) - lengths, lengths)
    assert hashes.tolist() == [string_hash(t) & 0xFFFFFFFF for t in texts]
    assert units.tolist() == [len(t.encode("utf-16-le")) // 2 for t in texts]
    assert lengths.tolist() == [len(r) for r in raw]  # the caller's lengths are left alone


def test_java_hashes_of_one_width_with_repeats_and_non_ascii():
    assert_java_hashes(["TagA", "标签E", "标签E", "ключ", "abcdefgh", "", "x", "标签E", "Ünï", "TagA"] * 30)


@pytest.mark.parametrize("late", [False, True])
def test_java_hashes_of_many_short_values(late):
    """Values of up to 8 bytes: a few distinct ones are hashed once each, many are hashed in bulk,
    also when the many only come after a long run of a few (``late``)."""
    texts = [f"k{i % 50}" for i in range(300)]
    assert_java_hashes(["TagA", "标签E"] * 400 + texts if late else texts)


@pytest.mark.parametrize(
    "texts",
    [
        ["ab", "ab\x00", "ab"] * 200,  # the same zero-padded word at two lengths
        ["TagA", "TagB"] * 300 + ["Late"],  # a value the sample did not see
    ],
)
def test_java_hashes_of_a_few_values_are_exact(texts):
    assert_java_hashes(texts)
