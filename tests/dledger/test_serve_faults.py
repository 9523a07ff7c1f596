"""Faults in a DLedger group of three ``rmq serve`` members, one group through three phases, the C++
client sending through the group's NameServer (run in this process, so that no stopped member takes
the routes with it):

a. a follower SIGKILLed under sends: the leader and the other follower keep acknowledging them; the
   follower started again catches up (its committed position reaches the leader's);
b. a follower SIGSTOPped under sends for longer than the heartbeat timeout: sends are still
   acknowledged (a quorum of two); on SIGCONT it finds its leader lost but moves nobody to a new
   term, and catches up;
c. a minority leader (both followers SIGSTOPped): within DLedger's heartbeat timeouts (2 s x 3) it
   steps down; no send straight to it is acknowledged while it is alone: first each waits the 2.5 s
   of ``maxWaitAckTimeMs`` for a quorum and is answered as 4.9.8's ``DLedgerCommitLog`` answers
   WAIT_QUORUM_ACK_TIMEOUT (OS_PAGECACHE_BUSY: SYSTEM_ERROR ``[PC_SYNCHRONIZED]broker busy``), then,
   a SLAVE again (``DLedgerRoleChangeHandler``: CANDIDATE -> ``changeToSlave``), as
   ``DefaultMessageStore.checkStoreStatus`` refuses a slave's put (SERVICE_NOT_AVAILABLE, the
   ``SendMessageProcessor`` remark); on SIGCONT a leader is elected again and takes sends.

Then all three stop, and their logs are identical (``rmq diff-stores``), every one holding every
acknowledged message and none of the sends refused before an append.

In a and b no send may fail unless the logs show an election meanwhile: a member starved of CPU for
seconds on a loaded machine loses its leadership as a stopped one does. The figures of the run
(step-down, catch-up and re-election times, the answers of phase c) are printed.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from rmqcli.namesrv.server import NameServer
from rmqcli.ops.diff_stores import IDENTICAL
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.client import SyncClient
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.remoting.server.connection import Server
from tests.broker.test_ha_serve import stored_keys
from tests.dledger.test_serve_group import TOPIC, send_to
from tests.support.broker_drivers import Driver, run_driver
from tests.support.dledger import DATA_FILE_SIZE, GROUP, SELF_IDS
from tests.support.serve import ServeProcess, free_port, wait_until, write_conf

pytestmark = pytest.mark.cpp

BUSY = "[PC_SYNCHRONIZED]broker busy, start flow control for a while"  # SendMessageProcessor
NOT_AVAILABLE = "service not available now. It may be caused by one of the following reasons: "
STEPS_DOWN = "no quorum of heartbeat answers; steps down"  # rmqcli.dledger.node, the leader's line
HEARTBEAT_S = 2.0  # heartBeatTimeIntervalMs
LEAK = 3  # maxHeartBeatLeak
MAX_WAIT_ACK_S = 2.5  # maxWaitAckTimeMs


@contextmanager
def name_server() -> Iterator[tuple[str, NameServer]]:
    """A NameServer (``rmqcli.namesrv``) on an event loop in a thread of this process."""
    loop = asyncio.new_event_loop()
    ns = NameServer()
    server = Server("namesrv", ns.handle)
    server.close_callbacks.append(ns.on_close)
    port = loop.run_until_complete(server.start("127.0.0.1", free_port()))
    scan = loop.create_task(ns.scan_expired())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{port}", ns
    finally:

        async def close() -> None:
            scan.cancel()
            await server.close()

        asyncio.run_coroutine_threadsafe(close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


class Group:
    """The three members, ``rmq serve --verbose`` each, registered with ``namesrv``."""

    def __init__(self, tmp: Path, namesrv: str, ns: NameServer):
        self.tmp, self.ns = tmp, ns
        peers = ";".join(f"{n}-127.0.0.1:{free_port()}" for n in SELF_IDS)
        self.members: dict[str, ServeProcess] = {}
        for n in SELF_IDS:
            conf = write_conf(
                tmp / f"{n}.conf", brokerName=GROUP, enableDLegerCommitLog="true", dLegerGroup=GROUP,
                dLegerPeers=peers, dLegerSelfId=n, mappedFileSizeCommitLog=str(DATA_FILE_SIZE),
            )  # fmt: skip
            (tmp / n).mkdir()
            extra = ["--verbose", "--no-namesrv", "--namesrv", namesrv]
            self.members[n] = ServeProcess(tmp / n / "store", conf, extra)

    def route(self) -> dict[int, str]:
        """brokerId -> selfId of the group in the NameServer's table."""
        by_addr = {m.broker: n for n, m in self.members.items()}
        data = self.ns.brokers.get(GROUP)
        return {i: by_addr.get(a, a) for i, a in data.broker_addrs.items()} if data else {}

    def settled(self) -> str | None:
        """The leader once the route names it (brokerId 0) and both followers (selfId number + 1)."""
        ids = self.route()
        if len(ids) != 3 or 0 not in ids:
            return None
        leader = ids[0]
        followers = {int(n[1:]) + 1: n for n in SELF_IDS if n != leader}
        return leader if ids == {0: leader, **followers} else None

    def committed(self, n: str) -> int:
        return committed_end(self.members[n].broker)

    def level(self) -> int | None:
        """The committed position when all three members report the same (``None`` otherwise)."""
        ends = {self.committed(n) for n in SELF_IDS}
        return ends.pop() if len(ends) == 1 else None

    def pause(self, n: str) -> None:
        os.kill(self.pid(n), signal.SIGSTOP)

    def resume(self, n: str) -> None:
        proc = self.members[n].proc
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)

    def pid(self, n: str) -> int:
        proc = self.members[n].proc
        assert proc is not None and proc.poll() is None, f"{n} is not running"
        return proc.pid

    def log(self, n: str) -> str:
        return self.members[n].output()

    def elections(self) -> int:
        """How many times the members' logs (every start's) say one was elected."""
        logs = (p for n in SELF_IDS for p in (self.tmp / n).glob("serve-*"))
        return sum(p.read_text().count("[VOTE_RESULT] has been elected") for p in logs)


def committed_end(addr: str) -> int:
    """A member's committed position: ``commitLogMaxOffset`` of GET_BROKER_RUNTIME_INFO
    (``DLedgerCommitLog.getMaxOffset``)."""
    with SyncClient() as client:
        answer = client.invoke(addr, RemotingCommand.request(RC.GET_BROKER_RUNTIME_INFO), 5)
    return int(jb.decode(jb.KVTable, answer.body).table["commitLogMaxOffset"])


def acked(events: list[dict]) -> list[str]:
    """The keys a ``load`` or ``produce`` driver saw acknowledged."""
    return [
        e["key"] for e in events if "key" in e and (e.get("status") == 0 or "id" in e and "status" not in e)
    ]


def failed(events: list[dict]) -> list[dict]:
    return [e for e in events if "key" in e and ("error" in e or e.get("status", 0) != 0)]


@dataclass(frozen=True)
class Answer:
    """A send straight to a broker port: its key, when it went and came back (s since the fault),
    and the answer."""

    key: str
    sent: float
    answered: float
    code: int
    remark: str

    @property
    def kind(self) -> str:
        """B: SYSTEM_ERROR busy after the 2.5 s quorum wait (4.9.8: WAIT_QUORUM_ACK_TIMEOUT ->
        OS_PAGECACHE_BUSY); b: the same at once (``handleAppend`` on a member no longer leading: pos
        -1); L: the leadership lost while it waited (rmq answers UNKNOWN_ERROR at once; 4.9.8 leaves it
        unanswered until the client's timeout, its QuorumAckChecker completing futures only while
        leading); R: a slave's refusal (``checkStoreStatus``); ?: anything else."""
        if self.code == RS.SYSTEM_ERROR and self.remark == BUSY:
            return "B" if self.answered - self.sent >= MAX_WAIT_ACK_S - 0.1 else "b"
        if self.code == RS.SYSTEM_ERROR and self.remark == "UNKNOWN_ERROR":
            return "L"
        if self.code == RS.SERVICE_NOT_AVAILABLE and self.remark.startswith(NOT_AVAILABLE):
            return "R"
        return "?"


class DirectSender(threading.Thread):
    """Sends straight to one broker port, one after another, until halted (``answers``)."""

    def __init__(self, addr: str, prefix: str):
        super().__init__(daemon=True)
        self.addr, self.prefix = addr, prefix
        self.answers: list[Answer] = []
        self.halt = threading.Event()
        self.started_at = time.monotonic()

    def run(self) -> None:
        while not self.halt.is_set():
            key = f"{self.prefix}{len(self.answers)}"
            sent = time.monotonic() - self.started_at
            try:
                code, remark = send_to(self.addr, key)
            except Exception as exc:  # noqa: BLE001 - recorded, and the test fails on it
                code, remark = -1, repr(exc)
            self.answers.append(Answer(key, sent, time.monotonic() - self.started_at, code, remark))
            self.halt.wait(0.2)


SEND_TIMEOUT_S = 3.0  # the load driver's sync send timeout


@contextmanager
def loading(tmp: Path, name: str, namesrv: str) -> Iterator[Driver]:
    """C++ sync sends (``load``) of keys ``<name>-<n>`` while the block runs, 100 acknowledged first."""
    timeout_ms = round(SEND_TIMEOUT_S * 1000)
    driver = Driver(tmp, name, {"op": "load", "namesrv": namesrv, "topic": TOPIC, "prefix": f"{name}-",
                                "min": 100, "max": 600, "timeout_ms": timeout_ms})  # fmt: skip
    try:
        driver.wait_for(lambda ev: len(acked(ev)) >= 100, 60, f"{name}: 100 acks")
        yield driver
    finally:
        driver.kill()


def more_acks(driver: Driver, count: int, what: str) -> float:
    """Wait until ``count`` more sends of ``driver`` are acknowledged; how long that took."""
    at, before = time.monotonic(), len(acked(driver.events()))
    driver.wait_for(lambda ev: len(acked(ev)) >= before + count, 30, f"{count} acks {what}")
    return time.monotonic() - at


def stopped(driver: Driver, group: Group, elections: int, phase: dict) -> list[str]:
    """Stop the driver; its acknowledged keys. A send fails only around a change of leader (none is
    made here, but a member starved of CPU for seconds on a loaded machine loses its leadership
    like a stopped one): failures are allowed only when the logs show an election since
    ``elections`` (both counted in ``phase``)."""
    events = driver.stop()
    phase["elections"] = group.elections() - elections
    phase["failed_sends"] = len(failed(events))
    # a send the client gave up on after its whole timeout was not refused: the answer came late (or
    # never) on a machine starved of CPU; a refusal in time is the broker's, and needs an election
    refused = [e for e in failed(events) if e.get("took", 0) < SEND_TIMEOUT_S - 0.1]
    phase["timed_out_sends"] = phase["failed_sends"] - len(refused)
    assert not refused or phase["elections"], refused[:5]
    return acked(events)


def test_a_killed_follower_a_stopped_follower_and_a_minority_leader(rmq, tmp_path: Path) -> None:
    figures: dict[str, object] = {}
    all_acked: list[str] = []
    with name_server() as (namesrv, ns):
        group = Group(tmp_path, namesrv, ns)
        try:
            started = time.monotonic()
            for m in group.members.values():
                m.start()
            leader = wait_until(group.settled, 30, "a leader and two followers in the route")
            figures["elected_s"] = round(time.monotonic() - started, 2)
            made = rmq(
                "updateTopic", "-n", namesrv, "-c", "DefaultCluster", "-t", TOPIC, "-r", "4", "-w", "4"
            )
            assert made.exit_code == 0, made.stdout + made.stderr

            # a. a follower SIGKILLed under sends, started again under sends
            elections = group.elections()
            first = next(n for n in SELF_IDS if n != leader)
            victim = group.members[first]
            with loading(tmp_path, "a", namesrv) as driver:
                assert victim.proc is not None
                victim.proc.kill()
                victim.proc.wait(10)
                phase: dict = {"200_acks_without_it_s": round(more_acks(driver, 200, f"without {first}"), 2)}
                victim.log.rename(victim.log.with_suffix(".killed"))
                at = time.monotonic()
                victim.start()
                serving = time.monotonic()
                phase["restart_s"] = round(serving - at, 2)
                target = group.committed(leader)
                wait_until(lambda: group.committed(first) >= target, 30, f"{first} at the leader's {target}")
                phase["caught_up_after_restart_s"] = round(time.monotonic() - serving, 2)
                more_acks(driver, 50, f"with {first} back")
                all_acked += stopped(driver, group, elections, phase)
            wait_until(group.level, 15, "three equal committed positions")
            figures["a"] = phase

            # b. a follower SIGSTOPped under sends, then SIGCONT under sends; stopped for longer than a
            # follower waits for heartbeats: resumed, it finds its leader lost, but does not move the
            # group to a new term (it campaigns, if at all, in its own, where the others have a leader)
            leader = wait_until(group.settled, 30, "a leader and two followers in the route")
            elections = group.elections()
            second = next(n for n in reversed(SELF_IDS) if n != leader)
            with loading(tmp_path, "b", namesrv) as driver:
                group.pause(second)
                paused_at = time.monotonic()
                phase = {
                    "200_acks_while_stopped_s": round(more_acks(driver, 200, f"while {second} stops"), 2)
                }
                wait_until(lambda: time.monotonic() - paused_at > (LEAK + 0.5) * HEARTBEAT_S, 10, "the pause")
                more_acks(driver, 50, f"{second} stopped for {(LEAK + 0.5) * HEARTBEAT_S:g} s")
                seen = len(group.log(second))
                at = time.monotonic()
                group.resume(second)
                phase["stopped_s"] = round(at - paused_at, 2)
                target = group.committed(leader)
                wait_until(
                    lambda: group.committed(second) >= target, 30, f"{second} at the leader's {target}"
                )
                phase["caught_up_s"] = round(time.monotonic() - at, 2)
                more_acks(driver, 50, f"with {second} back")
                all_acked += stopped(driver, group, elections, phase)
            wait_until(group.level, 15, "three equal committed positions")
            figures["b"] = phase
            resumed = group.log(second)[seen:]
            assert f"DLedger {second}: no heartbeat from {leader}; candidate" in resumed, resumed[-3000:]
            assert "[INCREASE_TERM]" not in resumed, resumed[-3000:]

            # c. a minority leader: both followers SIGSTOPped
            leader = wait_until(group.settled, 30, "a leader and two followers in the route")
            first, second = (n for n in SELF_IDS if n != leader)
            before_steps = group.log(leader).count(STEPS_DOWN)
            sender = DirectSender(group.members[leader].broker, "alone-")
            for n in (first, second):
                group.pause(n)
            sender.started_at = stopped_at = time.monotonic()
            sender.start()
            wait_until(lambda: group.log(leader).count(STEPS_DOWN) > before_steps, 20, f"{leader} steps down")
            steps_down_s = time.monotonic() - stopped_at
            wait_until(lambda: 0 not in group.route(), 10, "no master in the route")
            unrouted_s = time.monotonic() - stopped_at
            # refused as by a slave, twice in a row
            wait_until(lambda: "".join(a.kind for a in sender.answers[-2:]) == "RR", 15, "a slave's refusals")
            sender.halt.set()
            sender.join(10)
            for n in (first, second):
                group.resume(n)
            healed_at = time.monotonic()
            answers = sender.answers
            kinds = "".join(a.kind for a in answers)
            # nothing acknowledged alone: quorum waits timed out, then (at most one) in flight at the
            # step-down, (appends refused by the member before its broker became a slave), then a
            # slave's refusals
            assert re.fullmatch("B+L?b*R+", kinds), (kinds, answers)
            refusal = next(a for a in answers if a.kind == "R")
            assert "messages are put to the slave" in refusal.remark
            # the last quorum of answers came up to one interval before the stop; a round waits at most
            # one interval for its answers (sendHeartbeats), the loop's own lag on top
            assert (LEAK - 1) * HEARTBEAT_S <= steps_down_s <= (LEAK + 2) * HEARTBEAT_S + 4, steps_down_s
            figures["c"] = {
                "steps_down_s": round(steps_down_s, 2),
                "out_of_route_s": round(unrouted_s, 2),
                "answers": kinds,
                "first_refused_s": round(refusal.answered, 2),
                "refusal": [refusal.code, refusal.remark],
            }

            # heal: a leader again, and it takes sends
            new_leader = wait_until(group.settled, 40, "a leader and two followers after the heal")
            figures["c"]["re_elected_s"] = round(time.monotonic() - healed_at, 2)
            figures["c"]["new_leader"] = f"{leader} -> {new_leader}"
            # the old leader's vote rounds since it stepped down (alone, then healed)
            rounds = re.findall(r"\[PARSE_VOTE_RESULT\] .* alreadyHasLeader=(\w+) .* result=(\w+)",
                                group.log(leader).rsplit(STEPS_DOWN, 1)[1])  # fmt: skip
            assert new_leader != leader or (rounds and rounds[-1][1] == "PASSED"), rounds
            figures["c"]["old_leader_vote_rounds"] = " ".join(
                r + ("(alreadyHasLeader)" if has == "true" else "") for has, r in rounds
            )
            code, remark = send_to(group.members[new_leader].broker, "healed-direct")
            assert (code, remark) == (RS.SUCCESS, ""), (code, remark)
            all_acked.append("healed-direct")
            keys = [f"healed-{i}" for i in range(200)]
            events = run_driver(tmp_path, "healed", {"op": "produce", "namesrv": namesrv, "topic": TOPIC,
                                                     "keys": keys}, 60)  # fmt: skip
            assert acked(events) == keys
            all_acked += keys
            wait_until(group.level, 15, "three equal committed positions after the heal")

            for m in group.members.values():
                assert m.stop() == 0
            stores = {n: m.store for n, m in group.members.items()}
            for n, store in stores.items():
                if n != new_leader:
                    diff = rmq("diff-stores", str(stores[new_leader]), str(store), "--json")
                    assert diff.exit_code == 0, diff.stdout + diff.stderr
                    summary = json.loads(diff.stdout)["summary"]
                    assert (summary["verdict"], summary["gap"]) == (IDENTICAL, 0), (n, summary)
            never = {a.key for a in answers if a.kind in "bR"}  # refused before any append
            for n, store in stores.items():
                keys_there = stored_keys(store)
                missing = set(all_acked) - keys_there
                assert not missing, (
                    f"{n}: {len(missing)} acknowledged messages missing: {sorted(missing)[:5]}"
                )
                assert not never & keys_there, (n, sorted(never & keys_there))
                figures.setdefault("unacknowledged_alone_but_stored", {})[n] = sorted(  # type: ignore[index]
                    a.key for a in answers if a.kind in "BL" and a.key in keys_there
                )
            figures["acked"] = len(all_acked)
            figures["total_s"] = round(time.monotonic() - started, 1)
        finally:
            print("figures:", json.dumps(figures))
            for n in SELF_IDS:
                group.resume(n)
            for m in group.members.values():
                m.kill()
