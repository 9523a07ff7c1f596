"""Bad bytes and unusual layouts: the readers raise only the project's errors."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqcli.errors import CorruptDataError
from rmqcli.store import Store
from rmqcli.store.naming import offset_to_name
from rmqcli.store.read.commitlog import Corruption, Record
from tests.support.components import require
from tests.support.reads import counted_reads
from tests.support.realfixtures import variants
from tests.support.records import record

FILE_SIZE = 64 * 1024


def _store_with(data: bytes) -> Path:
    root = Path(tempfile.mkdtemp())
    (root / "commitlog").mkdir()
    (root / "commitlog" / offset_to_name(0)).write_bytes(data.ljust(FILE_SIZE, b"\0")[:FILE_SIZE])
    return root


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(min_size=0, max_size=2048), st.integers(0, 1500))
def test_random_bytes_raise_only_corrupt_data_error(noise, cut):
    good = b"".join(record(i * 200, b"x" * 50) for i in range(3))
    root = _store_with(good[:cut] + noise)
    try:
        store = Store.open(root)
        for scan in (store.commitlog.records, store.commitlog.headers, store.commitlog.header_batches):
            try:
                for _ in scan():
                    pass
            except CorruptDataError as exc:
                assert str(root) in str(exc) and exc.offset is not None
        kinds = {type(x) for x in store.commitlog.records(skip_corrupt=True)}
        assert kinds <= {Record, Corruption}
        store.close()
    finally:
        shutil.rmtree(root)


def test_separate_and_multi_path_commitlog(tmp_path):
    """``storePathCommitLog`` in broker.conf, one directory or several separated by commas."""
    real = variants()
    if not real:
        require("real")
    source = next(v for v in real if v.id == "basic-1/store").store
    expected = [(r.position, r.msg_id) for r in Store.open(source).commitlog.records()]
    dirs = [tmp_path / "cl-even", tmp_path / "cl-odd"]
    for d in dirs:
        d.mkdir()
    for i, f in enumerate(sorted((source / "commitlog").iterdir())):
        shutil.copy(f, dirs[i % 2] / f.name)
    root = tmp_path / "root"
    shutil.copytree(source, root, ignore=shutil.ignore_patterns("commitlog"))
    conf = tmp_path / "broker.conf"
    conf.write_text(f"storePathRootDir={root}\nstorePathCommitLog={dirs[0]},{dirs[1]}\n")
    store = Store.open(root, conf)
    assert [(r.position, r.msg_id) for r in store.commitlog.records()] == expected
    assert store.commitlog.file_size == 1024 * 1024


def test_open_reads_the_config_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--config``: one read gives the store's settings and its layout (DLedger or not)."""
    root = tmp_path / "store"
    (root / "commitlog").mkdir(parents=True)
    (root / "dledger-n0" / "data").mkdir(parents=True)  # the file says which log is the store's
    conf = tmp_path / "broker.conf"
    conf.write_text("mappedFileSizeCommitLog=4096\nenableDLegerCommitLog=false\nfooBarKey=1\n")
    reads = counted_reads(monkeypatch)
    store = Store.open(root, conf)
    monkeypatch.undo()
    assert reads.count(conf) == 1
    assert store.configured and store.settings.mapped_file_size_commitlog == 4096
    assert store.settings.explicit == {"mapped_file_size_commitlog"}
    assert store.dledger is None
    store.close()
