"""Controller mode under fire: two groups of two ``rmq serve`` brokers in controller mode
(``allAckInSyncStateSet=true``) under one ``rmq controller``, for ``--minutes`` (30 in ``make bench``).

Every ``--every`` seconds one broker is hit, the groups in turn, the actions in turn: kill -9 of the
master (started again 3 s later), SIGSTOP of the master for ``--stop`` seconds, kill -9 of the
slave, SIGSTOP of the slave. A real client streams all along: the 4.9.8 Java client's sync sends
(``FailoverProducer``, the route asked every second) and a push consumer (``StreamConsumer``).

Printed: a table of the hits (group, action, the master before and after, seconds from the hit to
the first send acknowledged by that group after it); then the totals: sends acknowledged,
acknowledged messages never consumed (lost; target 0), and offsets rolled back (target 0): a queue
whose max offset went down between two reads (``topicStatus`` every second), or a queue offset
delivered with two different messages. Figures are printed, never asserted.

Run as ``python -m tests.bench.controller_soak [--minutes N]``; ``make bench`` calls it at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.bench.dledger import java_classes
from tests.support.cli import RMQ, run_rmq
from tests.support.oracle import route_addrs
from tests.support.serve import ServeProcess, free_port, wait_until, write_conf

GROUPS = ("soak-a", "soak-b")
TOPIC = "SoakTopic"
ACTIONS = ("kill master", "stop master", "kill slave", "stop slave")
TARGET_LOST = 0
TARGET_ROLLED_BACK = 0


@dataclass
class Hit:
    at: float  # epoch seconds
    group: str
    action: str
    master_before: str
    master_after: str = "?"
    first_ack_s: float | None = None


@dataclass
class Stream:
    """The producer's acknowledgements and the consumer's deliveries, read from their output."""

    acks: list[tuple[float, str, str]] = field(default_factory=list)  # (t, key, group)
    got: dict[str, int] = field(default_factory=dict)  # key -> deliveries
    slots: dict[tuple[str, int, int], str] = field(default_factory=dict)  # (group, queue, offset) -> key
    reused_offsets: int = 0

    def read_acks(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            parts = line.split()
            if len(parts) >= 4 and parts[0] == "ACK":
                self.acks.append((int(parts[1]) / 1000, parts[2], parts[3]))

    def read_got(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            parts = line.split()
            if len(parts) == 5 and parts[0] == "GOT":
                key, slot = parts[1], (parts[2], int(parts[3]), int(parts[4]))
                self.got[key] = self.got.get(key, 0) + 1
                held = self.slots.setdefault(slot, key)
                if held != key:
                    self.reused_offsets += 1


class Broker:
    def __init__(self, tmp: Path, group: str, name: str, namesrv: str, controller: str):
        conf = write_conf(
            tmp / f"{name}.conf",
            brokerName=group, brokerClusterName="SoakCluster", brokerId="-1", brokerRole="SLAVE",
            enableControllerMode="true", controllerAddr=controller, allAckInSyncStateSet="true",
            brokerIP1="127.0.0.1", mappedFileSizeCommitLog=str(16 * 1024 * 1024),
        )  # fmt: skip
        self.name = name
        self.serve = ServeProcess(tmp / name / "store", conf, extra=["--no-namesrv", "-n", namesrv])

    @property
    def addr(self) -> str:
        return self.serve.broker

    @property
    def pid(self) -> int:
        assert self.serve.proc is not None
        return self.serve.proc.pid


def masters(namesrv: str) -> dict[str, str]:
    """group -> the address the NameServer names brokerId 0."""
    found = {group: route_addrs(namesrv, group).get(0) for group in GROUPS}
    return {group: addr for group, addr in found.items() if addr}


def watch_offsets(namesrv: str, stop: threading.Event, rolled: list[str]) -> None:
    """Every second: each queue's max offset; one that went down is rolled back."""
    seen: dict[tuple[str, int], int] = {}
    while not stop.wait(1.0):
        proc = run_rmq("topicStatus", "-n", namesrv, "-t", TOPIC, "--json")
        if proc.returncode != 0:
            continue
        for q in json.loads(proc.stdout):
            key, value = (q["brokerName"], q["queueId"]), q["maxOffset"]
            if value < seen.get(key, 0):
                rolled.append(f"{key[0]} queue {key[1]}: max offset {seen[key]} -> {value}")
            seen[key] = max(seen.get(key, 0), value)


def soak(tmp: Path, classes: Path, minutes: float, every: float, stop_s: float) -> None:
    from tests.support.java import start_program

    hub = ServeProcess(tmp / "hub" / "store", write_conf(tmp / "hub.conf", brokerName="hub"))
    hub.start()
    port = free_port()
    ctl_conf = tmp / "controller.conf"
    settings = {
        "controllerDLegerGroup": "soak", "controllerDLegerPeers": f"n0-127.0.0.1:{port}",
        "controllerDLegerSelfId": "n0", "controllerStorePath": str(tmp / "ctl"),
        "configStorePath": str(tmp / "ctl.properties"), "mappedFileSize": "16777216",
    }  # fmt: skip
    ctl_conf.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    ctl = subprocess.Popen(
        [*RMQ, "controller", "-c", str(ctl_conf)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    brokers = {
        g: [Broker(tmp, g, f"{g}-{i}", hub.namesrv, f"127.0.0.1:{port}") for i in (1, 2)] for g in GROUPS
    }
    stream, rolled, stop = Stream(), [], threading.Event()
    producer = consumer = None
    hits: list[Hit] = []
    try:
        for group in brokers.values():
            for b in group:
                b.serve.start(120)
        wait_until(lambda: len(masters(hub.namesrv)) == len(GROUPS), 120, "a master in each group")
        run_rmq(
            "updateTopic",
            "-n",
            hub.namesrv,
            "-c",
            "SoakCluster",
            "-t",
            TOPIC,
            "-r",
            "4",
            "-w",
            "4",
            check=True,
        )
        consumer = start_program(classes, tmp / "consumer", "StreamConsumer", hub.namesrv, TOPIC, "CG_SOAK")
        producer = start_program(classes, tmp / "producer", "FailoverProducer", hub.namesrv, TOPIC, "1000")
        threading.Thread(target=stream.read_got, args=(consumer,), daemon=True).start()
        threading.Thread(target=stream.read_acks, args=(producer,), daemon=True).start()
        threading.Thread(target=watch_offsets, args=(hub.namesrv, stop, rolled), daemon=True).start()
        end = time.monotonic() + minutes * 60
        i = 0
        while time.monotonic() < end:
            time.sleep(every)
            group, action = GROUPS[i % 2], ACTIONS[(i // 2) % len(ACTIONS)]
            i += 1
            route = masters(hub.namesrv)
            by_addr = {b.addr: b for b in brokers[group]}
            master = by_addr.get(route.get(group, ""))
            if master is None:
                continue  # no master right now: the last hit is still being recovered
            victim = (
                master if action.endswith("master") else next(b for b in brokers[group] if b is not master)
            )
            if action.startswith("kill"):
                victim.serve.kill()  # returns once the process is gone
                hit = Hit(time.time(), group, action, master.name)
                time.sleep(3)
                victim.serve.start(120)
            else:
                os.kill(victim.pid, signal.SIGSTOP)
                hit = Hit(time.time(), group, action, master.name)
                time.sleep(stop_s)
                os.kill(victim.pid, signal.SIGCONT)
            hits.append(hit)
            now = masters(hub.namesrv).get(group, "")
            hit.master_after = next((b.name for b in brokers[group] if b.addr == now), "none")
        acked = {key for _, key, _ in stream.acks}
        assert producer.stdin is not None
        producer.stdin.close()
        producer.wait(30)
        with contextlib.suppress(Exception):
            wait_until(lambda: acked <= set(stream.got), 120, "every acknowledged message consumed")
    finally:
        stop.set()
        for proc in (producer, consumer):
            if proc is not None and proc.poll() is None:
                proc.kill()
        for group in brokers.values():
            for b in group:
                b.serve.kill()
        ctl.kill()
        hub.kill()
    report(hits, stream, rolled, minutes)


def report(hits: list[Hit], stream: Stream, rolled: list[str], minutes: float) -> None:
    for hit in hits:
        later = [t for t, _, g in stream.acks if g == hit.group and t > hit.at]
        hit.first_ack_s = min(later) - hit.at if later else None
    print(f"{'time':>8} {'group':<8} {'action':<12} {'master':<10} {'after':<10} {'first ack (s)':>13}")
    start = hits[0].at if hits else 0.0
    for hit in hits:
        ack = f"{hit.first_ack_s:.2f}" if hit.first_ack_s is not None else "none"
        print(f"{hit.at - start:8.0f} {hit.group:<8} {hit.action:<12} {hit.master_before:<10} "
              f"{hit.master_after:<10} {ack:>13}")  # fmt: skip
    acked = {key for _, key, _ in stream.acks}
    lost = sorted(acked - set(stream.got))
    failovers = [h for h in hits if h.action.endswith("master")]
    times = [h.first_ack_s for h in failovers if h.first_ack_s is not None]
    print(f"soak: {minutes:g} min, {len(hits)} hits ({len(failovers)} on masters), {len(acked)} acknowledged")
    if times:
        median = statistics.median(times)
        print(
            f"  first send acknowledged after a hit on a master: median {median:.2f} s, max {max(times):.2f}"
        )
    some = ": " + ", ".join(lost[:10]) if lost else ""
    print(f"  acknowledged messages lost: {len(lost)} (target {TARGET_LOST}){some}")
    print(f"  offsets rolled back: {len(rolled) + stream.reused_offsets} (target {TARGET_ROLLED_BACK}): "
          f"{len(rolled)} max offsets went down, {stream.reused_offsets} queue offsets delivered twice "
          f"with different messages")  # fmt: skip
    for line in rolled[:10]:
        print(f"    {line}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--every", type=float, default=8.0, help="seconds between two hits")
    parser.add_argument("--stop", type=float, default=6.0, help="seconds a SIGSTOP lasts")
    parser.add_argument("--dir", type=Path, help="keep the stores and logs here (default: a temporary one)")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        if args.dir is None:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rmq-soak-")))
        else:
            tmp = args.dir
            tmp.mkdir(parents=True, exist_ok=True)
        classes = java_classes(tmp)
        if classes is None:
            print("controller soak: skipped (needs Java 17, javac and ../shared/rocketmq-4.9.8)")
            return
        soak(tmp, classes, args.minutes, args.every, args.stop)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
