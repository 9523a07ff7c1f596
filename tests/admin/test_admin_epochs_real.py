"""``rmq getBrokerEpoch`` against a real 5.1.1 controller-mode pair (a NameServer with the
controller inside, two brokers): the text equals the real mqadmin's for ``-b`` and ``-c``, before
and after a failover (kill -9 of the master: the new master's epoch is one more, starting where
the old master's CommitLog ended); and ``rmq dashboard``'s cluster page shows each member's
current epoch as ``--json`` gives it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from tests.support.cli import run_rmq
from tests.support.controller import CLUSTER, GROUP, ControllerPair, controller_pair

pytestmark = pytest.mark.java5


def epochs_json(pair: ControllerPair) -> list[dict]:
    proc = run_rmq("getBrokerEpoch", "-n", pair.namesrv, "-b", GROUP, "--json", check=True)
    return json.loads(proc.stdout)


def until(check, timeout: float, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not (got := check()):
        assert time.monotonic() < deadline, what
        time.sleep(1)
    return got


def same_as_mqadmin(pair: ControllerPair) -> str:
    """rmq's text for -b and for -c, equal to the real mqadmin's (which prints nothing on failure)."""
    for args in (("-b", GROUP), ("-c", CLUSTER)):
        real = pair.mqadmin("getBrokerEpoch", *args)
        ours = run_rmq("getBrokerEpoch", "-n", pair.namesrv, *args, check=True).stdout
        assert real and ours == real, (args, ours, real)
    return real


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerPair]:
    with controller_pair(tmp_path_factory.mktemp("epochs")) as started:
        started.start("b1")
        started.start("b2")
        started.master()
        yield started


def test_the_epochs_are_the_real_mqadmins_before_and_after_a_failover(pair: ControllerPair) -> None:
    # both registered in the name server, each answering with its epochs
    until(lambda: len(epochs_json(pair)) == 2 and all(r["cache"]["epochList"] for r in epochs_json(pair)),
          120, "both brokers' epochs")  # fmt: skip
    pair.send("TopicE", 20)
    before = same_as_mqadmin(pair)
    assert before.count("#Epoch: EpochEntry{epoch=1, startOffset=0, endOffset=") == 2
    old = pair.master()
    end = max(r["cache"]["maxOffset"] for r in epochs_json(pair))
    pair.kill(old)
    new = pair.master(not_=old, timeout=120)
    assert new != old

    # the old master is gone from the name server: only the new one answers, at epoch 2
    def second_epoch() -> list[dict] | None:
        rows = epochs_json(pair)
        return rows if len(rows) == 1 and len(rows[0]["cache"]["epochList"]) == 2 else None

    rows = until(second_epoch, 120, "the new master's second epoch")
    second = rows[0]["cache"]["epochList"][1]
    assert second["epoch"] == 2 and second["startOffset"] == end
    after = same_as_mqadmin(pair)
    assert f"EpochEntry{{epoch=2, startOffset={end}, endOffset=" in after


@pytest.mark.browser
def test_the_dashboard_shows_each_members_epoch(pair: ControllerPair) -> None:
    from tests.support.dashboard import browser, dashboard

    rows = epochs_json(pair)
    with dashboard("-n", pair.namesrv) as dash, browser() as b:
        b.open(dash, "/cluster", shot="cluster-controller-mode")
        assert b.console_errors() == []
        for r in rows:
            last = r["cache"]["epochList"][-1]
            assert b.cell(f"{GROUP}/{r['addr']}/epoch") == str(last["epoch"])
            assert b.cell(f"{GROUP}/{r['addr']}/epochStart") == str(last["startOffset"])
