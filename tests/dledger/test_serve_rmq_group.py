"""Three ``rmq serve`` brokers in one DLedger group (n0 runs the NameServer): a leader is in the
route within seconds of the last start, the C++ client's 5,000 sync sends are all acknowledged
through it; ``rmq dledgerStatus`` shows every entry committed on every member, and ``rmq
leadershipTransfer`` hands the leadership to a follower; once the three are stopped their logs
hold the same entries (``rmq diff-stores``: equal wherever both hold data, and every store as long
as the leader's)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from rmqcli.ops.diff_stores import IDENTICAL
from tests.support.broker_drivers import run_driver
from tests.support.dledger import GROUP, SELF_IDS, agreed, dledger_status
from tests.support.oracle import route_addrs
from tests.support.serve import ServeProcess, free_port, wait_until, write_conf

pytestmark = pytest.mark.cpp

TOPIC = "TopicRmqGroup"
SENDS = 5000


def test_three_rmq_serves_elect_replicate_and_hold_the_same_entries(rmq, tmp_path: Path) -> None:
    peers = ";".join(f"{n}-127.0.0.1:{free_port()}" for n in SELF_IDS)
    members: list[ServeProcess] = []
    try:
        for n in SELF_IDS:
            conf = write_conf(
                tmp_path / f"{n}.conf", brokerName=GROUP, enableDLegerCommitLog="true", dLegerGroup=GROUP,
                dLegerPeers=peers, dLegerSelfId=n, mappedFileSizeCommitLog=str(1 << 20),
            )  # fmt: skip
            (tmp_path / n).mkdir()
            extra = ["--verbose"] + (["--no-namesrv", "--namesrv", members[0].namesrv] if members else [])
            members.append(ServeProcess(tmp_path / n / "store", conf, extra).start())
        started = time.monotonic()
        ns = members[0].namesrv
        wait_until(
            lambda: len(route_addrs(ns, GROUP)) == 3 and 0 in route_addrs(ns, GROUP),
            30,
            "a leader, two followers",
        )
        elected_in = time.monotonic() - started
        ids = route_addrs(ns, GROUP)
        by_addr = {m.broker: n for n, m in zip(SELF_IDS, members, strict=True)}
        leader = by_addr[ids[0]]
        assert {k for k in ids if k} == {int(n[1:]) + 1 for n in SELF_IDS if n != leader}
        made = rmq("updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", TOPIC, "-r", "4", "-w", "4")
        assert made.exit_code == 0, made.stdout + made.stderr
        keys = [f"g{i}" for i in range(SENDS)]
        cmd = {"op": "produce", "namesrv": ns, "topic": TOPIC, "keys": keys}
        events = run_driver(tmp_path, "produce", cmd, 600)
        assert [e["key"] for e in events if e.get("status") == 0] == keys

        # every member's Raft state, as rmq dledgerStatus reads it: all entries committed everywhere
        def all_committed() -> dict[str, dict] | None:
            rows = dledger_status(rmq, ns)
            done = agreed(rows) == leader and {p["committedIndex"] for p in rows.values()} == {SENDS - 1}
            return rows if done else None

        rows = wait_until(all_committed, 20, "every send committed on every member")
        assert {p["endIndex"] for p in rows.values()} == {SENDS - 1}
        assert len({p["committedPos"] for p in rows.values()}) == 1
        term = rows[leader]["term"]
        # a leadership transfer on request: the follower named leads in the next term
        to = next(n for n in SELF_IDS if n != leader)
        moved = rmq("leadershipTransfer", "-n", ns, "-b", GROUP, "-t", to, "--json")
        assert moved.exit_code == 0, moved.stdout + moved.stderr
        assert json.loads(moved.stdout)["term"] == term + 1
        wait_until(
            lambda: route_addrs(ns, GROUP).get(0) == members[SELF_IDS.index(to)].broker, 20, "the route"
        )
        assert agreed(dledger_status(rmq, ns)) == to
        again = rmq("leadershipTransfer", "-n", ns, "-b", GROUP, "-t", to, "--json")  # a no-op, not an error
        assert again.exit_code == 0 and json.loads(again.stdout)["code"] == "ALREADY_LEADER", again.stdout
        for m in members:
            assert m.stop() == 0
        stores = [m.store for m in members]
        leader_store = stores[SELF_IDS.index(leader)]
        for other in stores:
            if other == leader_store:
                continue
            diff = rmq("diff-stores", str(leader_store), str(other), "--json")
            assert diff.exit_code == 0, diff.stdout + diff.stderr
            summary = json.loads(diff.stdout)["summary"]
            assert (summary["verdict"], summary["gap"]) == (IDENTICAL, 0), summary
        print(f"leader {leader} in the route {elected_in:.1f} s after the last start")
    finally:
        for m in members:
            m.kill()
