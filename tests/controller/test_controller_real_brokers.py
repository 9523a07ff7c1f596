"""``rmq controller`` with two real 5.1.1 brokers in controller mode, and the same scenario under
the real 5.1.1 controller (inside its NameServer) as the reference (controller.md §9, issue 37's
first test): the brokers get ids 1 and 2 and one is elected; 3,000 sends; kill -9 of the master;
the other broker is brokerId 0 in the route within 2 s; every acknowledged message is consumed
from it; the old master comes back as a slave, the controller puts it back into the in-sync set,
and it holds the new master's CommitLog byte for byte. ``mqadmin getSyncStateSet`` (the real one)
reads both controllers the same way at each step."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support.cli import run_rmq
from tests.support.controller import GROUP, ControllerPair, controller_pair
from tests.support.serve import wait_until

pytestmark = [pytest.mark.java, pytest.mark.java5]

TOPIC = "TopicFailover"
SENDS = 3000
FAILOVER_S = 2.0


def epochs(pair: ControllerPair) -> dict[str, dict]:
    """Each broker in the route: its address -> ``getBrokerEpoch``'s cache (epochs, max offset)."""
    proc = run_rmq("getBrokerEpoch", "-n", pair.namesrv, "-b", GROUP, "--json", check=True)
    return {row["addr"]: row["cache"] for row in json.loads(proc.stdout)}


def commitlog(store: Path, size: int) -> bytes:
    """The first ``size`` bytes of a store's CommitLog."""
    data = b"".join(p.read_bytes() for p in sorted((store / "commitlog").iterdir()))
    return data[:size]


KINDS = [  # the controller, then brokers b1 and b2
    ("real", ("real", "real")),
    ("rmq", ("real", "real")),
    ("rmq", ("rmq", "rmq")),
    ("real", ("rmq", "rmq")),
    ("rmq", ("rmq", "real")),
]


@pytest.mark.parametrize(
    ("controller", "brokers"), KINDS, ids=[f"{c}-controller-{b1}-{b2}" for c, (b1, b2) in KINDS]
)
def test_a_failover_under_the_controller(tmp_path: Path, controller: str, brokers: tuple[str, str]) -> None:
    with controller_pair(tmp_path, unclean=False, controller=controller, brokers=brokers) as pair:
        old = pair.start_both()
        first_id = 1 if old == "b1" else 2
        state = pair.sync_state()
        assert (state.master, state.master_epoch) == (str(first_id), "1"), state
        pair.send(TOPIC, SENDS)
        pair.topic_copied("b2" if old == "b1" else "b1", TOPIC)
        before = epochs(pair)
        end = max(cache["maxOffset"] for cache in before.values())

        killed = time.monotonic()
        pair.kill(old)
        new = pair.master(not_=old, timeout=30)
        took = time.monotonic() - killed
        assert took <= FAILOVER_S, f"{new} became master {took:.2f} s after the kill"
        print(f"controller {controller}, brokers {brokers}: {new} master {took:.2f} s after {old} died")
        state = pair.sync_state()
        assert state.master == str(3 - first_id) and state.master_epoch == "2", state
        assert state.in_sync == [(3 - first_id, "true")] and state.not_in_sync == [(first_id, "false")]
        assert pair.consume(TOPIC, SENDS, timeout=120) == (SENDS, SENDS)
        alone = wait_until(lambda: len(e := epochs(pair)) == 1 and e, 60, "the new master alone")
        (new_epochs,) = alone.values()
        assert [(e["epoch"], e["startOffset"]) for e in new_epochs["epochList"]] == [(1, 0), (2, end)]

        pair.start(old)
        state = pair.in_sync(120, "the old master back in sync")
        assert state.master == str(3 - first_id) and state.master_epoch == "2", state

        def same_ends() -> int | None:
            ends = {c["maxOffset"] for c in epochs(pair).values()}
            return ends.pop() if len(ends) == 1 and len(epochs(pair)) == 2 else None

        size = wait_until(same_ends, 60, "the old master at the new master's end")
        assert size >= end
        assert commitlog(pair.store(old), size) == commitlog(pair.store(new), size)
