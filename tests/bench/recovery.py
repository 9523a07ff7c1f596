"""Time to serve after a crash, beside a real Apache RocketMQ 4.9.8 broker on copies of the same store.

The store is ``bench-data/ha-store-1024`` (1 GiB of 1 KiB messages in 128 MiB CommitLog files, with
its consume queues and a 420 MB sparse index file; generated once, as ``tests.bench.ha`` does).
Each case runs on a fresh sparse copy "after a crash": ``lock`` gone, ``abort`` present, and in
the hard case the checkpoint zeroed, so that recovery checks and dispatches every file. The
CommitLog is in the page cache for every case.

Rows (issue 20, items 2 to 4):

- the real broker (NameServer and broker JVMs started together) to its first acknowledged send,
  on an empty store and on the crashed copy: the difference is its recovery (the walk with CRCs
  and the dispatch of every record);
- ``rmq serve`` on the crashed copy, process start to the first acknowledged send: target at most
  1.0x the real broker's time on the same copy; and on a copy whose checkpoint is intact;
- ``rmq recover --yes`` on the crashed copy: target at most 1.5x the real broker's difference;
- ``rmq verify`` with CRCs: MiB/s against the broker's recovery rate (the CommitLog's bytes over
  its difference): target at least 1.5x.

Each timing is the best of ``--rounds`` (2) runs, rmq and the real broker alternating. A row
that needs the real broker prints "skipped: no Java 17" without it. Run as
``python -m tests.bench.recovery``; ``make bench`` runs it. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support import ROOT
from tests.support.stores import zero_checkpoint_timestamps

SOURCE = ROOT / "bench-data" / "ha-store-1024"
FILE = 128 * 1024 * 1024
TOPIC = "TopicA"
TARGET_SERVE = 1.0  # rmq serve's first send over the real broker's, crashed copy, checkpoint zeroed
TARGET_RECOVER = 1.5  # rmq recover --yes over the real broker's recovery (boot-time difference)
TARGET_VERIFY = 1.5  # rmq verify MiB/s over the real broker's recovery rate
BIN = Path(sys.executable).parent


def ensure_source() -> None:
    from tests.bench.ha import CATCH_UP_MIB

    marker = SOURCE / ".generated"
    if marker.exists():
        return
    shutil.rmtree(SOURCE, ignore_errors=True)
    print(f"generating a {CATCH_UP_MIB} MiB store in {SOURCE} ...", flush=True)
    cmd = [sys.executable, "-m", "fixtures.generate", str(SOURCE), "--preset", "bench", "--size-mib"]
    subprocess.run([*cmd, str(CATCH_UP_MIB)], check=True, cwd=ROOT)
    marker.touch()


def crashed_copy(dest: Path, zero_checkpoint: bool) -> Path:
    """A sparse copy of the source store as a crash leaves it."""
    shutil.rmtree(dest, ignore_errors=True)
    subprocess.run(["cp", "-r", "--sparse=always", str(SOURCE), str(dest)], check=True)
    for name in ("lock", ".generated"):
        (dest / name).unlink(missing_ok=True)
    (dest / "abort").touch()
    if zero_checkpoint:
        zero_checkpoint_timestamps(dest)  # recovery checks every file
    return dest


def warm(store: Path) -> int:
    """Read the CommitLog into the page cache; returns its bytes."""
    total = 0
    for f in sorted((store / "commitlog").iterdir()):
        with open(f, "rb") as handle:
            while chunk := handle.read(8 << 20):
                total += len(chunk)
    return total


def first_send(namesrv: str, started: float, limit: float = 180.0) -> float:
    """Seconds from ``started`` to the first SEND_OK of a message to ``TOPIC`` via ``namesrv``."""
    from rmqcli.admin.message import send_message
    from rmqcli.admin.session import AdminSession
    from rmqcli.errors import RmqError

    while time.perf_counter() - started < limit:
        try:
            with AdminSession([namesrv], timeout=2.0) as session:
                if send_message(session, TOPIC, "after the crash").send_status == "SEND_OK":
                    return time.perf_counter() - started
        except (RmqError, OSError):
            pass
        time.sleep(0.02)
    raise RuntimeError(f"no acknowledged send within {limit:.0f} s")


def serve_first_send(store: Path, tmp: Path) -> float:
    """``rmq serve`` started on ``store``: seconds to its first acknowledged send."""
    from tests.support.serve import free_port, free_port_pair, write_conf

    conf = write_conf(tmp / "serve.conf", mappedFileSizeCommitLog=str(FILE), haListenPort=str(free_port()))
    ns_port, port = free_port(), free_port_pair()
    cmd = [str(BIN / "rmq"), "serve", str(store), "--namesrv-port", str(ns_port), "--port", str(port)]
    cmd += ["--grpc-port", "0", "--config", str(conf)]
    log = open(tmp / "serve.log", "w")  # noqa: SIM115 - the child's output
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        return first_send(f"127.0.0.1:{ns_port}", started)
    finally:
        proc.terminate()
        proc.wait(60)
        log.close()


def real_first_send(home: Path, store: Path | None) -> float:
    """The real broker's NameServer and broker started on ``store`` (None: an empty store):
    seconds to the first acknowledged send."""
    from tests.support.oracle import real_cluster

    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    if store is not None:
        store.rename(home / "store")
    else:  # the same topics, no messages
        shutil.copytree(SOURCE / "config", home / "store" / "config")
    started = time.perf_counter()
    with real_cluster(home, mappedFileSizeCommitLog=str(FILE)) as real:
        return first_send(real.namesrv, started)


def recover_seconds(store: Path) -> float:
    started = time.perf_counter()
    subprocess.run([str(BIN / "rmq"), "recover", str(store), "--yes"], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def verify_seconds(store: Path) -> float:
    """``rmq verify --json`` of the crashed copy (its findings are the crash's: the exit code is not
    checked, the report is)."""
    import json

    started = time.perf_counter()
    command = [str(BIN / "rmq"), "verify", str(store), "--json"]
    proc = subprocess.run(command, capture_output=True, check=False)
    seconds = time.perf_counter() - started
    report = json.loads(proc.stdout)  # a verify that failed to run has no report
    if not report["summary"]["records"]:
        raise RuntimeError(f"rmq verify read no records: {proc.stderr.decode()[-500:]}")
    return seconds


def verdict(ok: bool) -> str:
    return "met" if ok else "missed"


def main(argv: list[str] | None = None) -> None:
    from tests.support.oracle import HAVE_JAVA, KIT

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    ensure_source()
    real = HAVE_JAVA and KIT.is_dir()
    tmp = Path(tempfile.mkdtemp(prefix="rmq-bench-recovery-", dir=ROOT / "bench-data"))
    times: dict[str, list[float]] = {}

    def run(name: str, fn, *a) -> None:  # type: ignore[no-untyped-def]
        times.setdefault(name, []).append(fn(*a))

    try:
        commitlog = warm(SOURCE)
        for _ in range(args.rounds):
            if real:
                run("real empty", real_first_send, tmp / "real", None)
                store = crashed_copy(tmp / "copy", zero_checkpoint=True)
                run("real crashed", real_first_send, tmp / "real", store)
            run("serve crashed", serve_first_send, crashed_copy(tmp / "copy", zero_checkpoint=True), tmp)
            run("serve normal", serve_first_send, crashed_copy(tmp / "copy", zero_checkpoint=False), tmp)
            run("recover", recover_seconds, crashed_copy(tmp / "copy", zero_checkpoint=True))
            run("verify", verify_seconds, crashed_copy(tmp / "copy", zero_checkpoint=True))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    best = {name: min(values) for name, values in times.items()}
    mib = commitlog / 2**20

    def line(name: str, seconds: float, extra: str = "") -> None:
        runs = ", ".join(f"{v:.2f}" for v in times.get(name, []))
        print(f"  {name:<48} {seconds:7.2f} s   (runs: {runs}){extra}")

    print(f"\ntime to serve after a crash: {mib:,.0f} MiB CommitLog, checkpoint zeroed")
    labels = {
        "real empty": "real 4.9.8 broker, empty store: first send",
        "real crashed": "real 4.9.8 broker, crashed copy: first send",
        "serve crashed": "rmq serve, crashed copy: first send",
        "serve normal": "rmq serve, checkpoint intact: first send",
        "recover": "rmq recover --yes, crashed copy",
        "verify": "rmq verify --json (CRCs)",
    }
    for name in labels:
        if name in best:
            times[labels[name]] = times[name]
            line(labels[name], best[name])
    if not real:
        print("  real broker rows: skipped: no Java 17")
        return
    difference = best["real crashed"] - best["real empty"]
    rate = mib / difference if difference > 0 else float("inf")
    print(f"  real broker's recovery (crashed minus empty): {difference:.2f} s, {rate:,.0f} MiB/s")
    serve_ratio = best["serve crashed"] / best["real crashed"]
    recover_ratio = best["recover"] / difference if difference > 0 else float("inf")
    verify_ratio = (mib / best["verify"]) / rate
    print(
        f"  item 2: rmq serve first send / real broker's: {serve_ratio:.2f}x "
        f"(target <= {TARGET_SERVE}x: {verdict(serve_ratio <= TARGET_SERVE)})"
    )
    print(
        f"  item 3: rmq recover --yes / real broker's recovery: {recover_ratio:.2f}x "
        f"(target <= {TARGET_RECOVER}x: {verdict(recover_ratio <= TARGET_RECOVER)})"
    )
    print(
        f"  item 4: rmq verify {mib / best['verify']:,.0f} MiB/s / real broker's recovery {rate:,.0f} MiB/s: "
        f"{verify_ratio:.2f}x (target >= {TARGET_VERIFY}x: {verdict(verify_ratio >= TARGET_VERIFY)})"
    )


if __name__ == "__main__":
    main()
