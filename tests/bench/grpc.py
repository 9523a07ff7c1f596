"""gRPC endpoint throughput: the Apache RocketMQ 5.x Python client (``rocketmq-python-client`` 5.1.2
in ``.venv-rmq5``) against ``rmq serve``'s gRPC endpoint, beside the 4.x C++ client (PyPI
``rocketmq`` 0.4.4) on remoting, in one run against one ``rmq serve``, msgs/s:

- C++ client, sync sends from one thread (remoting);
- 5.x client, sync sends from one thread (gRPC SendMessage);
- 5.x SimpleConsumer, receive (batches of 32) and ack of each message, one thread (gRPC
  ReceiveMessage + AckMessage over the broker's POP).

The two 5.x rows run against the real RocketMQ 5.1.1 proxy in local mode too (its broker in the
same JVM; ``../shared/rocketmq-5.1.1-proxy``, skipped without it), both servers up at once: after
a warm-up run of as many messages against each, ``--runs`` runs (default 3) take turns, rmq
then the proxy, and the medians are printed. Each 5.x row's server CPU is read from the server's
process before and after that row alone (``grpc_client5.py`` stops between its rows): the clients'
start-up and shut-down are in neither row, for either server. The proxy's NameServer is a JVM of
its own and not counted; rmq's is in ``rmq serve`` and idle during the rows. Printed: rmq's rates
as ratios of the proxy's, and each row's server CPU seconds per 1,000 messages (target: rmq at most
0.5x the proxy's).

The 5.x rows are printed with their ratio to the C++ client's sync sends, and each row with the
CPU time ``rmq serve`` used per message (is the server or the client the bottleneck). Figures are
printed, never asserted. Run as ``python -m tests.bench.grpc [--count N] [--runs N]``; ``make
bench`` runs it (not the tests). Without ``.venv-rmq5`` it prints "skipped".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BODY = 1024
TOPIC_CPP = "BenchGrpcCpp"
TOPIC_5 = "BenchGrpc5"
GROUP_5 = "GBenchGrpc5"
CLIENT5 = Path(__file__).with_name("grpc_client5.py")


def client5(tmp: Path, spec: dict, pid: int | None = None) -> dict:
    """One run of ``grpc_client5.py`` with ``spec``: its result with each row's CPU seconds of the
    server's process ``pid`` (``send_cpu``, ``receive_cpu``; NaN without a pid)."""
    from tests.bench.broker import process_cpu
    from tests.broker.test_grpc_consume import PYTHON5

    cmd = [str(PYTHON5), "-P", str(CLIENT5), json.dumps(spec)]  # -P: not its folder (grpc.py) first
    env = {**os.environ, "HOME": str(tmp)}
    with subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        cpu: dict[str, float] = {}
        last = ""
        for line in proc.stdout:
            last = line if line.strip() else last
            gate = json.loads(line).get("gate") if line.startswith('{"gate"') else None
            if gate is not None:
                cpu[gate] = process_cpu(pid)
                proc.stdin.write("\n")
                proc.stdin.flush()
        proc.stdin.close()
        errors = proc.stderr.read() if proc.stderr is not None else ""
        if proc.wait(900) != 0 or len(cpu) != 3:
            raise RuntimeError(f"5.x client failed: {last[-1000:]} {errors[-2000:]}")
    result = json.loads(last)
    result["send_cpu"] = cpu["receive"] - cpu["send"]
    result["receive_cpu"] = cpu["end"] - cpu["receive"]
    return result


def warm_up(count: int) -> int:
    """Messages of the untimed run before the timed ones, against either server: as many as a
    timed run. With a fifth, the send row's ratio of the first timed run (0.31-0.37) stood apart
    from the next two's (0.61-0.89): the proxy's JVM was still warming up then."""
    return max(count, 100)


def figures(result: dict, count: int) -> dict:
    """Rates (msgs/s) and server CPU (s per 1,000 messages) of one run's rows."""
    received = result["received"]
    return {
        "send": count / result["send_seconds"],
        "receive": received / result["receive_seconds"],
        "send_cpu": result["send_cpu"] / count * 1e3,
        "receive_cpu": result["receive_cpu"] / max(received, 1) * 1e3,
        "both_cpu": (result["send_cpu"] + result["receive_cpu"]) / (count + received) * 1e3,
        "received": received,
    }


def median_of(runs: list[dict]) -> dict:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


@contextmanager
def proxy_server(tmp: Path) -> Iterator[dict | None]:
    """The real 5.1.1 proxy (local mode) with the bench's topic and group: the spec of its rows and
    its JVM's pid; None without Java 17 and the kits."""
    from tests.broker.test_grpc_consume import QUEUES
    from tests.support.cli import run_rmq
    from tests.support.proxy5 import HAVE_PROXY, real_proxy
    from tests.support.serve import wait_until

    if not HAVE_PROXY:
        yield None
        return
    with real_proxy(tmp / "proxy") as proxy:
        queues = str(QUEUES)
        run_rmq("updateTopic", "-b", proxy.broker, "-t", TOPIC_5, "-r", queues, "-w", queues, check=True)
        run_rmq("updateSubGroup", "-b", proxy.broker, "-g", GROUP_5, check=True)
        # the proxy answers a route from the name server, where the broker registers a moment later
        route = ("topicRoute", "-n", proxy.namesrv, "-t", TOPIC_5)
        wait_until(lambda: run_rmq(*route).returncode == 0, 60, "the bench topic's route")
        yield {"endpoint": proxy.endpoint, "group": GROUP_5, "topic": TOPIC_5, "body": BODY, "pid": proxy.pid}


def main(argv: list[str] | None = None) -> None:
    from tests.bench.broker import client, process_cpu
    from tests.broker.test_grpc_consume import PYTHON5, prepare
    from tests.support.serve import ServeProcess, write_conf

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=5000, help="messages per row (default 5000)")
    parser.add_argument("--runs", type=int, default=3, help="timed runs against each server (default 3)")
    args = parser.parse_args(argv)
    if not PYTHON5.exists():
        print(f"\ngRPC endpoint: skipped: no {PYTHON5} (make test installs rocketmq-python-client 5.1.2)")
        return
    count, runs = args.count, max(args.runs, 1)
    ours: list[dict] = []
    theirs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="rmq-bench-grpc-") as name:
        tmp = Path(name)
        prepare(tmp / "store", {TOPIC_CPP: {}, TOPIC_5: {}}, {GROUP_5: {}})
        conf = write_conf(tmp / "broker.conf", mappedFileSizeCommitLog=str(1 << 30))
        with ServeProcess(tmp / "store", conf, grpc=True) as server, proxy_server(tmp) as proxy:
            cmd = {"op": "sync", "namesrv": server.namesrv, "topic": TOPIC_CPP, "count": count, "body": BODY}
            pid = server.proc.pid
            cpu = process_cpu(pid)
            cpp = count / client(tmp, cmd)["seconds"]
            cpp_cpu = process_cpu(pid) - cpu
            spec = {"endpoint": server.grpc, "group": GROUP_5, "topic": TOPIC_5, "body": BODY}
            client5(tmp, {**spec, "count": warm_up(count)})  # as for the proxy: a warmed server
            if proxy is not None:
                proxy_pid = proxy.pop("pid")
                # the JVM's JIT warmed, as a running proxy is
                client5(tmp, {**proxy, "count": warm_up(count)})
            for _ in range(runs):  # in turns: a change of the machine's load falls on both
                ours.append(figures(client5(tmp, {**spec, "count": count}, pid), count))
                if proxy is not None:
                    theirs.append(figures(client5(tmp, {**proxy, "count": count}, proxy_pid), count))
    report(count, runs, cpp, cpp_cpu, ours, theirs)


def report(count: int, runs: int, cpp: float, cpp_cpu: float, ours: list[dict], theirs: list[dict]) -> None:
    rmq = median_of(ours)
    print(f"gRPC endpoint, {count} messages of {BODY} bytes each row, msgs/s (medians of {runs} runs)")
    per_cpp = cpp_cpu / count * 1e6
    send, receive = rmq["send"], rmq["receive"]
    print(f"  {'C++ client sync send (remoting)':48} {cpp:>10,.0f}   server CPU {per_cpp:,.0f} us/msg")
    print(f"  {'5.x client sync send (gRPC)':48} {send:>10,.0f}   {send / cpp:.2f}x the C++ client's")
    print(
        f"  {'5.x SimpleConsumer receive + ack (gRPC)':48} {receive:>10,.0f}   {receive / cpp:.2f}x"
        f" the C++ client's send ({rmq['received']:.0f} received)"
    )
    both, send_us, receive_us = (rmq[key] * 1e3 for key in ("both_cpu", "send_cpu", "receive_cpu"))
    print(
        f"  {'server CPU of the two 5.x rows':48} {both:>10,.0f} us/msg (send or receive + ack;"
        f" send {send_us:,.0f}, receive + ack {receive_us:,.0f})"
    )
    if not theirs:
        print("  real 5.1.1 proxy: skipped (needs Java 17, ../shared/rocketmq-5.1.1 and its proxy kit)")
        return
    proxy = median_of(theirs)
    print("  the same 5.x client against the real 5.1.1 proxy (local mode, warmed), rmq / proxy:")
    print(f"  {'  sync send':48} {proxy['send']:>10,.0f}   rmq {rmq['send'] / proxy['send']:.2f}x")
    print(
        f"  {'  receive + ack':48} {proxy['receive']:>10,.0f}   rmq {rmq['receive'] / proxy['receive']:.2f}x"
    )
    print("  server CPU s per 1,000 messages, proxy / rmq (target: rmq <= 0.5x the proxy's):")
    for key, what in (("send_cpu", "sync send"), ("receive_cpu", "receive + ack"), ("both_cpu", "both rows")):
        ratios = ", ".join(f"{a[key] / b[key]:.2f}" for a, b in zip(ours, theirs, strict=True))
        print(
            f"  {'  ' + what:48} {proxy[key]:>10.3f}   rmq {rmq[key]:.3f} s, "
            f"{rmq[key] / proxy[key]:.2f}x the proxy's (runs: {ratios})"
        )


if __name__ == "__main__":
    main()
