"""Broker groups of two ``rmq serve`` processes, a master and a slave, over real sockets: the C++
client's sends replicated byte for byte (``rmq diff-stores``), the slave's refusals, its config
sync, a slave killed and restarted mid-stream, and SIGKILLs of a SYNC_MASTER under load after
which every acknowledged message is on the slave and a consumer gets them all from it."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from formats.records import Record
from rmqcli.remoting import headers as hd
from rmqcli.remoting.client import SyncClient
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.store import Store
from tests.support.broker_drivers import Driver, run_driver, start_consumer
from tests.support.serve import ServeProcess, free_port, wait_until, write_conf
from tests.support.stores import commitlog_end, ends_meet

FILE = 256 * 1024  # small CommitLog files, so that the streams roll several


class Member(ServeProcess):
    """One broker of group ``broker-a``; a master also runs the NameServer unless told where one is."""

    def __init__(self, tmp: Path, name: str, role: str, namesrv: str | None = None, **keys: object):
        store = tmp / name
        store.mkdir(parents=True, exist_ok=True)
        self.ha_port = free_port()
        settings = {
            "brokerRole": role,
            "brokerId": "0" if role != "SLAVE" else "1",
            "mappedFileSizeCommitLog": str(FILE),
            "haListenPort": str(self.ha_port),
        }
        settings.update({k: str(v) for k, v in keys.items()})
        conf = write_conf(tmp / f"{name}.conf", **settings)
        extra = ["--verbose"] + (["--no-namesrv", "--namesrv", namesrv] if namesrv else [])
        super().__init__(store, conf, extra)

    def sigkill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


def stored(root: Path, field: Callable[[Record], str]) -> list[str]:
    """``field`` of every record of the store's CommitLog, in order."""
    store = Store.open(root)
    try:
        return [field(rec) for rec in store.commitlog.records()]
    finally:
        store.close()


def stored_keys(root: Path) -> set[str]:
    return set(stored(root, lambda rec: rec.properties.get("KEYS", "")))


def diff(rmq, a: Path, b: Path) -> dict:  # type: ignore[no-untyped-def]
    result = rmq("diff-stores", str(a), str(b), "--json")
    assert result.exit_code == 0, result.stdout + result.stderr
    return json.loads(result.stdout)["summary"]


def cq_files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted((root / "consumequeue").rglob("*"))
        if p.is_file()
    }


@contextmanager
def pair(tmp: Path, master_role: str, **keys: object) -> Iterator[tuple[Member, Member]]:
    master = Member(tmp, "master", master_role, **keys).start()
    slave = Member(tmp, "slave", "SLAVE", namesrv=master.namesrv, **keys)
    try:
        slave.start()
        yield master, slave
    finally:
        slave.kill()
        master.kill()


@pytest.mark.cpp
def test_sync_master_replicates_5000_cpp_sends_byte_for_byte(rmq, tmp_path: Path) -> None:
    """Every send the C++ client gets SEND_OK for is on the slave when it is answered; stopped,
    the two CommitLogs are identical and the slave's consume queues equal the master's."""
    with pair(tmp_path, "SYNC_MASTER") as (master, slave):
        wait_until(lambda: _connected(master), 15, "slave link")
        keys = [f"k{i}" for i in range(5000)]
        events = run_driver(
            tmp_path,
            "produce",
            {"op": "produce", "namesrv": master.namesrv, "topic": "TopicHA", "keys": keys},
            300,
        )
        sent = [e for e in events if "key" in e]
        assert len(sent) == 5000 and {e["status"] for e in sent} == {0}
        wait_until(ends_meet(slave.store, master.store), 20, "slave caught up")
        assert master.stop() == 0 and slave.stop() == 0
    summary = diff(rmq, master.store, slave.store)
    assert summary["verdict"] == "identical"
    assert summary["comparedBytes"] == summary["a"]["maxOffset"] > 3 * FILE
    master_cq, slave_cq = cq_files(master.store), cq_files(slave.store)
    assert any(name.startswith("consumequeue/TopicHA/") for name in master_cq)
    assert slave_cq == master_cq


def _connected(master: Member) -> bool:
    return "HAService receive new connection" in master.output()


def test_the_slave_refuses_sends_and_topic_changes_as_4_9_8(rmq, tmp_path: Path) -> None:
    with pair(tmp_path, "ASYNC_MASTER") as (master, slave):
        listing = rmq("clusterList", "-n", master.namesrv, "--json")
        assert listing.exit_code == 0, listing.stderr
        members = {(b["brokerName"], b["brokerId"], b["addr"]) for b in json.loads(listing.stdout)}
        assert members == {("broker-a", 0, master.broker), ("broker-a", 1, slave.broker)}
        header = hd.SendMessageRequestHeader(
            producer_group="PG", topic="TopicX", default_topic="TBW102", default_topic_queue_nums=4,
            queue_id=0, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0,
            properties="KEYS\x01k\x02",
        )  # fmt: skip
        with SyncClient() as client:
            answer = client.invoke(slave.broker, RemotingCommand.request(RC.SEND_MESSAGE, header, b"body"))
            assert answer.code == RS.SERVICE_NOT_AVAILABLE
            assert answer.remark.startswith("service not available now. It may be caused by one of the")
            assert "messages are put to the slave" in answer.remark
            create = hd.CreateTopicRequestHeader(
                topic="TopicX", default_topic="TBW102", read_queue_nums=4, write_queue_nums=4, perm=6,
                topic_filter_type="SINGLE_TAG",
            )  # fmt: skip
            answer = client.invoke(slave.broker, RemotingCommand.request(RC.UPDATE_AND_CREATE_TOPIC, create))
            assert answer.code == RS.SYSTEM_ERROR
            assert answer.remark == (
                "Can't modify topic or subscription group from slave broker, "
                "please execute it from master broker."
            )
            answer = client.invoke(master.broker, RemotingCommand.request(RC.SEND_MESSAGE, header, b"body"))
            assert answer.code == RS.SUCCESS
            wait_until(
                lambda: commitlog_end(slave.store) == commitlog_end(master.store) > 0, 15, "replicated"
            )
            # a send-back or a transaction's end would write the slave's CommitLog: refused
            back = hd.ConsumerSendMsgBackRequestHeader(
                offset=0, group="CG_SLAVE", delay_level=0, origin_topic="TopicX"
            )
            answer = client.invoke(slave.broker, RemotingCommand.request(RC.CONSUMER_SEND_MSG_BACK, back))
            assert (answer.code, answer.remark) == (
                RS.SYSTEM_ERROR,
                "no master available along with 127.0.0.1",
            )
            end = hd.EndTransactionRequestHeader(
                producer_group="PG", tran_state_table_offset=0, commit_log_offset=0, commit_or_rollback=8,
                from_transaction_check=False, msg_id="m",
            )  # fmt: skip
            answer = client.invoke(slave.broker, RemotingCommand.request(RC.END_TRANSACTION, end))
            assert answer.code == RS.SLAVE_NOT_AVAILABLE
        time.sleep(0.5)
        assert commitlog_end(slave.store) == commitlog_end(master.store)
    assert stored_keys(slave.store) == {"k"}  # the one the master took, replicated; none of its own


def test_the_slave_copies_the_masters_topics_groups_and_offsets(rmq, tmp_path: Path) -> None:
    """SlaveSynchronize: within its first round (3 s after start, then every 10 s)."""
    with pair(tmp_path, "ASYNC_MASTER") as (master, slave):
        assert (
            rmq("updateTopic", "-b", master.broker, "-t", "SyncedTopic", "-r", "3", "-w", "3").exit_code == 0
        )
        assert rmq("updateSubGroup", "-b", master.broker, "-g", "SyncedGroup").exit_code == 0
        config = slave.store / "config"

        def synced() -> bool:
            try:
                topics = json.loads((config / "topics.json").read_text())["topicConfigTable"]
                groups = json.loads((config / "subscriptionGroup.json").read_text())["subscriptionGroupTable"]
            except (OSError, ValueError, KeyError):
                return False
            return "SyncedTopic" in topics and "SyncedGroup" in groups

        wait_until(synced, 25, "the master's topic and group on the slave")
        topics = json.loads((config / "topics.json").read_text())
        assert topics["topicConfigTable"]["SyncedTopic"]["writeQueueNums"] == 3
        master_topics = json.loads((master.store / "config" / "topics.json").read_text())
        assert topics["dataVersion"] == master_topics["dataVersion"]


@pytest.mark.cpp
def test_a_slave_killed_mid_stream_catches_up_byte_for_byte(rmq, tmp_path: Path) -> None:
    with pair(tmp_path, "ASYNC_MASTER") as (master, slave):
        load = Driver(
            tmp_path, "load", {"op": "load", "namesrv": master.namesrv, "topic": "TopicK", "prefix": "k"}
        )
        try:
            load.wait_for(lambda ev: sum("id" in e for e in ev) >= 300, 60, "sends before the kill")
            slave.sigkill()
            load.wait_for(lambda ev: sum("id" in e for e in ev) >= 900, 60, "sends while the slave is down")
            slave.start()
            load.wait_for(lambda ev: sum("id" in e for e in ev) >= 1500, 60, "sends after the restart")
        finally:
            load.stop()
        wait_until(ends_meet(slave.store, master.store), 30, "slave caught up")
        assert master.stop() == 0 and slave.stop() == 0
    assert diff(rmq, master.store, slave.store)["verdict"] == "identical"


@pytest.mark.cpp
def test_sigkill_of_a_sync_master_under_load_loses_no_acknowledged_message(tmp_path: Path) -> None:
    """10 rounds: a SYNC_MASTER under a sync-send stream is SIGKILLed; every send it acknowledged
    is in the slave's CommitLog; then a consumer started while the master is down receives every
    acknowledged message from the slave. The NameServer runs in the slave's process here."""
    master = Member(tmp_path, "master", "SYNC_MASTER")
    slave = Member(tmp_path, "slave", "SLAVE", haMasterAddress=f"127.0.0.1:{master.ha_port}")
    master.extra += ["--no-namesrv", "--namesrv", slave.namesrv]
    acked: set[str] = set()
    try:
        slave.start()
        for round_ in range(10):
            master.start()
            # the slave linked before the sends: a slave that first connects with an empty store is
            # served from the start of the master's last file (4.9.8's HAConnection), so sends stored
            # before that (refused with SLAVE_NOT_AVAILABLE) would leave its queues starting past 0,
            # and a new consumer group of the C++ client then waits on the dead master for ever
            wait_until(lambda: "HAService receive new connection" in master.output(), 30, "the slave's link")
            load = Driver(
                tmp_path,
                f"load{round_}",
                {"op": "load", "namesrv": slave.namesrv, "topic": "TopicF", "prefix": f"r{round_}-"},
            )
            try:
                load.wait_for(
                    lambda ev: sum("id" in e for e in ev) >= 100, 60, f"round {round_}: acknowledged sends"
                )
                master.sigkill()
                time.sleep(0.3)
            finally:
                load.kill()
            round_acked = {e["key"] for e in load.events() if "id" in e}
            acked |= round_acked
            missing = round_acked - stored_keys(slave.store)
            assert not missing, f"round {round_}: {len(missing)} acknowledged sends not on the slave"
        consumer = start_consumer(
            tmp_path,
            "consume",
            {"op": "consume", "namesrv": slave.namesrv, "topic": "TopicF", "group": "CG_F"},
        )
        try:
            consumer.wait_for(
                lambda ev: acked <= {e.get("key") for e in ev}, 90, "every acknowledged message consumed"
            )
        finally:
            # killed, not stopped: the C++ consumer's shutdown persists its offsets to every broker
            # it knew, the killed master included, and may wait out connect timeouts past 30 s
            consumer.kill()
    finally:
        master.kill()
        slave.kill()


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"brokerRole": "SLAVE", "brokerId": "0"}, "Slave's brokerId must be > 0"),
        (
            {"brokerRole": "MASTER"},
            "brokerRole must be one of ASYNC_MASTER, SYNC_MASTER, SLAVE, not 'MASTER'",
        ),
        ({"brokerRole": "SLAVE", "brokerId": "1", "haSendHeartbeatInterval": "0"}, "must be positive"),
    ],
)
def test_bad_roles_stop_the_start_with_one_line(rmq, tmp_path: Path, keys: dict, message: str) -> None:
    conf = write_conf(tmp_path / "broker.conf", **keys)
    result = rmq("serve", str(tmp_path / "store"), "--config", str(conf))
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_keys_rmq_does_not_implement_are_named_once_at_start(tmp_path: Path) -> None:
    """A master's brokerId is 0 whatever the file says (BrokerStartup); keys rmq leaves alone are
    listed in one warning, the ones it takes are not."""
    member = Member(
        tmp_path,
        "m",
        "ASYNC_MASTER",
        brokerId=3,
        deleteWhen="04",
        transientStorePoolEnable="true",
        storePathRootDir="/elsewhere",
    )
    with member:
        out = member.output()
    assert "(cluster DefaultCluster, id 0)" in out and "ASYNC_MASTER (HA port" in out
    warnings = [line for line in out.splitlines() if "keys rmq does not implement" in line]
    assert len(warnings) == 1
    assert warnings[0].endswith("without effect): transientStorePoolEnable")
    assert "storePathRootDir=/elsewhere is not the STORE argument; serving" in out


def kill_under_load(load: Driver, master: Member) -> int:
    """SIGKILL ``master`` once ``load`` has 200 sends stored, and wait for 300 more after the kill
    (on the other group); the count of ``load``'s events at the kill."""
    load.wait_for(lambda ev: sum("id" in e for e in ev) >= 200, 60, "sends to both groups")
    master.sigkill()
    killed_at = len(load.events())
    load.wait_for(lambda ev: sum("id" in e for e in ev[killed_at:]) >= 300, 60, "sends after the kill")
    return killed_at


@pytest.mark.cpp
def test_producers_fail_over_to_another_group_and_the_master_resumes_replication(rmq, tmp_path: Path) -> None:
    """Two broker groups: broker-a (master and slave) and broker-b (its master runs the NameServer).
    With broker-a's master SIGKILLed, the C++ producer's sends go on to broker-b; restarted, the
    master serves its slave again and both CommitLogs end equal."""
    other = Member(tmp_path, "b-master", "ASYNC_MASTER", brokerName="broker-b").start()
    master = Member(tmp_path, "a-master", "ASYNC_MASTER", namesrv=other.namesrv)
    slave = Member(tmp_path, "a-slave", "SLAVE", namesrv=other.namesrv)
    try:
        master.start()
        slave.start()
        made = rmq(
            "updateTopic", "-n", other.namesrv, "-c", "DefaultCluster", "-t", "TopicFO", "-r", "2", "-w", "2"
        )
        assert made.exit_code == 0, made.stderr
        load = Driver(
            tmp_path, "load", {"op": "load", "namesrv": other.namesrv, "topic": "TopicFO", "prefix": "f"}
        )
        try:
            killed_at = kill_under_load(load, master)
            master.start()
            load.wait_for(
                lambda ev: sum("id" in e for e in ev[killed_at:]) >= 600, 60, "sends after the restart"
            )
        finally:
            load.stop()
        after_kill = [e for e in load.events()[killed_at:] if "id" in e]
        assert len(after_kill) >= 600
        wait_until(ends_meet(slave.store, master.store), 30, "the slave caught up with the restarted master")
        assert master.stop() == 0 and slave.stop() == 0
    finally:
        slave.kill()
        master.kill()
        other.kill()
    assert diff(rmq, master.store, slave.store)["verdict"] == "identical"
    on_b = stored_keys(other.store)
    assert len(on_b & {e["key"] for e in after_kill}) >= 300  # broker-b took the sends while a was down


def test_ha_status_shows_the_masters_slaves_and_the_slaves_link(rmq, tmp_path: Path) -> None:
    with pair(tmp_path, "ASYNC_MASTER") as (master, slave):
        assert rmq("sendMessage", "-n", master.namesrv, "-t", "TopicS", "-p", "hello").exit_code == 0
        wait_until(lambda: commitlog_end(slave.store) == commitlog_end(master.store) > 0, 15, "replicated")
        end = commitlog_end(master.store)

        def status(addr: str) -> dict:
            result = rmq("haStatus", "-b", addr, "--json")
            assert result.exit_code == 0, result.stderr
            (only,) = json.loads(result.stdout)
            return only["info"]

        wait_until(lambda: status(master.broker)["haConnectionInfo"][0]["slaveAckOffset"] == end, 10, "acked")
        of_master = status(master.broker)
        assert of_master["master"] is True and of_master["masterCommitLogMaxOffset"] == end
        assert of_master["inSyncSlaveNums"] == 1
        (link,) = of_master["haConnectionInfo"]
        assert (link["diff"], link["inSync"], link["transferFromWhere"]) == (0, True, 0)
        of_slave = status(slave.broker)
        assert of_slave["master"] is False
        client = of_slave["haClientRuntimeInfo"]
        assert client["masterAddr"] == f"127.0.0.1:{master.ha_port}" and client["maxOffset"] == end
        assert client["activated"] is True and client["lastReadTimestamp"] > 0
        text = rmq("haStatus", "-n", master.namesrv, "-c", "DefaultCluster")
        assert text.exit_code == 0
        assert (
            f"#MasterAddr\t{master.broker}\n#MasterCommitLogMaxOffset\t{end}\n#SlaveNum\t1\n" in text.stdout
        )


def _send(broker: str, key: str) -> RemotingCommand:
    header = hd.SendMessageRequestHeader(
        producer_group="PG", topic="TopicW", default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=0, sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0,
        properties=f"KEYS\x01{key}\x02WAIT\x01true\x02",
    )  # fmt: skip
    with SyncClient() as client:
        return client.invoke(broker, RemotingCommand.request(RC.SEND_MESSAGE, header, b"body"), 10)


def test_a_sync_master_without_a_slave_answers_slave_not_available(tmp_path: Path) -> None:
    """``isSlaveOK`` fails: SLAVE_NOT_AVAILABLE (11) at once; the message is stored all the same."""
    with Member(tmp_path, "m", "SYNC_MASTER") as master:
        answer = _send(master.broker, "alone")
        assert answer.code == RS.SLAVE_NOT_AVAILABLE
        assert answer.ext_fields["queueOffset"] == "0" and answer.ext_fields["msgId"]
    assert "alone" in stored_keys(master.store)


def test_a_sync_master_whose_slave_stalls_answers_flush_slave_timeout(tmp_path: Path) -> None:
    """A slave that reports once and then nothing: the send waits ``slaveTimeout`` (400 ms here),
    then FLUSH_SLAVE_TIMEOUT (12); stored all the same."""
    import socket

    from formats.ha import SLAVE_REPORT_STRUCT

    with Member(tmp_path, "m", "SYNC_MASTER", slaveTimeout=400) as master:
        with socket.create_connection(("127.0.0.1", master.ha_port)) as stalled:
            stalled.sendall(SLAVE_REPORT_STRUCT.pack(0))  # an empty slave's first report
            time.sleep(0.3)
            started = time.monotonic()
            answer = _send(master.broker, "stalled")
            waited = time.monotonic() - started
        assert answer.code == RS.FLUSH_SLAVE_TIMEOUT
        assert 0.35 <= waited < 3.0
    assert "stalled" in stored_keys(master.store)


def test_pulls_suggest_a_slave_only_with_slave_read_enable_and_a_consumer_far_behind() -> None:
    """``suggestWhichBrokerId`` (PullMessageProcessor): the group's whichBrokerWhenConsumeSlowly
    when the consumer is more than 40 % of this machine's memory behind, else its brokerId, and
    the master (0) whenever slaveReadEnable is off."""
    from types import SimpleNamespace

    from rmqcli.broker.config import BrokerConfig
    from rmqcli.broker.processor.pull import PullRequest, PullResult, in_memory_bytes, suggest_broker

    group = {"whichBrokerWhenConsumeSlowly": 1, "brokerId": 0}
    header = hd.PullMessageRequestHeader(
        consumer_group="G", topic="T", queue_id=0, queue_offset=0, max_msg_nums=32, sys_flag=0,
        commit_offset=0, suspend_timeout_millis=0, sub_version=0,
    )  # fmt: skip
    pull = PullRequest(header, None, group)
    far, near = in_memory_bytes(False) + 1, in_memory_bytes(False) - 1

    def suggested(read: bool, behind: int) -> int:
        ctl = SimpleNamespace(config=BrokerConfig(slave_read_enable=read))
        return suggest_broker(ctl, pull, PullResult(0, "FOUND", 0, 0, 0, b"", behind))  # type: ignore[arg-type]

    assert (suggested(True, far), suggested(True, near), suggested(False, far)) == (1, 0, 0)
    assert in_memory_bytes(True) < in_memory_bytes(False)  # a slave's ratio is 10 points lower


@pytest.mark.parametrize("check", [False, True], ids=["default", "offsetCheckInSlave"])
def test_a_slave_moves_no_consumer_offset_unless_offset_check_in_slave(tmp_path: Path, check: bool) -> None:
    """``PullMessageProcessor``: a pull past the end of a slave's queue is OFFSET_OVERFLOW_BADLY, which
    a master answers PULL_OFFSET_MOVED (and records an OFFSET_MOVED_EVENT). A slave answers it so
    only with ``offsetCheckInSlave=true``; by default it answers PULL_RETRY_IMMEDIATELY ("none
    correction") with the group's brokerId as suggestWhichBrokerId. Neither writes an event."""
    with pair(tmp_path, "ASYNC_MASTER", offsetCheckInSlave=str(check).lower()) as (master, slave):
        for key in ("one", "two"):
            assert _send(master.broker, key).code == RS.SUCCESS
        wait_until(lambda: commitlog_end(slave.store) == commitlog_end(master.store) > 0, 15, "replicated")
        header = hd.PullMessageRequestHeader(
            consumer_group="G_MOVED", topic="TopicW", queue_id=0, queue_offset=9, max_msg_nums=32,
            sys_flag=0x4, commit_offset=0, suspend_timeout_millis=0, subscription="*", sub_version=0,
        )  # fmt: skip

        def pulled(broker: str) -> RemotingCommand:
            with SyncClient() as client:
                return client.invoke(broker, RemotingCommand.request(RC.PULL_MESSAGE, header), 10)

        def topic_on_slave() -> bool:  # SlaveSynchronize copies topics.json within its first round
            return pulled(slave.broker).code != RS.TOPIC_NOT_EXIST

        wait_until(topic_on_slave, 25, "the master's topic on the slave")
        on_master, on_slave = pulled(master.broker), pulled(slave.broker)
        fields = ("remark", "nextBeginOffset", "minOffset", "maxOffset", "suggestWhichBrokerId")
        moved = ("OFFSET_OVERFLOW_BADLY", "2", "0", "2", "0")
        assert on_master.code == RS.PULL_OFFSET_MOVED
        assert (on_master.remark, *(on_master.ext_fields[f] for f in fields[1:])) == moved
        assert on_slave.code == (RS.PULL_OFFSET_MOVED if check else RS.PULL_RETRY_IMMEDIATELY)
        assert (on_slave.remark, *(on_slave.ext_fields[f] for f in fields[1:])) == moved
        wait_until(lambda: commitlog_end(slave.store) == commitlog_end(master.store), 15, "event replicated")
        assert master.stop() == 0 and slave.stop() == 0
    topics = stored(slave.store, lambda rec: rec.topic)
    assert topics.count("OFFSET_MOVED_EVENT") == 1  # the master's; none of the slave's
