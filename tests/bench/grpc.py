"""gRPC endpoint throughput: the Apache RocketMQ 5.x Python client (``rocketmq-python-client`` 5.1.2
in ``.venv-rmq5``) against ``rmq serve``'s gRPC endpoint, beside the 4.x C++ client (PyPI
``rocketmq`` 0.4.4) on remoting, in one run against one ``rmq serve``, msgs/s:

- C++ client, sync sends from one thread (remoting);
- 5.x client, sync sends from one thread (gRPC SendMessage);
- 5.x SimpleConsumer, receive (batches of 32) and ack of each message, one thread (gRPC
  ReceiveMessage + AckMessage over the broker's POP).

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
            spec = {"endpoint": server.grpc, "group": GROUP_5, "topic": TOPIC_5, "mode": "bench",
                    "count": args.count, "body": BODY}  # fmt: skip
            cpu = process_cpu(pid)
            result = client5(tmp, spec)
            cpu5 = process_cpu(pid) - cpu  # both 5.x rows (and the clients' start-up)
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


if __name__ == "__main__":
    main()
