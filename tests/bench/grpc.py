"""gRPC endpoint throughput: the Apache RocketMQ 5.x Python client (``rocketmq-python-client`` 5.1.2
in ``.venv-rmq5``) against ``rmq serve``'s gRPC endpoint, beside the 4.x C++ client (PyPI
``rocketmq`` 0.4.4) on remoting, in one run against one ``rmq serve``, msgs/s:

- C++ client, sync sends from one thread (remoting);
- 5.x client, sync sends from one thread (gRPC SendMessage);
- 5.x SimpleConsumer, receive (batches of 32) and ack of each message, one thread (gRPC
  ReceiveMessage + AckMessage over the broker's POP).

The two 5.x rows run again against the real RocketMQ 5.1.1 proxy in local mode (its broker in the
same JVM; ``../shared/rocketmq-5.1.1-proxy``, skipped without it). Against either server a warm-up
run of a fifth of the messages comes first. Printed: rmq's rates as ratios of the proxy's, and each
server's CPU seconds per 1,000 messages (target: rmq at most 0.5x the proxy's).

The 5.x rows are printed with their ratio to the C++ client's sync sends, and each row with the
CPU time ``rmq serve`` used per message (is the server or the client the bottleneck). Figures are
printed, never asserted. Run as ``python -m tests.bench.grpc [--count N]``; ``make bench`` runs it
(not the tests). Without ``.venv-rmq5`` it prints "skipped".
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path

BODY = 1024
TOPIC_CPP = "BenchGrpcCpp"
TOPIC_5 = "BenchGrpc5"
GROUP_5 = "GBenchGrpc5"


def client5(tmp: Path, spec: dict) -> dict:
    from tests.broker.test_grpc_consume import consumer5_cmd

    proc = subprocess.run(
        consumer5_cmd(spec), capture_output=True, text=True, timeout=900, env={**os.environ, "HOME": str(tmp)}
    )
    if proc.returncode != 0:
        raise RuntimeError(f"5.x client failed: {proc.stdout[-1000:]} {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def warm_up(count: int) -> int:
    """Messages of the untimed run before the timed one, against either server."""
    return max(count // 5, 100)


def proxy_rows(tmp: Path, count: int) -> tuple[dict, float] | None:
    """The same 5.x rows against the real 5.1.1 proxy (local mode), its JVM's CPU seconds for them;
    None without Java 17 and the kits."""
    from tests.bench.broker import process_cpu
    from tests.broker.test_grpc_consume import QUEUES
    from tests.support.cli import run_rmq
    from tests.support.proxy5 import HAVE_PROXY, real_proxy

    if not HAVE_PROXY:
        return None
    with real_proxy(tmp / "proxy") as proxy:
        queues = str(QUEUES)
        run_rmq("updateTopic", "-b", proxy.broker, "-t", TOPIC_5, "-r", queues, "-w", queues, check=True)
        run_rmq("updateSubGroup", "-b", proxy.broker, "-g", GROUP_5, check=True)
        spec = {"endpoint": proxy.endpoint, "group": GROUP_5, "topic": TOPIC_5, "mode": "bench", "body": BODY}
        client5(tmp, {**spec, "count": warm_up(count)})  # the JVM's JIT warmed, as a running proxy is
        cpu = process_cpu(proxy.pid)
        result = client5(tmp, {**spec, "count": count})
        return result, process_cpu(proxy.pid) - cpu


def main(argv: list[str] | None = None) -> None:
    from tests.bench.broker import client, process_cpu
    from tests.broker.test_grpc_consume import PYTHON5, prepare
    from tests.support.serve import ServeProcess, write_conf

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=5000, help="messages per row (default 5000)")
    args = parser.parse_args(argv)
    if not PYTHON5.exists():
        print(f"\ngRPC endpoint: skipped: no {PYTHON5} (make test installs rocketmq-python-client 5.1.2)")
        return
    with tempfile.TemporaryDirectory(prefix="rmq-bench-grpc-") as name:
        tmp = Path(name)
        prepare(tmp / "store", {TOPIC_CPP: {}, TOPIC_5: {}}, {GROUP_5: {}})
        conf = write_conf(tmp / "broker.conf", mappedFileSizeCommitLog=str(1 << 30))
        with ServeProcess(tmp / "store", conf, grpc=True) as server:
            cmd = {
                "op": "sync",
                "namesrv": server.namesrv,
                "topic": TOPIC_CPP,
                "count": args.count,
                "body": BODY,
            }
            pid = server.proc.pid
            cpu = process_cpu(pid)
            cpp = args.count / client(tmp, cmd)["seconds"]
            cpp_cpu = process_cpu(pid) - cpu
            spec = {
                "endpoint": server.grpc,
                "group": GROUP_5,
                "topic": TOPIC_5,
                "mode": "bench",
                "body": BODY,
            }
            client5(tmp, {**spec, "count": warm_up(args.count)})  # as for the proxy below
            cpu = process_cpu(pid)
            result = client5(tmp, {**spec, "count": args.count})
            cpu5 = process_cpu(pid) - cpu  # both 5.x rows (and the clients' start-up)
        real = proxy_rows(tmp, args.count)
    send5 = args.count / result["send_seconds"]
    receive5 = result["received"] / result["receive_seconds"]
    print(f"gRPC endpoint, {args.count} messages of {BODY} bytes each row, msgs/s")
    per_cpp = cpp_cpu / args.count * 1e6
    print(f"  {'C++ client sync send (remoting)':48} {cpp:>10,.0f}   server CPU {per_cpp:,.0f} us/msg")
    print(f"  {'5.x client sync send (gRPC)':48} {send5:>10,.0f}   {send5 / cpp:.2f}x the C++ client's")
    print(
        f"  {'5.x SimpleConsumer receive + ack (gRPC)':48} {receive5:>10,.0f}   {receive5 / cpp:.2f}x"
        f" the C++ client's send ({result['received']} received)"
    )
    per = cpu5 / (args.count + result["received"]) * 1e6
    print(f"  {'server CPU of the two 5.x rows':48} {per:>10,.0f} us/msg (send or receive + ack)")
    if real is None:
        print("  real 5.1.1 proxy: skipped (needs Java 17, ../shared/rocketmq-5.1.1 and its proxy kit)")
        return
    proxy, proxy_cpu = real
    send_p = args.count / proxy["send_seconds"]
    receive_p = proxy["received"] / proxy["receive_seconds"]
    per_p = proxy_cpu / (args.count + proxy["received"]) * 1e6
    print("  the same 5.x client against the real 5.1.1 proxy (local mode, warmed), rmq / proxy:")
    print(f"  {'  sync send':48} {send_p:>10,.0f}   rmq {send5 / send_p:.2f}x")
    print(f"  {'  receive + ack':48} {receive_p:>10,.0f}   rmq {receive5 / receive_p:.2f}x")
    print(
        f"  {'  server CPU s per 1,000 messages':48} {per_p / 1e3:>10.3f}   rmq {per / 1e3:.3f} s, "
        f"{per / per_p:.2f}x the proxy's (target <= 0.5x)"
    )


if __name__ == "__main__":
    main()
