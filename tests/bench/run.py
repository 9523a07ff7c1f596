"""`make bench`: throughput of the store scans, as ratios to `cat` over the same files.

Generates (once) a store of at least 512 MiB of 1 KiB messages under ``bench-data/`` with the
fixture generator, then measures, in one run:

- baseline: ``cat`` of every CommitLog file to /dev/null (warm page cache);
- ``rmq dump-commitlog STORE --body none --output jsonl > /dev/null``;
- ``verify`` with CRC checks and ``rebuild`` of consume queues and index (in process);
- the header-only scan behind ``rmq stats`` (in process: the consume queues' record positions,
  then every record's header checked and gathered), and ``rmq stats --json`` end to end.

Figures are printed, never asserted: timing belongs here, not in the tests.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TARGET_HEADER_SCAN = 1_500_000  # records/s on one core
TARGET_VERIFY_MIB = 500  # MB/s with CRC on 1 KiB messages
TARGET_REBUILD = 1_000_000  # records/s
TARGET_ADMIN_S = 0.3  # wall time of topicList / topicRoute / clusterList


def ensure_store(path: Path, size_mib: int) -> None:
    marker = path / f".bench-{size_mib}"
    if marker.exists():
        return
    if path.exists():
        subprocess.run(["rm", "-rf", str(path)], check=True)
    print(f"generating a {size_mib} MiB store in {path} ...", flush=True)
    started = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "fixtures.generate",
            str(path),
            "--preset",
            "bench",
            "--size-mib",
            str(size_mib),
        ],
        check=True,
        cwd=ROOT,
    )
    print(f"  generated in {time.perf_counter() - started:.1f} s", flush=True)
    marker.touch()


def commitlog_files(store: Path) -> list[Path]:
    return sorted((store / "commitlog").iterdir())


def timed(cmd: list[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        with open(os.devnull, "wb") as sink:
            subprocess.run(cmd, stdout=sink, check=True, cwd=ROOT)
        best = min(best, time.perf_counter() - started)
    return best


def header_scan(store: Path) -> tuple[int, float]:
    """One cold scan (fresh maps of the files) with the scan's modules already imported."""
    from rmqcli.store import Store
    from rmqcli.store.scan import headerscan  # noqa: F401  (imported outside the timing)

    s = Store.open(store)
    started = time.perf_counter()
    count = sum(len(batch) for batch in s.commitlog.header_batches(hints=s.record_offsets()))
    elapsed = time.perf_counter() - started
    s.close()
    return count, elapsed


def verify_run(store: Path, repeat: int = 3) -> float:
    """``verify_store`` with CRC checks, in process (the work behind ``rmq verify``): the best of
    ``repeat`` runs, each on a freshly opened store."""
    from rmqcli.ops.verify import verify_store
    from rmqcli.store import Store

    best = float("inf")
    for _ in range(repeat):
        s = Store.open(store)
        started = time.perf_counter()
        verify_store(s, crc=True)
        best = min(best, time.perf_counter() - started)
        s.close()
    return best


def rebuild_run(store: Path, repeat: int = 3) -> float:
    """``stage_rebuild`` of consume queues and index (the work behind ``rmq rebuild``), discarded:
    the best of ``repeat`` runs, each on a freshly opened store."""
    from rmqcli.ops.rebuild import discard, stage_rebuild
    from rmqcli.store import Store

    best = float("inf")
    for _ in range(repeat):
        s = Store.open(store)
        started = time.perf_counter()
        result = stage_rebuild(s)
        best = min(best, time.perf_counter() - started)
        discard(result)
        s.close()
    return best


def admin_latency(rounds: int = 11) -> dict[str, float]:
    """Median wall time of admin commands as real processes against ``rmq serve`` on loopback.

    Run after ``compile_sources``: an installed copy starts from byte code.

    The baseline is the interpreter alone (``python -c pass``) measured the same way.
    """
    import statistics
    import tempfile

    from fixtures.generate import generate
    from tests.support.serve import ServeProcess

    def median(argv: list[str]) -> float:
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
            times.append(time.perf_counter() - started)
        return statistics.median(times)

    medians = {"python -c pass (baseline)": median([str(BIN / "python"), "-c", "pass"])}
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp) / "store", "small")
        server = ServeProcess(Path(tmp) / "store").start()
        try:
            create = ["updateTopic", "-n", server.namesrv, "-c", "DefaultCluster", "-t", "BenchTopic"]
            subprocess.run([str(BIN / "rmq"), *create], check=True, stdout=subprocess.DEVNULL)
            for name, args in (
                ("rmq topicList", ["topicList"]),
                ("rmq topicRoute -t BenchTopic", ["topicRoute", "-t", "BenchTopic"]),
                ("rmq clusterList", ["clusterList"]),
            ):
                medians[name] = median([str(BIN / "rmq"), *args, "-n", server.namesrv])
        finally:
            server.stop()
    return medians


def data_bytes(store: Path) -> int:
    from rmqcli.store import Store

    s = Store.open(store)
    try:
        return s.commitlog.max_offset() - s.commitlog.min_offset
    finally:
        s.close()


def compile_sources() -> None:
    """Byte-compile the project's modules, as an installed copy has them: every command measured
    starts like a user's does, also where PYTHONDONTWRITEBYTECODE keeps the interpreter from
    writing ``.pyc`` files itself."""
    import compileall

    for package in ("rmqcli", "formats"):
        compileall.compile_dir(ROOT / package, quiet=1)


def main() -> None:
    compile_sources()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    store = ROOT / "bench-data" / "store"
    ensure_store(store, args.size_mib)
    files = commitlog_files(store)
    mib = data_bytes(store) / 2**20  # records only, not the unused tail of the last file

    cat_s = timed(["cat", *map(str, files)], args.repeat + 1)  # first run warms the cache
    runs = [header_scan(store) for _ in range(args.repeat + 1)]
    count = runs[0][0]
    scan_s = min(seconds for _, seconds in runs)
    verify_s = verify_run(store)
    rebuild_s = rebuild_run(store)
    dump_s = timed([str(BIN / "rmq"), "dump-commitlog", str(store), "--body", "none", "--output", "jsonl"], 1)
    stats_s = timed([str(BIN / "rmq"), "stats", str(store), "--json"], 1)

    def line(name: str, seconds: float) -> str:
        return (
            f"{name:<44} {seconds:8.2f} s {count / seconds:12,.0f} rec/s {mib / seconds:9.1f} MiB/s"
            f"   {cat_s / seconds:6.3f}x cat"
        )

    print(f"\nstore: {len(files)} CommitLog files, {mib:.0f} MiB of records, {count:,} records\n")
    print(line("cat > /dev/null (baseline)", cat_s))
    print(line("header-only scan (stats, in process)", scan_s))
    print(line("rmq stats --json", stats_s))
    print(line("rmq dump-commitlog --body none --output jsonl", dump_s))
    print(line("verify with CRC (in process)", verify_s))
    print(line("rebuild consume queues + index (in process)", rebuild_s))
    print(
        f"verify with CRC: {mib / verify_s:,.0f} MiB/s; target {TARGET_VERIFY_MIB} "
        f"({mib / verify_s / TARGET_VERIFY_MIB:.2f}x of target)"
    )
    print(
        f"rebuild: {count / rebuild_s:,.0f} records/s; target {TARGET_REBUILD:,} "
        f"({count / rebuild_s / TARGET_REBUILD:.2f}x of target)"
    )
    print("\nadmin commands against rmq serve on loopback (median of 11 runs, including interpreter start):")
    for name, seconds in admin_latency().items():
        target = "" if "baseline" in name else f"   target < {TARGET_ADMIN_S} s"
        print(f"  {name:<34} {seconds:6.3f} s{target}")
    rate = count / scan_s
    print(
        f"\nheader-only scan: {rate:,.0f} records/s on one core; target {TARGET_HEADER_SCAN:,} "
        f"({rate / TARGET_HEADER_SCAN:.2f}x of target)"
    )
    from tests.bench import pipeline as pipeline_bench

    pipeline_bench.run()
    pipeline_bench.run_cluster()
    from tests.bench import broker as broker_bench

    broker_bench.main([])
    from tests.bench import grpc as grpc_bench

    grpc_bench.main([])
    from tests.bench import ha as ha_bench

    ha_bench.main([])
    from tests.bench import dledger as dledger_bench

    dledger_bench.main([])
    from tests.bench import lag as lag_bench

    lag_bench.main()
    from tests.bench import drain as drain_bench

    drain_bench.main([])
    from tests.bench import recovery as recovery_bench

    recovery_bench.main([])
    from tests.bench import memory as memory_bench

    memory_bench.main([])
    from tests.bench import controller_soak  # last: 30 minutes of failovers

    controller_soak.main([])


if __name__ == "__main__":
    main()
