"""Damaged CommitLogs in `stats`, `dump-commitlog` and `verify`: one-line errors (exit 4) that say what
was left unread, `--skip-corrupt` reading on as `verify` does, "not found" (exit 3) for names that
select nothing, and terminal tables (keys as column names, ellipses, a marked bad CRC).

Every damaged store is a copy of a store written by a real 4.9.8 broker (``../shared/fixtures/real``).
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
from pathlib import Path

import numpy as np
import pytest

from rmqcli.errors import CorruptDataError
from rmqcli.store import Store
from rmqcli.store.read.commitlog import Corruption
from rmqcli.store.scan.headerscan import walk
from tests.support.cli import RMQ, run_rmq
from tests.support.realfixtures import REAL_ROOT
from tests.support.stores import writable_copy

BASIC = REAL_ROOT / "basic-1"
pytestmark = pytest.mark.real

FILE_2 = "00000000000001048576"
INT32_MIN = b"\x80\x00\x00\x00"


def records() -> list[dict]:
    lines = (BASIC / "store.records.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return writable_copy(BASIC / "store", tmp_path / "store")


def patch(path: Path, at: int, data: bytes) -> None:
    with open(path, "r+b") as handle:
        handle.seek(at)
        handle.write(data)


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("rmq: error: ")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


def verify_records(store: Path) -> int:
    proc = run_rmq("verify", str(store), "--json")
    assert proc.returncode == 4 and "Traceback" not in proc.stderr
    return json.loads(proc.stdout)["summary"]["records"]


# --- (a) an empty CommitLog file -----------------------------------------------------------------
def test_empty_commitlog_file_in_the_middle(store, rmq_proc):
    empty = store / "commitlog" / FILE_2
    empty.write_bytes(b"")
    for args in (["stats"], ["stats", "--json"], ["dump-commitlog"], ["dump-commitlog", "--json"]):
        proc = rmq_proc(*args, str(store))
        assert proc.returncode == 4, (args, proc.stderr)
        line = one_line_error(proc)
        assert f"{empty} at byte 0: file is 0 bytes" in line and "were not read" in line, line
    in_other_files = sum(r["file"] != FILE_2 for r in records())
    assert verify_records(store) == in_other_files
    proc = rmq_proc("dump-commitlog", str(store), "--output", "jsonl", "--skip-corrupt")
    assert proc.returncode == 4 and "Traceback" not in proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert sum(r.get("kind") != "corrupt" for r in rows) == in_other_files
    assert [r["problem"] for r in rows if r.get("kind") == "corrupt"] == ["missing-bytes"]
    proc = rmq_proc("stats", str(store), "--json", "--skip-corrupt")
    assert proc.returncode == 4 and "Traceback" not in proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["commitlog"]["records"] == in_other_files
    assert [c["problem"] for c in doc["corrupt"]] == ["missing-bytes"]


@pytest.mark.parametrize("which", ["new-file-after-the-last", "last-file-emptied"])
def test_empty_last_file_is_reported_after_the_records(store, which, rmq_proc):
    """``MappedFileQueue.load`` refuses a file of another size (a broker that died while creating
    it leaves one of 0 bytes): the records before it are read, then it is reported."""
    last = sorted((store / "commitlog").iterdir())[-1]
    if which == "new-file-after-the-last":
        empty = last.parent / f"{int(last.name) + last.stat().st_size:020d}"
        kept = len(records())
    else:
        empty = last
        kept = sum(r["file"] != last.name for r in records())
    empty.write_bytes(b"")
    proc = rmq_proc("stats", str(store))
    assert proc.returncode == 4
    assert f"{empty} at byte 0: file is 0 bytes, 1048576 expected" in one_line_error(proc)
    proc = rmq_proc("dump-commitlog", str(store), "--output", "jsonl")
    assert proc.returncode == 4 and f"{empty} at byte 0: file is 0 bytes" in one_line_error(proc)
    assert len(proc.stdout.splitlines()) == kept


# --- (b) TOTALSIZE = INT32_MIN ---------------------------------------------------------------------
def test_walk_from_a_negative_hop_walks_nothing():
    buf = bytes(64)
    assert walk(buf, -2147483648 + 100, len(buf)) == []
    assert walk(buf, -5, len(buf), until=0) is None


@pytest.mark.parametrize("nth", [0, 7], ids=["first-of-a-file", "inside-a-file"])
def test_total_size_int32_min(store, nth, rmq_proc):
    victim = [r for r in records() if r["file"] == FILE_2][nth]
    path = store / "commitlog" / FILE_2
    patch(path, victim["filePos"], INT32_MIN)
    for args in (["stats"], ["stats", "--json"], ["dump-commitlog"]):
        proc = rmq_proc(*args, str(store))
        assert proc.returncode == 4, (args, proc.stderr)
        line = one_line_error(proc)
        assert f"{path} at byte {victim['filePos']}: total size -2147483648" in line, line
    proc = rmq_proc("verify", str(store), "--json")
    assert proc.returncode == 4 and "Traceback" not in proc.stderr and "BufferError" not in proc.stderr
    problems = json.loads(proc.stdout)["problems"]
    assert any(p["file"].endswith(FILE_2) and p["offset"] == victim["filePos"] for p in problems)


# --- (c) zeros inside a file, a lost BLANK ---------------------------------------------------------
def zero_hole(store: Path) -> tuple[Path, int, int]:
    """Zeros over records 20..44 of the second file: (file, hole start, records zeroed)."""
    in_file = [r for r in records() if r["file"] == FILE_2]
    start, end = in_file[20]["filePos"], in_file[45]["filePos"] - 7  # into the next record's TOTALSIZE
    path = store / "commitlog" / FILE_2
    patch(path, start, bytes(end - start))
    return path, start, 25


def test_zero_hole_is_reported_and_skipped_as_verify_does(store, rmq_proc):
    path, start, lost = zero_hole(store)
    kept = len(records()) - lost
    assert verify_records(store) == kept
    for args in (["stats"], ["stats", "--json"], ["dump-commitlog"], ["dump-commitlog", "--json"]):
        proc = rmq_proc(*args, str(store))
        assert proc.returncode == 4, (args, proc.stderr)
        line = one_line_error(proc)
        assert f"{path} at byte {start}: zeros from here" in line, line
        after = [r for r in records() if r["file"] == FILE_2][lost + 20 :]
        assert f"{len(after)} record(s) ({sum(r['totalSize'] for r in after)} bytes)" in line, line
        assert "were not read" in line
    proc = rmq_proc("dump-commitlog", str(store), "--output", "jsonl", "--skip-corrupt")
    assert proc.returncode == 4 and "Traceback" not in proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    corrupt = [r for r in rows if r.get("kind") == "corrupt"]
    assert [(c["problem"], c["filePos"]) for c in corrupt] == [("zero-hole", start)]
    assert len(rows) - 1 == kept
    assert f"{path} at byte {start}" in one_line_error(proc)
    proc = rmq_proc("stats", str(store), "--json", "--skip-corrupt")
    assert proc.returncode == 4 and "Traceback" not in proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["commitlog"]["records"] == kept
    assert [(c["problem"], c["filePos"]) for c in doc["corrupt"]] == [("zero-hole", start)]
    assert "zeros from here" in proc.stderr and "rmq: warning:" in proc.stderr


def test_zeroed_file_end_before_later_records(store, rmq_proc):
    """The end of the first file, BLANK record included, zeroed: the records after it are there."""
    first = [r for r in records() if r["file"] == "00000000000000000000"]
    path = store / "commitlog" / "00000000000000000000"
    start = first[-3]["filePos"]
    patch(path, start, bytes(path.stat().st_size - start))
    kept = len(records()) - 3
    assert verify_records(store) == kept
    for command in ("stats", "dump-commitlog"):
        proc = rmq_proc(command, str(store))
        assert proc.returncode == 4, (command, proc.stderr)
        line = one_line_error(proc)
        assert f"{path} at byte {start}: data ends here in zeros without a BLANK record" in line, line
    proc = rmq_proc("stats", str(store), "--json", "--skip-corrupt")
    assert proc.returncode == 4 and json.loads(proc.stdout)["commitlog"]["records"] == kept


def test_scans_agree_on_a_zero_hole(store):
    """``records``, ``headers`` and ``header_batches`` stop at the same hole, and read on alike."""
    path, start, lost = zero_hole(store)
    s = Store.open(store)
    for scan in (s.commitlog.records, s.commitlog.headers, s.commitlog.header_batches):
        with pytest.raises(CorruptDataError) as info:
            for _ in scan():
                pass
        assert info.value.path == str(path) and info.value.offset == start
    skipped: list[Corruption] = []
    batches = list(s.commitlog.header_batches(hints=s.record_offsets(), on_corrupt=skipped.append))
    got = np.concatenate([b.position for b in batches]).tolist()
    items = list(s.commitlog.records(skip_corrupt=True))
    assert got == [r.position for r in items if not isinstance(r, Corruption)]
    assert len(got) == len(records()) - lost
    assert [(c.kind, c.file_position) for c in skipped] == [("zero-hole", start)]
    assert [(c.kind, c.file_position) for c in items if isinstance(c, Corruption)] == [("zero-hole", start)]
    s.close()


# --- (d) names that select nothing -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--topic", "NoSuch"], "topic 'NoSuch' not found"),
        (["--topic", "TopicA", "--key", "no-such-key"], "key 'no-such-key' of topic 'TopicA' not found"),
        (["--key", "no-such-key"], "key 'no-such-key' not found"),
        (["--topic", "TopicA", "--queue", "99"], "queue 99 of topic 'TopicA' not found"),
    ],
)
def test_a_name_that_selects_nothing_is_not_found(args, message, rmq_proc):
    for output in ("table", "json"):
        proc = rmq_proc("dump-commitlog", str(BASIC / "store"), *args, "--output", output)
        assert proc.returncode == 3, proc.stderr
        assert one_line_error(proc) == f"rmq: error: {message}"
    assert json.loads(rmq_proc("dump-commitlog", str(BASIC / "store"), *args, "--json").stdout) == []


def test_a_range_that_selects_nothing_is_not_an_error(store, rmq_proc):
    args = ["dump-commitlog", str(BASIC / "store"), "--json"]
    assert rmq_proc(*args, "--topic", "TopicA", "--since", "2100-01-01").returncode == 0
    assert rmq_proc(*args, "--from", "99999999999").returncode == 0
    # a topic the store has (a consume-queue directory) without records: found, nothing selected
    (store / "consumequeue" / "Quiet" / "0").mkdir(parents=True)
    proc = rmq_proc("dump-commitlog", str(store), "--topic", "Quiet", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout) == []


# --- (e) tables -----------------------------------------------------------------------------------
def on_terminal(*args: str, columns: int) -> str:
    """The output of ``rmq ARGS`` on a pseudo-terminal ``columns`` wide, without colours."""
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": str(columns), "LINES": "50", "TERM": "xterm"}
    proc = subprocess.Popen([*RMQ, *args], stdout=slave, stderr=subprocess.DEVNULL, env=env)
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    proc.wait(timeout=60)
    return out.decode("utf-8", "replace")


def strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text).replace("\r", "")


def test_terminal_and_pipe_use_the_same_column_names(rmq_proc):
    args = ["dump-commitlog", str(BASIC / "store"), "--count", "3"]
    piped = rmq_proc(*args).stdout.splitlines()[0].split("\t")
    assert "crcOk" in piped
    shown = strip_ansi(on_terminal(*args, columns=250))
    header = next(line for line in shown.splitlines() if "position" in line)
    assert header.split() == piped


def test_cut_cells_end_in_an_ellipsis_and_no_column_disappears(rmq_proc):
    args = ["dump-commitlog", str(BASIC / "store"), "--count", "3"]
    piped = rmq_proc(*args).stdout.splitlines()
    msg_id = piped[1].split("\t")[-1]
    shown = strip_ansi(on_terminal(*args, columns=100)).splitlines()
    assert all(len(line.rstrip()) <= 100 for line in shown)
    rows = [line for line in shown if line.strip().startswith("0 ")]
    assert len(rows) == 1 and "…" in rows[0] and msg_id not in rows[0]
    cells = rows[0].split()
    assert any(c.endswith("…") and msg_id.startswith(c[:-1]) for c in cells), cells
    assert len(re.split(r"\s{2,}", rows[0].strip())) == len(piped[0].split("\t"))  # every column is there


def test_markup_in_a_cell_is_shown_as_text(store):
    """A key such as ``[/b]`` is text on a terminal (rich markup would fail on it)."""
    rec = records()[0]
    path = store / "commitlog" / rec["file"]
    raw = path.read_bytes()
    key = rec["properties"]["KEYS"].encode()
    at = raw.index(b"KEYS\x01" + key, rec["filePos"]) + 5
    patch(path, at, b"[/b]"[: len(key)].ljust(len(key), b"x"))
    shown = on_terminal("dump-commitlog", str(store), "--count", "1", columns=250)
    assert "Traceback" not in shown and "[/b]" in strip_ansi(shown)


def test_bad_crc_is_shown_marked_and_exits_4(store, rmq_proc):
    victim = records()[1]
    path = store / "commitlog" / victim["file"]
    body_at = victim["filePos"] + victim["bodyOffsetInRecord"]
    patch(path, body_at, bytes([path.read_bytes()[body_at] ^ 0xFF]))
    proc = rmq_proc("dump-commitlog", str(store), "--count", "3")
    assert proc.returncode == 4
    lines = proc.stdout.splitlines()
    crc = lines[0].split("\t").index("crcOk")
    assert [line.split("\t")[crc] for line in lines[1:]] == ["true", "FALSE", "true"]
    assert f"{path} at byte {victim['filePos']}: body CRC" in proc.stderr
    assert f"{path} at byte {victim['filePos']}" in one_line_error(proc)
    proc = rmq_proc("dump-commitlog", str(store), "--count", "3", "--json")
    assert proc.returncode == 4 and [r["crcOk"] for r in json.loads(proc.stdout)] == [True, False, True]
    shown = on_terminal("dump-commitlog", str(store), "--count", "3", columns=250)
    assert "\x1b[1;31mFALSE" in shown  # bold red


# --- rmq pipeline stats says what rmq stats says ----------------------------------------------------
@pytest.mark.parametrize("damage", ["zero-hole", "empty-file", "zeroed-end"])
def test_pipeline_stats_fails_as_rmq_stats_does(spark, store, damage, capsys, rmq_proc):
    from rmqcli.cli.main import invoke

    if damage == "zero-hole":
        zero_hole(store)
    elif damage == "empty-file":
        (store / "commitlog" / FILE_2).write_bytes(b"")
    else:
        path = store / "commitlog" / "00000000000000000000"
        start = [r for r in records() if r["file"] == path.name][-3]["filePos"]
        patch(path, start, bytes(path.stat().st_size - start))
    want = rmq_proc("stats", str(store))
    assert want.returncode == 4
    capsys.readouterr()
    assert invoke(["pipeline", "stats", str(store)]) == 4
    assert capsys.readouterr().err == want.stderr
