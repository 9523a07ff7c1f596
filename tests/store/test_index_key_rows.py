"""``propscan.index_keys`` gives each key its own record when every record has a UNIQ_KEY and the
KEYS tokens add up to one per record without being one per record (one record none, another two):
the keys do not simply alternate (formats.md §3.2)."""

from __future__ import annotations

import numpy as np

from rmqcli.ops.verify import verify_store
from rmqcli.store import Store
from rmqcli.store.scan import headerscan, propscan
from rmqcli.store.write.messages import Message
from rmqcli.store.write.writer import StoreWriter


def test_keys_of_a_record_without_tokens_and_one_with_two(tmp_path):
    root = tmp_path / "store"
    with StoreWriter(root) as writer:
        writer.append(Message("TopicA", 0, b"first", {"UNIQ_KEY": "U0", "TAGS": "t"}))
        writer.append(Message("TopicA", 0, b"second", {"UNIQ_KEY": "U1", "KEYS": "a b", "TAGS": "t"}))
    store = Store.open(root)
    try:
        buf = store.commitlog.files[0].map()
        batch = headerscan.scan_records(buf, 0, 0, properties=True)
        names = ("UNIQ_KEY", "KEYS")
        scan = propscan.Scan(batch, batch.physical_offset, batch.tails.data, propscan.locate(batch, names))
        local, _ = propscan.index_keys(scan, np.arange(len(batch), dtype=np.int64))
        assert local.tolist() == [0, 1, 1, 1]  # U0; then U1, a, b
        report = verify_store(store)
        assert report.errors == 0 and report.warnings == 0, report.problems
        assert report.index_entries == 4
    finally:
        store.close()
