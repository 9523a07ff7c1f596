"""5.1.1's controller commands in rmq (``getControllerMetaData``, ``getSyncStateSet``,
``getControllerConfig``, ``updateControllerConfig``, ``electMaster``, ``cleanBrokerMetadata``) print
what the real 5.1.1 mqadmin prints, against the real controller and against ``rmq controller``,
each with two real 5.1.1 brokers in controller mode (controller.md §8); each has a ``--json``. An
election asked by the real mqadmin and one asked by rmq move the master as the route then shows,
with the same epochs under both controllers."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import run_rmq
from tests.support.controller import CLUSTER, GROUP, ControllerPair, controller_pair
from tests.support.oracle5 import KIT5, kit5_env

pytestmark = [pytest.mark.java, pytest.mark.java5]


def rmq(pair: ControllerPair, *args: str, check: bool = True) -> str:
    proc = run_rmq(*args, "-n", pair.namesrv, check=check)
    return proc.stdout if check else proc.stderr


def rmq_json(pair: ControllerPair, *args: str) -> object:
    return json.loads(rmq(pair, *args, "--json"))


def same(pair: ControllerPair, *args: str) -> str:
    """rmq's text for ``args`` equal to the real mqadmin's (which prints nothing on failure)."""
    for _ in range(3):  # on a loaded machine the JVM's call may time out and print nothing: asked again
        real = pair.mqadmin(*args)
        if real:
            break
    ours = rmq(pair, *args)
    assert real and ours == real, (args, ours, real)
    return ours


def mqadmin_output(pair: ControllerPair, *args: str) -> str:
    """Everything the real mqadmin writes (a failure's stack trace goes to stderr); asked again, up
    to three times, when its request timed out (a loaded machine: its 3 s timeout), not refused."""
    out = ""
    for _ in range(3):
        run = subprocess.run([str(KIT5 / "bin" / "mqadmin"), *args, "-n", pair.namesrv], capture_output=True,
                             text=True, timeout=120, env=kit5_env(pair.home))  # fmt: skip
        out = run.stdout + run.stderr
        if "RemotingTimeoutException" not in out:
            break
    return out


def epochs(text: str) -> tuple[int, int]:
    """``#MasterEpoch`` and ``#SyncStateSetEpoch`` of a getSyncStateSet or electMaster text."""
    m = re.search(r"#MasterEpoch\t(\d+)\n#SyncStateSetEpoch\t(\d+)", text)
    assert m, text
    return int(m.group(1)), int(m.group(2))


@pytest.mark.parametrize("controller", ["real", "rmq"])
def test_the_controller_commands_print_what_mqadmin_prints(tmp_path: Path, controller: str) -> None:
    with controller_pair(tmp_path, unclean=False, controller=controller) as pair:
        first = pair.start_both()
        a = pair.controller

        meta = same(pair, "getControllerMetaData", "-a", a)
        leader = f"\n#ControllerLeaderId\tn0\n#ControllerLeaderAddress\t{a}"
        assert meta == f"\n#ControllerGroup\tgroup1{leader}\n#Peer:\tn0:{a}\n"
        assert rmq_json(pair, "getControllerMetaData", "-a", a) == {
            "group": "group1", "controllerLeaderId": "n0", "controllerLeaderAddress": a, "isLeader": True,
            "peers": [f"n0:{a}"]}  # fmt: skip
        text = same(pair, "getSyncStateSet", "-a", a, "-b", GROUP)
        assert same(pair, "getSyncStateSet", "-a", a, "-c", CLUSTER) == text
        assert epochs(text) == (1, 2)
        (group,) = rmq_json(pair, "getSyncStateSet", "-a", a, "-b", GROUP)  # type: ignore[misc]
        assert group["masterEpoch"] == 1 and len(group["inSyncReplicas"]) == 2

        config = same(pair, "getControllerConfig", "-a", a)
        assert f"============{a}============\n" in config
        assert re.search(r"^enableElectUncleanMaster {26}=  false$", config, re.M), config
        (doc,) = rmq_json(pair, "getControllerConfig", "-a", a)  # type: ignore[misc]
        assert doc["properties"]["controllerDLegerSelfId"] == "n0"
        update = ("updateControllerConfig", "-a", a, "-k", "scanInactiveMasterInterval", "-v", "4000")
        assert (
            same(pair, *update)
            == f"update controller config success![{a}]\nscanInactiveMasterInterval : 4000\n"
        )
        after = rmq(pair, "getControllerConfig", "-a", a)
        assert re.search(r"^scanInactiveMasterInterval {24}=  4000$", after, re.M), after

        # an election asked by the real mqadmin, then one asked by rmq, each of the other broker
        by_port = {str(port): name for name, port in pair.ports.items()}
        found = re.findall(r"brokerId=(\d+), brokerAddress='127\.0\.0\.1:(\d+)'", text)
        broker_id = {by_port[port]: int(i) for i, port in found}
        second = "b2" if first == "b1" else "b1"
        for asker, target, expected in (("mqadmin", second, (2, 3)), ("rmq", first, (3, 5))):
            args = ("electMaster", "-a", a, "-c", CLUSTER, "-bn", GROUP, "-b", str(broker_id[target]))
            elected = pair.mqadmin(*args) if asker == "mqadmin" else rmq(pair, *args)
            assert elected == (
                f"\n#ClusterName\t{CLUSTER}\n#BrokerName\t{GROUP}\n#BrokerMasterAddr\t127.0.0.1:{pair.ports[target]}"
                f"\n#MasterEpoch\t{expected[0]}\n#SyncStateSetEpoch\t{expected[1]}\n"
            ), (asker, elected)
            assert pair.master(not_=second if target == first else first, timeout=60) == target
            pair.in_sync(120, f"both in sync under {target}")

        # a group the controller does not know: both refuse with the controller's words
        refusal = "Broker broker-x is not existed,clean broker data failure."
        clean = ("cleanBrokerMetadata", "-a", a, "-c", CLUSTER, "-bn", "broker-x", "-b", "3")
        refused = mqadmin_output(pair, *clean)
        assert refusal in refused, refused
        assert refusal in rmq(pair, *clean, check=False)
        no_cluster = rmq(pair, "cleanBrokerMetadata", "-a", a, "-bn", GROUP, check=False)
        assert "cleanLivingBroker option is false, clusterName option can not be empty." in no_cluster
