"""Throughput of ``rmq pipeline export`` (Parquet) on local Spark with 1 and 2 cores, against the same
work in one process, and on a standalone cluster with one and two Workers, measured in the same run
(``python -m tests.bench.pipeline``; ``--cluster``: the cluster's figures only).

The store (generated once under ``bench-data/pipeline-store``) holds at least 1 GiB of 1 KiB
messages in 128 MiB CommitLog files. The single-process baseline reads the files one after the
other with the same row function (``export.task_rows``) and writes them with pyarrow as a dataset
partitioned the same way (as each Spark task does for its file). Spark times exclude the JVM start (shown
apart). Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.bench.run import ROOT, commitlog_files, ensure_store

TARGET_SCALING = 1.6  # 2 cores / 1 core, in every run
TARGET_CLUSTER_SCALING = 1.7  # 2 one-core Workers / 1, in every run
RUNS = 3


def single_process(store: Path, out: Path) -> tuple[int, float]:
    """The export's work without Spark: rows, Arrow batches, a partitioned Parquet dataset."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    from rmqcli.pipeline.export import BATCH_ROWS, Selection, task_rows
    from rmqcli.pipeline.schema import PARTITION_COLUMNS, ExportBody, arrow_schema
    from rmqcli.pipeline.tasks import file_tasks

    schema = arrow_schema(ExportBody.none)
    started = time.perf_counter()
    _, tasks = file_tasks([store])
    count = 0

    def batches():  # type: ignore[no-untyped-def]
        nonlocal count
        for task in tasks:
            rows = []
            for row in task_rows(task, Selection(), ExportBody.none):
                rows.append(row)
                if len(rows) >= BATCH_ROWS:
                    count += len(rows)
                    yield pa.RecordBatch.from_pylist(rows, schema=schema)
                    rows = []
            if rows:
                count += len(rows)
                yield pa.RecordBatch.from_pylist(rows, schema=schema)

    ds.write_dataset(
        pa.RecordBatchReader.from_batches(schema, batches()),
        out,
        format="parquet",
        partitioning=list(PARTITION_COLUMNS),
        partitioning_flavor="hive",
        existing_data_behavior="overwrite_or_ignore",
    )
    return count, time.perf_counter() - started


def spark_export(stores: list[Path], out: Path, master: str, warmup: Path) -> tuple[int, float, float]:
    """(records, export seconds, JVM start seconds) of ``export`` on ``master``.

    An export of the small ``warmup`` store first starts the Python workers and their imports.
    """
    from rmqcli.pipeline.export import export
    from rmqcli.pipeline.session import spark_session

    started = time.perf_counter()
    with spark_session(master, f"bench export {master}") as session:
        up = time.perf_counter() - started
        for _ in range(2):
            export(session, [warmup], str(out), overwrite=True, progress=False)
        started = time.perf_counter()
        result = export(session, stores, str(out), overwrite=True, progress=False)
        seconds = time.perf_counter() - started
    return result.records, seconds, up


def run(size_mib: int = 1024) -> None:
    from fixtures.generate import generate
    from rmqcli.errors import UsageError
    from rmqcli.pipeline.env import require_spark

    try:
        require_spark()
    except UsageError as exc:
        print(f"\npipeline export: skipped ({exc})")
        return
    store = ROOT / "bench-data" / "pipeline-store"
    ensure_store(store, size_mib)
    files = commitlog_files(store)
    subprocess.run(["cat", *map(str, files)], stdout=subprocess.DEVNULL, check=True)  # warm the cache
    mib = sum(f.stat().st_size for f in files) / 2**20
    work = Path(tempfile.mkdtemp(prefix="rmq-bench-pipeline-"))
    load = os.getloadavg()
    try:
        warmup = generate(work / "warmup", "small").outdir
        count, single_s = single_process(store, work / "single")
        runs: list[dict[int, tuple[float, float]]] = []
        for run_no in range(RUNS):  # 1 core then 2 cores, side by side in each run
            results = {}
            for cores in (1, 2):
                out = work / f"spark{run_no}-{cores}"
                records, seconds, up = spark_export([store], out, f"local[{cores}]", warmup)
                assert records == count, (records, count)
                results[cores] = (seconds, up)
                shutil.rmtree(out, ignore_errors=True)
            runs.append(results)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"\npipeline export (Parquet): {len(files)} CommitLog files, {mib:.0f} MiB, {count:,} records")
    # the ratios need idle cores: a busy machine (load average near or above the core count) caps them
    print(
        f"  load average before / after: {load[0]:.2f} / {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    )

    def line(name: str, seconds: float) -> str:
        rate = count / seconds
        return f"  {name:<40} {seconds:8.2f} s {rate:12,.0f} rec/s   {single_s / seconds:6.2f}x single"

    print(line("single process (rows + pyarrow)", single_s))
    scalings = []
    for run_no, results in enumerate(runs, 1):
        for cores, (seconds, up) in results.items():
            print(line(f"run {run_no}: spark local[{cores}] (JVM start {up:.1f} s apart)", seconds))
        scalings.append(results[1][0] / results[2][0])
        print(f"  run {run_no}: 2 cores / 1 core: {scalings[-1]:.2f}x")
    print_verdict("2 cores / 1 core", scalings, TARGET_SCALING)


def print_verdict(what: str, scalings: list[float], target: float) -> None:
    """The ratios of every run and whether each reached ``target``."""
    met = all(s >= target for s in scalings)
    print(
        f"  {what} in each of {len(scalings)} runs: {', '.join(f'{s:.2f}x' for s in scalings)}; "
        f"target {target}x in every run: {'met' if met else 'missed'}"
    )


def run_cluster(size_mib: int = 1024, stores: int = 2) -> None:
    """Export rows/s on a Spark standalone cluster (``tests.support.spark_cluster``: a Master and
    Workers of one core each on loopback) with one Worker, then two, over the same ``stores``
    stores of ``size_mib`` each; the ratio, in each of ``RUNS`` runs."""
    from fixtures.generate import generate
    from rmqcli.errors import UsageError
    from rmqcli.pipeline.env import require_spark
    from tests.support.spark_cluster import SparkCluster

    try:
        require_spark()
    except UsageError as exc:
        print(f"\npipeline export on a standalone cluster: skipped ({exc})")
        return
    paths = [
        ROOT / "bench-data" / ("pipeline-store" if i == 0 else f"pipeline-store-{i + 1}")
        for i in range(stores)
    ]
    for path in paths:
        ensure_store(path, size_mib)
    files = [f for path in paths for f in commitlog_files(path)]
    subprocess.run(["cat", *map(str, files)], stdout=subprocess.DEVNULL, check=True)
    mib = sum(f.stat().st_size for f in files) / 2**20
    work = Path(tempfile.mkdtemp(prefix="rmq-bench-cluster-"))
    os.environ["PYSPARK_PYTHON"] = sys.executable  # the executors run this Python (and its rmqcli)
    load = os.getloadavg()
    runs: list[dict[int, tuple[int, float, float]]] = []
    try:
        warmup = generate(work / "warmup", "small").outdir
        for run_no in range(RUNS):
            cluster = SparkCluster(work / f"cluster{run_no}", workers=1, cores=1).start()
            results = {}
            try:
                for workers in (1, 2):
                    if workers == 2:
                        cluster.add_worker(1)
                    out = work / f"out{run_no}-{workers}"
                    results[workers] = spark_export(paths, out, cluster.url, warmup)
                    shutil.rmtree(out, ignore_errors=True)
            finally:
                cluster.stop()
            runs.append(results)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    counts = {records for results in runs for records, _, _ in results.values()}
    assert len(counts) == 1, counts
    count = counts.pop()
    print(
        f"\npipeline export (Parquet) on a standalone cluster (Workers of one core): {len(paths)} stores, "
        f"{len(files)} CommitLog files, {mib:.0f} MiB, {count:,} records"
    )
    print(
        f"  load average before / after: {load[0]:.2f} / {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    )
    scalings = []
    for run_no, results in enumerate(runs, 1):
        for workers, (_, seconds, up) in results.items():
            name = f"run {run_no}: {workers} worker{'s' if workers > 1 else ''} (app start {up:.1f} s apart)"
            print(f"  {name:<44} {seconds:8.2f} s {count / seconds:12,.0f} rec/s")
        scalings.append(results[1][1] / results[2][1])
        print(f"  run {run_no}: 2 workers / 1 worker: {scalings[-1]:.2f}x")
    print_verdict("2 workers / 1 worker", scalings, TARGET_CLUSTER_SCALING)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--cluster", action="store_true", help="only the standalone-cluster figures")
    args = parser.parse_args()
    if not args.cluster:
        run(args.size_mib)
    run_cluster(args.size_mib)


if __name__ == "__main__":
    main()
