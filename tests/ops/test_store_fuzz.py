"""A bounded store fuzz: seeded mutations of the real-broker stores, every command on each.

Each mutation damages one file of a copy of a store written by Apache RocketMQ 4.9.8 (a flipped
byte, a zeroed stretch, a truncation, a TOTALSIZE set to an odd value, garbage JSON), across
every file kind: CommitLog, consume queue, index, checkpoint and config JSON. The read-only
commands then run on it (``verify``, ``stats``, ``dump-commitlog`` always, and the dump of the
damaged kind) in worker processes, each mutation under a time limit, and the test asserts:

* no traceback and no hang; exit codes only 0, 3 or 4;
* a flipped byte in a record's body is reported by ``verify`` at that record's offset;
* when ``verify`` finds records missing from the CommitLog (anything but a CRC mismatch in a
  CommitLog file), neither ``dump-commitlog`` nor ``stats`` exits 0.

The mutation is undone after the commands ran, so one copy of each store serves every mutation.
"""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import random
import shutil
import struct
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.realfixtures import REAL_ROOT
from tests.support.stores import sparse_copy

SEED = 20261125
MUTATIONS = 320
TIME_LIMIT = 60.0  # seconds for the commands of one mutation
ALLOWED_EXITS = {0, 3, 4}
# verify's CommitLog findings after which records are not read (a CRC mismatch leaves the record)
MISSING_RECORD_KINDS = {
    "zero-hole", "bad-magic", "bad-size", "bad-length", "torn-record", "truncated-record",
    "commitlog-file-gap", "commitlog-file-size", "bad-blank", "missing-blank",
}  # fmt: skip

pytestmark = pytest.mark.real


@dataclass(frozen=True)
class Mutation:
    store: str  # index into the worker's list of store copies
    path: str  # relative to the store
    kind: str
    offset: int = 0
    data: bytes = b""
    length: int = 0  # for truncations: the new length
    body_record: int | None = None  # the record offset when a body byte is flipped

    def describe(self) -> str:
        return f"{self.store}:{self.path} {self.kind} at {self.offset} ({self.length or len(self.data)})"


def _records(scenario: Path) -> list[dict]:
    with open(scenario / "store.records.jsonl", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def _files(store: Path, sub: str) -> list[Path]:
    base = store / sub
    return sorted(p for p in base.rglob("*") if p.is_file()) if base.exists() else []


def plan_mutations(stores: dict[str, Path]) -> list[Mutation]:
    """``MUTATIONS`` mutations, the same for every run (seeded)."""
    rng = random.Random(SEED)
    plans: list[Mutation] = []
    names = sorted(stores)
    kinds = ["body", "commitlog-byte", "commitlog-zero", "commitlog-size", "commitlog-truncate", "cq-byte",
             "cq-truncate", "index-byte", "index-truncate", "checkpoint", "config"]  # fmt: skip
    records = {
        name: [r for r in _records(stores[name].parent) if r.get("bodyLength", 0) > 0] for name in names
    }
    for i in range(MUTATIONS):
        name = names[i % len(names)]
        store = stores[name]
        kind = kinds[rng.randrange(len(kinds))]
        if kind == "body" and records[name]:
            r = rng.choice(records[name])
            offset = r["filePos"] + r["bodyOffsetInRecord"] + rng.randrange(r["bodyLength"])
            path = f"commitlog/{r['file']}"
            original = (store / path).read_bytes()[offset]
            plans.append(
                Mutation(name, path, "flip", offset, bytes([original ^ 0xFF]), body_record=r["filePos"])
            )
        elif kind.startswith("commitlog"):
            f = rng.choice(_files(store, "commitlog"))
            rel, size = str(f.relative_to(store)), f.stat().st_size
            if kind == "commitlog-byte":
                at = rng.randrange(size)
                plans.append(
                    Mutation(name, rel, "flip", at, bytes([f.read_bytes()[at] ^ (1 << rng.randrange(8))]))
                )
            elif kind == "commitlog-zero":
                at, n = rng.randrange(size), rng.choice([4, 64, 4096, 65536])
                plans.append(Mutation(name, rel, "write", at, bytes(min(n, size - at))))
            elif kind == "commitlog-size":
                starts = [r["filePos"] for r in records[name] if r["file"] == f.name] or [0]
                value = rng.choice([-(1 << 31), -1, 0, 1, 7, (1 << 31) - 1, 1 << 24, 4 * 1024 * 1024 + 1])
                plans.append(Mutation(name, rel, "write", rng.choice(starts), struct.pack(">i", value)))
            else:
                plans.append(Mutation(name, rel, "truncate", length=rng.choice([0, rng.randrange(size)])))
        else:
            sub = {"cq": "consumequeue", "index": "index", "checkpoint": "checkpoint", "config": "config"}[
                kind.split("-")[0]
            ]
            files = [store / "checkpoint"] if sub == "checkpoint" else _files(store, sub)
            files = [p for p in files if p.is_file() and p.stat().st_size > 0]
            if not files:
                continue
            f = rng.choice(files)
            rel, size = str(f.relative_to(store)), f.stat().st_size
            if kind.endswith("truncate") or (sub in ("checkpoint", "config") and rng.random() < 0.4):
                plans.append(Mutation(name, rel, "truncate", length=rng.randrange(size)))
            elif sub == "config" and rng.random() < 0.5:
                garbage = rng.choice(
                    [b"{", b"[1,2", b'{"a":' * 200, b"\xff\xfe\x00", b"null", b'{"offsetTable":7}']
                )
                plans.append(Mutation(name, rel, "replace", data=garbage))
            else:
                at = rng.randrange(size)
                plans.append(Mutation(name, rel, "flip", at, bytes([f.read_bytes()[at] ^ 0xFF])))
    return plans


def _commands(mutation: Mutation, store: str) -> list[list[str]]:
    commands = [
        ["verify", store, "--json"],
        ["stats", store, "--json"],
        ["dump-commitlog", store, "--output", "jsonl"],
    ]
    top = mutation.path.split("/")[0]
    if top == "consumequeue":
        _, topic, queue, _ = mutation.path.split("/")
        commands.append(["dump-cq", store, "--topic", topic, "--queue", queue, "--output", "jsonl"])
    elif top == "index":
        commands.append(["dump-index", store, "--output", "jsonl"])
    elif top == "checkpoint":
        commands.append(["dump-checkpoint", store, "--json"])
    elif top == "config":
        commands.append(["dump-config", store, "--json"])
    return commands


# --- the worker: runs the commands in-process, one interpreter for many mutations ------------
_COPIES: dict[str, Path] = {}


def _init(stores: dict[str, str], base: str) -> None:
    """A worker's own copies of the stores (two workers never touch the same files)."""
    import os
    import tempfile

    own = Path(tempfile.mkdtemp(prefix=f"w{os.getpid()}-", dir=base))
    for name, store in stores.items():
        target = own / name
        shutil.copytree(store, target, copy_function=sparse_copy)
        for p in [target, *target.rglob("*")]:
            p.chmod(p.stat().st_mode | 0o200)
        _COPIES[name] = target


def _apply(path: Path, mutation: Mutation) -> bytes:
    original = path.read_bytes()
    data = bytearray(original)
    if mutation.kind in ("flip", "write"):
        data[mutation.offset : mutation.offset + len(mutation.data)] = mutation.data
        data = data[: len(original)]
    elif mutation.kind == "truncate":
        data = data[: mutation.length]
    elif mutation.kind == "replace":
        data = bytearray(mutation.data)
    path.write_bytes(bytes(data))
    return original


def run_mutation(mutation: Mutation) -> list[dict]:
    from rmqcli.cli.main import invoke

    root = _COPIES[mutation.store]
    target = root / mutation.path
    original = _apply(target, mutation)
    results = []
    try:
        for args in _commands(mutation, str(root)):
            out, err = io.StringIO(), io.StringIO()
            crash = None
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = invoke(args)
                except BaseException:  # what invoke lets through is a traceback for the user
                    code, crash = -1, traceback.format_exc()
            results.append(
                {
                    "args": args[:1],
                    "code": code,
                    "stdout": out.getvalue(),
                    "stderr": err.getvalue(),
                    "crash": crash,
                }
            )
    finally:
        target.write_bytes(original)
    return results


@pytest.fixture(scope="module")
def stores() -> dict[str, Path]:
    found = {}
    for expected in sorted(REAL_ROOT.glob("*/expected.json")):
        store = expected.parent / "store"
        if (store / "commitlog").is_dir() and (expected.parent / "store.records.jsonl").is_file():
            found[expected.parent.name] = store
    if not found:
        pytest.skip("no real store with records")
    return found


def test_store_fuzz(stores: dict[str, Path], tmp_path: Path) -> None:
    mutations = plan_mutations(stores)
    assert len(mutations) >= 300
    failures: list[str] = []
    context = multiprocessing.get_context("spawn")
    initargs = ({k: str(v) for k, v in stores.items()}, str(tmp_path))
    with context.Pool(2, initializer=_init, initargs=initargs) as pool:
        pending = [(m, pool.apply_async(run_mutation, (m,))) for m in mutations]
        for mutation, result in pending:
            try:
                outcome = result.get(TIME_LIMIT)
            except multiprocessing.TimeoutError:
                failures.append(f"{mutation.describe()}: no answer within {TIME_LIMIT:g} s (hang)")
                break  # the pool's worker is stuck; the rest cannot be trusted
            failures.extend(check(mutation, outcome))
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:40])


def check(mutation: Mutation, outcome: list[dict]) -> list[str]:
    problems = []
    where = mutation.describe()
    by_command = {r["args"][0]: r for r in outcome}
    for r in outcome:
        name = r["args"][0]
        if r["crash"] or "Traceback" in r["stderr"]:
            last = (r["crash"] or r["stderr"]).strip().splitlines()[-1]
            problems.append(f"{where}: {name} traceback: {last}")
        elif r["code"] not in ALLOWED_EXITS:
            problems.append(f"{where}: {name} exit {r['code']}: {r['stderr'].strip()[:200]}")
    verify = by_command["verify"]
    try:
        report = json.loads(verify["stdout"]) if verify["stdout"].strip() else None
    except ValueError:
        report = None
    if mutation.body_record is not None:
        offsets = {
            p.get("offset") for p in (report or {}).get("problems", []) if p.get("severity") == "error"
        }
        if verify["code"] != 4 or mutation.body_record not in offsets:
            problems.append(
                f"{where}: verify did not report the flipped body byte of record {mutation.body_record}"
            )
    if report is not None:
        missing = [
            p for p in report.get("problems", [])
            if p.get("severity") == "error" and p.get("kind") in MISSING_RECORD_KINDS
        ]  # fmt: skip
        if missing:
            for name in ("dump-commitlog", "stats"):
                if by_command[name]["code"] == 0:
                    problems.append(
                        f"{where}: {name} exit 0 while verify finds {missing[0]['kind']} in the CommitLog"
                    )
    return problems


def test_verify_with_every_commitlog_byte_gone(tmp_path: Path) -> None:
    """The fuzz's first find: a store whose only CommitLog file is empty, queues still pointing
    into it. Every unit is reported (its record is gone), without a traceback."""
    from rmqcli.cli.main import invoke

    store = tmp_path / "ipv6"
    shutil.copytree(REAL_ROOT / "ipv6" / "store", store, copy_function=sparse_copy)
    for p in [store, *store.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)
    (store / "commitlog" / "00000000000000000000").write_bytes(b"")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = invoke(["verify", str(store), "--json"])
    report = json.loads(out.getvalue())
    assert code == 4
    assert {k["kind"] for k in report["kinds"]} >= {"cq-past-end"} and report["summary"]["records"] == 0
