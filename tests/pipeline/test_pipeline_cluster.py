"""``rmq pipeline`` on a Spark standalone cluster: the results of ``local[2]``, row for row, paths
resolved on the driver, paths the executors cannot see refused, a task whose executor dies retried.

The cluster (``tests.support.spark_cluster``) is one Master and two Workers of one core each on
loopback, started once for this module from the installed PySpark. Its second Worker runs in a
mount namespace of its own with an empty tmpfs over ``PRIVATE``: what lies there exists for the
driver only, as a disk of the driver's machine does on a real cluster. A cluster run is ``rmq`` as
a child process (a driver of its own, in a directory of the test's); the ``local[2]`` runs go
through the run's local session (the ``spark`` fixture) in this process.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmqcli.cli.main import invoke
from tests.support.cli import RMQ, invoke_rmq, one_line_error, rmq_env, run_rmq
from tests.support.components import require
from tests.support.spark_cluster import SparkCluster
from tests.support.stores import sparse_copy

KILL_STORE_MIB = 48  # 12 CommitLog files of 4 MiB: a dozen tasks of about a second each
KILL_FILE_MIB = 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    require("spark")
    root = tmp_path_factory.mktemp("spark-cluster")
    private = root / "private"
    private.mkdir()
    daemons = SparkCluster(root / "daemons", workers=2, cores=1, private=private)
    try:
        yield daemons.start()
    finally:
        daemons.stop()


def on_cluster(
    cluster: SparkCluster, *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``rmq pipeline ARGS --master <the cluster>`` as a child process; executors run this Python."""
    env = {"PYSPARK_PYTHON": sys.executable}
    return run_rmq("pipeline", *args, "--master", cluster.url, env=env, cwd=cwd or cluster.root)


def local(*args: str) -> str:
    """``rmq pipeline ARGS`` on the run's local[2] session; its stdout."""
    return invoke_rmq("pipeline", *args, check=True).stdout


def rows_of(spark, out: Path, fmt: str) -> list[dict]:  # type: ignore[no-untyped-def]
    frame = spark.read.parquet(str(out)) if fmt == "parquet" else spark.read.json(str(out))
    rows = [row.asDict(recursive=True) for row in frame.collect()]
    return sorted(rows, key=lambda r: (r["store"], r["position"]))


def stray_parquet(cluster: SparkCluster) -> list[Path]:
    """Parquet files written anywhere under the daemons' directories (the executors' cwd)."""
    return [p for p in cluster.root.rglob("*.parquet")]


def leftovers(out: Path) -> list[Path]:
    """Files of a task attempt or of the paths check left in an output directory."""
    return [p for p in out.rglob(".*") if p.name.endswith(".inprogress") or p.name.startswith(".rmq-probe-")]


@pytest.fixture(scope="module")
def local_exports(spark, all_stores, tmp_path_factory):  # type: ignore[no-untyped-def]
    """The local[2] export of every store with --body raw, read back, per format."""
    out = tmp_path_factory.mktemp("local-export")
    found = {}
    for fmt in ("parquet", "jsonl"):
        stores = [str(s) for s in all_stores]
        assert (
            invoke(["pipeline", "export", *stores, "--out", str(out / fmt), "--format", fmt, "--body", "raw"])
            == 0
        )
        found[fmt] = rows_of(spark, out / fmt, fmt)
    return found


@pytest.mark.parametrize(("fmt", "relative"), [("parquet", True), ("jsonl", True), ("parquet", False)])
def test_export_equals_local_and_lands_where_asked(
    cluster, spark, all_stores, local_exports, tmp_path, fmt, relative
):
    out = Path("exported") / fmt if relative else tmp_path / "abs" / fmt
    proc = on_cluster(
        cluster, "export", *map(str, all_stores), "--out", str(out), "--format", fmt, "--body", "raw",
        "--json", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    where = tmp_path / out  # an absolute ``out`` stays itself
    assert summary["out"] == str(where)  # the summary names where the files are
    rows = rows_of(spark, where, fmt)
    assert summary["records"] == len(rows) == len(local_exports[fmt])
    assert rows == local_exports[fmt]
    assert stray_parquet(cluster) == []
    assert leftovers(where) == []


def test_stats_equal_local(cluster, spark, all_stores):
    stores = [str(s) for s in all_stores]
    proc = on_cluster(cluster, "stats", *stores, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == json.loads(local("stats", *stores, "--json"))


def test_search_equal_local(cluster, spark, all_stores):
    stores = [str(s) for s in all_stores]
    query = ["--body-regex", "[0-9]{3}", "--body", "utf8", "--json"]
    proc = on_cluster(cluster, "search", *stores, *query)
    assert proc.returncode == 0, proc.stderr
    mine = json.loads(proc.stdout)
    assert mine == json.loads(local("search", *stores, *query))
    assert len({row["store"] for row in mine}) > 2  # matches in several stores


def test_lag_equal_local(cluster, spark, all_stores):
    stores = [str(s) for s in all_stores]
    proc = on_cluster(cluster, "lag", *stores, "--json")
    assert proc.returncode == 0, proc.stderr
    mine = json.loads(proc.stdout)
    assert mine and mine == json.loads(local("lag", *stores, "--json"))


def _store_files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for sub in ("consumequeue", "index")
        for p in sorted((root / sub).rglob("*"))
        if p.is_file()
    }


def test_rebuild_writes_the_bytes_of_a_local_rebuild(cluster, spark, all_stores, tmp_path):
    copies = {}
    for side in ("cluster", "local"):
        copies[side] = []
        for i, store in enumerate(all_stores[:3]):
            target = tmp_path / side / f"s{i}"
            shutil.copytree(store, target, copy_function=sparse_copy)
            for sub in ("consumequeue", "index"):
                shutil.rmtree(target / sub, ignore_errors=True)  # rebuilt from nothing
            copies[side].append(str(target))
    proc = on_cluster(cluster, "rebuild", *copies["cluster"], "--yes")
    assert proc.returncode == 0, proc.stderr
    local("rebuild", *copies["local"], "--yes")
    for mine, theirs in zip(copies["cluster"], copies["local"], strict=True):
        rebuilt = _store_files(Path(mine))
        assert rebuilt and rebuilt == _store_files(Path(theirs))


def test_paths_the_executors_cannot_see_are_refused(cluster, generated_stores, tmp_path):
    hidden = cluster.private / "store"
    shutil.copytree(generated_stores[0], hidden, copy_function=sparse_copy)
    try:
        proc = on_cluster(cluster, "stats", str(hidden), "--json", cwd=tmp_path)
        assert proc.returncode == 2 and proc.stdout == ""
        err = one_line_error(proc.stderr)
        assert f"{hidden}/commitlog/" in err and "not visible to the Spark executors" in err

        out = cluster.private / "out"
        proc = on_cluster(cluster, "export", str(generated_stores[0]), "--out", str(out), cwd=tmp_path)
        assert proc.returncode == 2
        err = one_line_error(proc.stderr)
        assert err.startswith(f"rmq: error: {out}: not visible to the Spark executors")
        assert not out.exists()  # the directory made for the check is gone again
    finally:
        shutil.rmtree(hidden)
    assert stray_parquet(cluster) == []


@pytest.fixture(scope="module")
def kill_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fixtures.generate import generate

    path = tmp_path_factory.mktemp("kill-store") / "store"
    generate(path, "bench", size_mib=KILL_STORE_MIB, file_mib=KILL_FILE_MIB)
    return path


def _writer_of(out: Path) -> int | None:
    """A process holding a file open that is being written under ``out`` (a hidden attempt file)."""
    prefix = str(out) + "/"
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith(prefix) and target.endswith(".inprogress"):
                    return int(proc.name)
        except OSError:
            continue
    return None


def test_a_task_whose_executor_is_killed_is_retried_and_every_row_is_written_once(
    cluster, spark, kill_store, tmp_path
):
    out = tmp_path / "out"
    env = rmq_env({"PYSPARK_PYTHON": sys.executable})
    args = [*RMQ, "pipeline", "export", str(kill_store), "--out", str(out), "--json", "--master", cluster.url]
    child = subprocess.Popen(
        args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        killed = None
        deadline = time.monotonic() + 300
        while killed is None and child.poll() is None and time.monotonic() < deadline:
            writer = _writer_of(out)
            executor = cluster.executor_of(writer) if writer is not None else None
            if executor is not None:
                os.kill(executor, signal.SIGKILL)  # mid-write: the task dies with its executor
                killed = executor
            else:
                time.sleep(0.01)
        stdout, stderr = child.communicate(timeout=600)
    finally:
        if child.poll() is None:
            child.kill()
    assert killed is not None, "no task was caught writing"
    assert child.returncode == 0, stderr
    summary = json.loads(stdout)
    rows = rows_of(spark, out, "parquet")
    positions = [(r["store"], r["position"]) for r in rows]
    assert len(set(positions)) == len(positions)  # not one row twice
    local_rows = rows_of(spark, _local_export(kill_store, tmp_path / "local"), "parquet")
    assert summary["records"] == len(rows) == len(local_rows) > 0
    assert rows == local_rows
    assert leftovers(out) == []  # the killed attempt's file removed
    # the kill landed: a Worker saw its executor die of SIGKILL (128 + 9), not stopped at the end
    assert [
        line for line in _worker_logs(cluster) if "finished with state" in line and "exitStatus 137" in line
    ]


def _local_export(store: Path, out: Path) -> Path:
    assert invoke(["pipeline", "export", str(store), "--out", str(out)]) == 0
    return out


def _worker_logs(cluster: SparkCluster) -> list[str]:
    return [
        line for p in cluster.root.glob("worker-*.log") for line in p.read_text(errors="replace").splitlines()
    ]
