"""Three controllers in one DLedger group (controller.md §3.3-§3.6, issue 37's second test): three
``rmq controller`` processes, then two real 5.1.1 controllers (inside their NameServers) with one
``rmq controller``, each with two real 5.1.1 brokers in controller mode; and the latter with two
``rmq serve`` brokers (a killed real controller takes its NameServer with it, so two are real).
The master broker and the controller leader are killed together (kill -9): the controllers elect
a new leader, which elects the other broker; the route shows it as master, the in-sync state still
names both registered brokers with the epochs of every event so far (none lost with the old
leader), and every acknowledged message is consumed from the new master."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import run_rmq
from tests.support.controller import ControllerPair, controller_pair
from tests.support.serve import wait_until

pytestmark = [pytest.mark.java, pytest.mark.java5]

TOPIC = "TopicQuorum"
SENDS = 1000


def controller_leader(pair: ControllerPair) -> str | None:
    """The leader's selfId as a live controller says it (None while none knows one)."""
    for addr in pair.controllers.values():
        proc = run_rmq("getControllerMetaData", "-a", addr, "--json")
        if proc.returncode == 0:
            leader = json.loads(proc.stdout).get("controllerLeaderId")
            if leader in pair.controllers:
                return leader
    return None


CASES = [  # the controllers, then brokers b1 and b2
    (("rmq", "rmq", "rmq"), ("real", "real")),
    (("real", "real", "rmq"), ("real", "real")),
    (("real", "real", "rmq"), ("rmq", "rmq")),
]


@pytest.mark.parametrize(("kinds", "brokers"), CASES, ids=["rmq", "mixed", "mixed-rmq-brokers"])
def test_the_controller_leader_killed_with_the_master(
    tmp_path: Path, kinds: tuple[str, ...], brokers: tuple[str, str]
) -> None:
    with controller_pair(tmp_path, unclean=False, controller=kinds, brokers=brokers) as pair:
        leader = wait_until(lambda: controller_leader(pair), 120, "a controller leader")
        old = pair.start_both()
        old_id = 1 if old == "b1" else 2
        state = pair.in_sync(120, "both in sync at the start")  # again when a loaded JVM printed nothing
        assert (state.master, state.master_epoch, state.set_epoch) == (str(old_id), "1", "2"), state
        pair.send(TOPIC, SENDS)
        pair.topic_copied("b2" if old == "b1" else "b1", TOPIC)

        pair.kill(old)
        pair.kill_controller(leader)
        new = pair.master(not_=old, timeout=120)
        assert new != old
        second = wait_until(lambda: controller_leader(pair), 60, "a new controller leader")
        assert second != leader
        state = wait_until(lambda: (s := pair.sync_state()).master == str(3 - old_id) and s, 60,
                           "the new master recorded")  # fmt: skip
        # apply-id x2, the first election, the set grown, then the election without the old master
        assert (state.master_epoch, state.set_epoch) == ("2", "3"), state
        assert (state.in_sync, state.not_in_sync) == ([(3 - old_id, "true")], [(old_id, "false")]), state
        assert pair.consume(TOPIC, SENDS, timeout=120) == (SENDS, SENDS)
        print(f"kinds {kinds}: controller leader {leader} killed, {second} leads; broker {old} -> {new}")
