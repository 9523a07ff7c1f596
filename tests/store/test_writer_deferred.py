"""``StoreWriter`` with ``defer_dispatch``: the consume queues and index come out byte for byte as
with the dispatch at once, whatever mix of deferred and immediate appends (``ReputMessageService``
runs behind the CommitLog; formats.md §7)."""

from __future__ import annotations

import itertools
from pathlib import Path

from formats import commitlog as fmt
from rmqcli.store.write.messages import BatchElement, BatchMessage, InnerMessage, Message
from rmqcli.store.write.writer import StoreWriter
from tests.support.stores import TINY

T0 = 1_700_000_000_000


def _writer(root: Path) -> StoreWriter:
    """Store timestamps come with the messages; the clock (also read by the dispatch, for config
    timestamps) stands still, so both runs see the same times whenever they dispatch."""
    names = (f"2023111400000{i:04d}" for i in itertools.count())
    return StoreWriter(root, TINY, clock=lambda: T0, index_namer=lambda _ts: next(names))


def _feed(w: StoreWriter, defer: bool) -> list[int]:
    """Plain, delayed and prepared sends, a batch and a broker-built message, in one order."""
    offsets = []
    for i in range(60):
        props = {"KEYS": f"k{i} x{i % 3}", "TAGS": f"t{i % 4}", "UNIQ_KEY": f"{i:032X}", "WAIT": "true"}
        if i % 7 == 3:
            props["DELAY"] = "2"
        sys_flag = fmt.TransactionType.PREPARED if i % 11 == 5 else 0
        ts = T0 + 1000 * i
        msg = Message("T", i % 3, bytes([i]) * (100 + i), props, sys_flag=sys_flag, store_timestamp=ts)
        offsets.append(w.append(msg, defer_dispatch=defer).physical_offset)
        if i == 20:
            batch = BatchMessage(
                "T", 1, [BatchElement(b"b" * 50, {"KEYS": f"b{j}"}) for j in range(3)], store_timestamp=ts
            )
            offsets += [r.physical_offset for r in w.append_batch(batch).records]
        if i == 40:
            inner = InnerMessage("%RETRY%G", 0, b"r", {"KEYS": "retry"}, store_timestamp=ts)
            offsets.append(w.put_message(inner).physical_offset)
        if i == 30:
            inner = InnerMessage("T", 2, b"s", {}, b"KEYS\x01s1 s2\x02TAGS\x01s\x02", store_timestamp=ts)
            offsets.append(w.put_message(inner, defer_dispatch=defer).physical_offset)
        if i == 50:
            offsets.append(w.queue_max_offset("T", 2))  # a reader sees every append made before it
    return offsets


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for sub in ("commitlog", "consumequeue", "index")
        for p in sorted((root / sub).rglob("*"))
        if p.is_file()
    }


def test_deferred_dispatch_writes_the_same_bytes(tmp_path):
    with _writer(tmp_path / "now") as w:
        now = _feed(w, False)
    with _writer(tmp_path / "later") as w:
        later = _feed(w, True)
        assert w._pending  # the last sends wait for dispatch_pending (or the flush at close)
    assert now == later
    a, b = _files(tmp_path / "now"), _files(tmp_path / "later")
    assert len(a) > 10 and a.keys() == b.keys()
    for name in a:
        assert a[name] == b[name], name
    assert (tmp_path / "now" / "checkpoint").read_bytes() == (tmp_path / "later" / "checkpoint").read_bytes()
