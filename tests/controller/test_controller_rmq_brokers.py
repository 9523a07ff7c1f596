"""rmq brokers in controller mode (docs/controller.md §5.6-§5.7, issue 37's third test) under
``rmq controller``, a real 5.1.1 NameServer between them:

- ``allAckInSyncStateSet``: with the slave frozen (SIGSTOP) a send is stored but answered
  FLUSH_SLAVE_TIMEOUT and stays out of the consume queues (the confirm offset holds it back); once
  the master drops the silent slave from the in-sync set the messages reach the queues and sends
  succeed again; the slave, resumed, catches up and is put back into the set.
- ``enableElectUncleanMaster``: the master writes on after its slave left the set, then dies. Off,
  the stale slave is not elected and the group has no master (read-only). On, it is elected, the
  controller's log says what it lacks, and the old master rejoins as its slave, cut back to the
  point both share: its consume queues name no message its CommitLog lost (``rmq verify`` passes
  on both stores), which the real 5.1.1 does not guarantee (apache/rocketmq#10666)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.support.cli import run_rmq
from tests.support.controller import GROUP, ControllerPair, controller_pair
from tests.support.serve import wait_until

pytestmark = [pytest.mark.java, pytest.mark.java5]

TOPIC = "TopicInSync"
QUICK = {"haMaxTimeSlaveNotCatchup": "4000", "checkSyncStateSetPeriod": "1000", "slaveTimeout": "2000"}


def send_status(pair: ControllerPair, body: str) -> str:
    """``rmq sendMessage`` of one message to queue 0: the status the broker answered."""
    where = ("-t", TOPIC, "-b", GROUP, "-i", "0")
    proc = run_rmq("sendMessage", "-n", pair.namesrv, *where, "-p", body, "--json")
    assert proc.returncode in (0, 6), proc.stderr
    return json.loads(proc.stdout)["sendStatus"] if proc.returncode == 0 else proc.stderr


def queue_max(pair: ControllerPair) -> int:
    """The master's consume-queue end of ``TOPIC`` queue 0 (``topicStatus``)."""
    proc = run_rmq("topicStatus", "-n", pair.namesrv, "-t", TOPIC, "--json", check=True)
    return next(q["maxOffset"] for q in json.loads(proc.stdout) if q["queueId"] == 0 and q["maxOffset"] >= 0)


def test_all_ack_waits_for_the_in_sync_set(tmp_path: Path) -> None:
    kinds = {"controller": "rmq", "brokers": ("rmq", "rmq")}
    with controller_pair(tmp_path, unclean=False, **kinds, **QUICK) as pair:  # type: ignore[arg-type]
        master = pair.start_both()
        slave = "b2" if master == "b1" else "b1"
        master_id = 1 if master == "b1" else 2
        assert send_status(pair, "first") == "SEND_OK"
        assert in_sync_slaves(pair, master) == 1  # haStatus: the slave, in the set
        wait_until(lambda: queue_max(pair) == 1, 30, "the first message in the queue")

        os.kill(pair.jvms[slave].proc.pid, signal.SIGSTOP)
        try:
            assert send_status(pair, "held") == "FLUSH_SLAVE_TIMEOUT"
            assert queue_max(pair) == 1  # stored, not confirmed: not in the consume queue yet
            state = wait_until(lambda: (s := pair.sync_state()).in_sync == [(master_id, "true")] and s, 60,
                               "the frozen slave out of the in-sync set")  # fmt: skip
            assert wait_until(lambda: queue_max(pair) == 2, 10, "the held message released")
            assert send_status(pair, "alone") == "SEND_OK"
            assert in_sync_slaves(pair, master) == 0
        finally:
            os.kill(pair.jvms[slave].proc.pid, signal.SIGCONT)
        grown = pair.in_sync(60, "the resumed slave back in the in-sync set")
        assert int(grown.set_epoch or 0) > int(state.set_epoch or 0)
        assert send_status(pair, "both") == "SEND_OK"
        assert pair.consume(TOPIC, 4, timeout=120) == (4, 4)


def in_sync_slaves(pair: ControllerPair, name: str) -> int:
    """``haStatus`` of broker ``name``: its slaves in the in-sync set."""
    proc = run_rmq("haStatus", "-b", f"127.0.0.1:{pair.ports[name]}", "--json", check=True)
    return json.loads(proc.stdout)[0]["info"]["inSyncSlaveNums"]


def controller_log(pair: ControllerPair) -> str:
    return (pair.home / "controller-n0.out").read_text(errors="replace")


@pytest.mark.parametrize("unclean", [False, True], ids=["unclean-off", "unclean-on"])
def test_a_stale_replica_and_enable_elect_unclean_master(tmp_path: Path, unclean: bool) -> None:
    kinds = {"controller": "rmq", "brokers": ("rmq", "rmq")}
    with controller_pair(tmp_path, unclean=unclean, **kinds, **QUICK) as pair:  # type: ignore[arg-type]
        old = pair.start_both()
        stale = "b2" if old == "b1" else "b1"
        stale_id = 2 if old == "b1" else 1
        pair.send(TOPIC, 200)
        pair.kill(stale)
        wait_until(lambda: pair.sync_state().in_sync == [(3 - stale_id, "true")], 60, "the stale one out")
        pair.send(TOPIC, 100)  # acknowledged by the master alone
        pair.kill(old)
        pair.start(stale)
        if not unclean:
            time.sleep(10)  # an election had every chance to happen by now
            state = pair.sync_state()
            assert state.master != str(stale_id), state
            with pytest.raises(AssertionError):
                pair.master(timeout=5)  # no brokerId 0 in the route: read-only
            return
        assert pair.master(timeout=60) == stale
        said = "elected master outside the in-sync set"
        line = wait_until(lambda: said in (text := controller_log(pair)) and text, 30, "the unclean report")
        assert f"broker {stale_id} elected master outside the in-sync set" in line
        pair.send(TOPIC, 50)
        pair.start(old)  # back as the stale master's slave: cut back to the shared point
        pair.in_sync(120, "the old master back in the set")
        assert "cut the store at" in pair.broker_log(old)
        pair.stop(old)
        pair.stop(stale)
        for name in (old, stale):
            verify = run_rmq("verify", str(pair.store(name)), "--json")
            assert verify.returncode == 0, (name, verify.stdout[-2000:], verify.stderr)
