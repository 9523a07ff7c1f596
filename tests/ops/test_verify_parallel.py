"""``rmq verify`` scanning the CommitLog files in worker processes reports exactly what one process
scanning them in turn does (issue 20): the same problems in the same order (so ``--max-problems``
lists the same ones), counts, record table, index keys and progress, on generated stores with
random byte damage in several CommitLog files and on the real stores (real bytes, no mocks)."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import numpy as np
import pytest

from rmqcli.cli.main import invoke
from rmqcli.ops import verify_commitlog
from rmqcli.ops.verify import verify_store
from rmqcli.ops.verify_commitlog import CommitLogVerifier
from rmqcli.ops.verify_common import Collector
from rmqcli.store import Store
from tests.support.components import require
from tests.support.realfixtures import REAL_ROOT
from tests.support.stores import writable_copy

SEEDS = range(6)


def _parallel(monkeypatch: pytest.MonkeyPatch, on: bool) -> None:
    """Force the worker processes (tiny thresholds, two workers) or one process alone."""
    monkeypatch.setattr(verify_commitlog, "PARALLEL_MIN_FILES", 2)
    monkeypatch.setattr(verify_commitlog, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(verify_commitlog, "WORKERS", 2 if on else 1)


def _damage(store: Path, seed: int) -> None:
    """Overwrite a few random bytes (and sometimes a zeroed run) inside the data of every
    CommitLog file but one."""
    rng = random.Random(seed)
    files = sorted((store / "commitlog").iterdir())
    spared = rng.randrange(len(files))
    for k, path in enumerate(files):
        if k == spared:
            continue
        data = bytearray(path.read_bytes())
        used = len(data.rstrip(b"\0")) or len(data)
        for _ in range(rng.randint(1, 6)):
            data[rng.randrange(used)] = rng.randrange(256)
        if rng.random() < 0.3:
            at = rng.randrange(used)
            n = min(rng.randint(8, 400), len(data) - at)
            data[at : at + n] = bytes(n)
        path.write_bytes(bytes(data))


@pytest.fixture(params=SEEDS)
def damaged(request, tmp_path: Path, pristine: Path) -> Path:
    store = writable_copy(pristine, tmp_path / "store")
    _damage(store, request.param)
    return store


def _report(path: Path, progress: list[int], **kw) -> dict:
    store = Store.open(path)
    try:
        return dataclasses.asdict(verify_store(store, progress=progress.append, **kw))
    finally:
        store.close()


def _both(path: Path, monkeypatch: pytest.MonkeyPatch, **kw) -> tuple[dict, dict]:
    seen: dict[bool, tuple[dict, list[int]]] = {}
    for on in (False, True):
        _parallel(monkeypatch, on)
        progress: list[int] = []
        seen[on] = (_report(path, progress, **kw), progress)
    assert seen[False][1] == seen[True][1], "progress advances file by file alike"
    return seen[False][0], seen[True][0]


def test_the_tiny_thresholds_choose_workers(pristine: Path, monkeypatch) -> None:
    store = Store.open(pristine)
    try:
        files = store.commitlog.files
        assert len([f for f in files if f.size]) >= 3
        for on, workers in ((True, 2), (False, 1)):
            _parallel(monkeypatch, on)
            assert CommitLogVerifier(files, files[0].size, Collector(store.root))._workers() == workers
        monkeypatch.undo()  # the defaults: these small stores are scanned in this process
        assert CommitLogVerifier(files, files[0].size, Collector(store.root))._workers() == 1
    finally:
        store.close()


@pytest.mark.parametrize("crc", [True, False])
@pytest.mark.parametrize("max_problems", [None, 3])
def test_damaged_stores_report_alike(damaged: Path, crc: bool, max_problems, monkeypatch) -> None:
    alone, workers = _both(damaged, monkeypatch, crc=crc, max_problems=max_problems)
    assert workers == alone
    if max_problems is None:
        assert alone["problems"], "the damage was found"


def test_the_record_table_is_the_same(damaged: Path, monkeypatch) -> None:
    tables = {}
    for on in (False, True):
        _parallel(monkeypatch, on)
        store = Store.open(damaged)
        files = store.commitlog.files
        p = Collector(store.root)
        table = CommitLogVerifier(files, files[0].size, p).scan()
        try:
            cols = {
                f.name: getattr(table, f.name)
                for f in dataclasses.fields(table)
                if isinstance(getattr(table, f.name), np.ndarray)
            }
            tables[on] = (
                {k: (v.dtype.str, v.tolist()) for k, v in cols.items()},
                table.topics,
                table.keys.records().tolist(),
                table.keys.hashes().tolist(),
                [(i.data_end, i.tail, i.records, i.first_store_timestamp) for i in table.files],
                (table.valid_end, table.bytes, table.crc_checked, table.max_store_timestamp),
                [dataclasses.asdict(x) for x in p.problems],
                p.counts,
            )
        finally:
            table.keys.close()
            store.close()
    assert tables[True] == tables[False]


@pytest.mark.parametrize(
    "argv", [[], ["--json"], ["--no-crc", "--max-problems", "3"], ["--json", "--max-problems", "3"]]
)
def test_the_command_prints_alike(damaged: Path, argv: list[str], monkeypatch, capsys) -> None:
    out = {}
    for on in (False, True):
        _parallel(monkeypatch, on)
        rc = invoke(["verify", str(damaged), *argv])
        out[on] = (rc, capsys.readouterr().out)
    assert out[True] == out[False]


@pytest.mark.parametrize("name", ["basic-1/store", "crash-1/store-raw", "crash-1/store-recovered-by-broker"])
def test_real_stores_report_alike(name: str, monkeypatch) -> None:
    path = REAL_ROOT / name
    if not path.is_dir():
        require("real")
    for kw in ({}, {"crc": False, "max_problems": 3}):
        alone, workers = _both(path, monkeypatch, **kw)
        assert workers == alone
