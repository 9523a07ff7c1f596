"""The NameServer's part of SlaveActingMaster (RocketMQ 5.1.1's ``RouteInfoManager``), over a real
socket: brokers of a group "sam-a" register, heartbeat (904) and leave as 5.1.1 brokers do, and the
route, cluster and member-group (901) answers are read back as clients read them."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.client import SyncClient
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.support.serve import ServeProcess, free_port, wait_until, write_conf

GROUP = "sam-a"
MASTER, SLAVE, SLAVE2 = "127.0.0.1:41001", "127.0.0.1:41002", "127.0.0.1:41003"


def namesrv(tmp_path: Path, **keys: str) -> ServeProcess:
    conf = write_conf(tmp_path / "ns.conf", **keys)
    return ServeProcess(tmp_path / "store", conf)


def register(
    client: SyncClient,
    ns: str,
    broker_id: int,
    addr: str,
    *,
    acting: bool | None = True,
    timeout_ms: int | None = 10000,
    version: int = 1,
    state_version: int | None = None,
) -> RemotingCommand:
    """A REGISTER_BROKER as a 5.1.1 broker sends it (``enableActingMaster``, and
    ``heartbeatTimeoutMillis`` when the mode is on), with topic SamTopic (perm 6)."""
    header = hd.RegisterBrokerRequestHeader(
        broker_name=GROUP,
        broker_addr=addr,
        cluster_name="SamCluster",
        ha_server_addr=addr.replace(":4100", ":4200"),
        broker_id=broker_id,
        heartbeat_timeout_millis=timeout_ms,
        enable_acting_master=acting,
    )
    topics = {
        name: jb.TopicConfig(topic_name=name, read_queue_nums=4, write_queue_nums=4, perm=perm)
        for name, perm in (("SamTopic", 6), (f"rmq_sys_SYNC_BROKER_MEMBER_{GROUP}", 1))
    }
    body = jb.RegisterBrokerBody(
        topic_config_serialize_wrapper=jb.TopicConfigSerializeWrapper(
            data_version=jb.DataVersion(
                counter=version, timestamp=1000 + version, state_version=state_version
            ),
            topic_config_table=topics,
        )
    )
    answer = client.invoke(ns, RemotingCommand.request(RC.REGISTER_BROKER, header, jb.encode(body)), 5)
    assert answer.code == RS.SUCCESS
    return answer


def route(ns: str, topic: str = "SamTopic") -> dict | None:
    with SyncClient() as client:
        answer = client.invoke(ns, RemotingCommand.request(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 5)
    if answer.code == RS.TOPIC_NOT_EXIST:
        return None
    assert answer.code == RS.SUCCESS
    data = json.loads(answer.body)
    (broker,) = [b for b in data["brokerDatas"] if b["brokerName"] == GROUP]
    (queue,) = [q for q in data["queueDatas"] if q["brokerName"] == GROUP]
    return {"addrs": broker["brokerAddrs"], "perm": queue["perm"], "acting": broker.get("enableActingMaster")}


def member_group(ns: str) -> RemotingCommand:
    header = hd.GetBrokerMemberGroupRequestHeader(cluster_name="SamCluster", broker_name=GROUP)
    with SyncClient() as client:
        return client.invoke(ns, RemotingCommand.request(RC.GET_BROKER_MEMBER_GROUP, header), 5)


def cluster_addrs(ns: str) -> dict:
    with SyncClient() as client:
        answer = client.invoke(ns, RemotingCommand.request(RC.GET_BROKER_CLUSTER_INFO), 5)
    return jb.decode(jb.ClusterInfo, answer.body).broker_addr_table[GROUP].broker_addrs


def test_a_group_without_master_is_routed_to_its_smallest_slave_as_id_0(tmp_path: Path) -> None:
    with namesrv(tmp_path, supportActingMaster="true") as ns_proc:
        ns = ns_proc.namesrv
        master, slave, slave2 = SyncClient(), SyncClient(), SyncClient()
        try:
            register(master, ns, 0, MASTER)
            register(slave, ns, 1, SLAVE)
            register(slave2, ns, 2, SLAVE2)
            assert route(ns) == {"addrs": {"0": MASTER, "1": SLAVE, "2": SLAVE2}, "perm": 6, "acting": True}
            answer = member_group(ns)
            assert answer.code == RS.SUCCESS
            assert answer.body == (
                b'{"brokerMemberGroup":{"brokerAddrs":{0:"%s",1:"%s",2:"%s"},"brokerName":"sam-a",'
                b'"cluster":"SamCluster"}}' % (MASTER.encode(), SLAVE.encode(), SLAVE2.encode())
            )

            master.close()  # the master's connection closes: it leaves the tables at once
            wait_until(lambda: route(ns)["perm"] == 4, 5, "the queues read-only")
            assert route(ns) == {"addrs": {"0": SLAVE, "2": SLAVE2}, "perm": 4, "acting": True}
            assert cluster_addrs(ns) == {1: SLAVE, 2: SLAVE2}  # the real ids
            assert json.loads(member_group(ns).body.replace(b"{1:", b'{"1":').replace(b",2:", b',"2":')) == {
                "brokerMemberGroup": {
                    "brokerAddrs": {"1": SLAVE, "2": SLAVE2},
                    "brokerName": GROUP,
                    "cluster": "SamCluster",
                }
            }
            assert route(ns, f"rmq_sys_SYNC_BROKER_MEMBER_{GROUP}")["addrs"] == {"1": SLAVE, "2": SLAVE2}

            register(slave, ns, 1, SLAVE, version=2)  # the prime slave's registration stays read-only
            assert route(ns)["perm"] == 4

            slave.close()  # the acting master goes too: the next slave takes its place
            wait_until(lambda: route(ns)["addrs"] == {"0": SLAVE2}, 5, "the next slave acting")

            master = SyncClient()
            register(master, ns, 0, MASTER)  # the master returns: writable again, its own id 0
            assert route(ns) == {"addrs": {"0": MASTER, "2": SLAVE2}, "perm": 6, "acting": True}
        finally:
            for client in (master, slave, slave2):
                client.close()


def test_without_support_the_route_keeps_the_real_ids(tmp_path: Path) -> None:
    """``supportActingMaster`` off (the default): the group's queues still turn read-only, but the
    slave stays id 1, as 5.1.1's NameServer answers."""
    with namesrv(tmp_path) as ns_proc:
        ns = ns_proc.namesrv
        with SyncClient() as slave:
            master = SyncClient()
            register(master, ns, 0, MASTER)
            register(slave, ns, 1, SLAVE)
            master.close()
            wait_until(lambda: route(ns)["perm"] == 4, 5, "the queues read-only")
            assert route(ns)["addrs"] == {"1": SLAVE}


def test_a_4x_group_is_not_touched(tmp_path: Path) -> None:
    """Brokers that do not send ``enableActingMaster`` (4.x): a slave never sets queue data, and a
    group whose master left keeps its queue data as it was."""
    with namesrv(tmp_path, supportActingMaster="true") as ns_proc:
        ns = ns_proc.namesrv
        with SyncClient() as slave:
            master = SyncClient()
            register(master, ns, 0, MASTER, acting=None, timeout_ms=None)
            register(slave, ns, 1, SLAVE, acting=None, timeout_ms=None)
            master.close()
            wait_until(lambda: route(ns)["addrs"] == {"1": SLAVE}, 5, "the master gone")
            assert route(ns) == {"addrs": {"1": SLAVE}, "perm": 6, "acting": None}


def test_a_silent_broker_leaves_after_its_own_timeout_and_heartbeats_keep_it(tmp_path: Path) -> None:
    """``heartbeatTimeoutMillis`` from the registration (1.5 s here) and BROKER_HEARTBEAT (904,
    oneway) every 0.3 s; the sockets stay open, as with a broker frozen by SIGSTOP."""
    with namesrv(tmp_path, supportActingMaster="true", scanNotActiveBrokerInterval="200") as ns_proc:
        ns = ns_proc.namesrv
        with SyncClient() as master, SyncClient() as slave:
            register(master, ns, 0, MASTER, timeout_ms=1500)
            register(slave, ns, 1, SLAVE, timeout_ms=1500)
            beat = hd.BrokerHeartbeatRequestHeader(
                cluster_name="SamCluster", broker_addr=SLAVE, broker_name=GROUP
            )
            started = time.monotonic()
            while time.monotonic() - started < 3.0:  # the master is silent, the slave beats
                slave.invoke_oneway(ns, RemotingCommand.request(RC.BROKER_HEARTBEAT, beat, oneway=True))
                time.sleep(0.3)
            assert route(ns) == {"addrs": {"0": SLAVE}, "perm": 4, "acting": True}
            assert cluster_addrs(ns) == {1: SLAVE}
            wait_until(lambda: route(ns) is None, 5, "the silent slave gone")  # it stops beating


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"supportActingMaster": "yes"}, "supportActingMaster='yes' is not true or false"),
        ({"scanNotActiveBrokerInterval": "0"}, "scanNotActiveBrokerInterval='0' is not a positive number"),
    ],
)
def test_bad_namesrv_keys_stop_the_start(rmq, tmp_path: Path, keys: dict, message: str) -> None:
    conf = write_conf(tmp_path / "bad.conf", **keys)
    result = rmq("serve", str(tmp_path / "store"), "--config", str(conf), "--namesrv-port", str(free_port()))
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_namesrv_keys_are_taken_and_an_unimplemented_one_is_named(tmp_path: Path) -> None:
    with namesrv(tmp_path, supportActingMaster="true", notifyMinBrokerIdChanged="true") as ns_proc:
        with SyncClient() as client:
            answer = client.invoke(ns_proc.namesrv, RemotingCommand.request(RC.GET_NAMESRV_CONFIG), 5)
        config = dict(line.split("=", 1) for line in answer.body.decode().splitlines() if "=" in line)
        assert config["supportActingMaster"] == "true"
        assert config["scanNotActiveBrokerInterval"] == "5000"
        assert "without effect): notifyMinBrokerIdChanged" in ns_proc.output()


def test_a_stale_master_epoch_cannot_take_brokerid_0_back(tmp_path: Path) -> None:
    """Controller mode: a broker registering as id 0 with a smaller ``stateVersion`` (master epoch)
    than the id-0 broker the NameServer holds is ignored, as 5.1.1's ``RouteInfoManager`` does."""
    with namesrv(tmp_path) as ns_proc:
        ns = ns_proc.namesrv
        new, stale = SyncClient(), SyncClient()
        try:
            register(new, ns, 0, SLAVE, acting=None, timeout_ms=None, state_version=3)
            answer = register(stale, ns, 0, MASTER, acting=None, timeout_ms=None, state_version=2)
            assert answer.header(hd.RegisterBrokerResponseHeader).master_addr is None
            assert route(ns)["addrs"] == {"0": SLAVE}
            register(
                stale, ns, 0, MASTER, acting=None, timeout_ms=None, state_version=4
            )  # a newer epoch wins
            assert route(ns)["addrs"] == {"0": MASTER}
        finally:
            new.close()
            stale.close()
