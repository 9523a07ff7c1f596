"""Retention in ``rmq serve``, end to end: clean-up rounds that delete by time and by disk usage, what
they leave served to the C++ client, the disk-full refusal, ``rmq clean``'s plan against what the
broker then deleted, and the real 4.9.8 broker beside rmq on copies of one store (without Java 17 or
the kit, that case is skipped).

A broker's first clean-up round comes 60 s after it starts (4.9.8's schedule), so the brokers of this
module start together and each test looks at its own.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rmqcli.remoting import headers as hd
from rmqcli.remoting.client import RemotingClient
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.store.retention import HOUR_MS
from rmqcli.store.settings import read_properties
from tests.support.broker_drivers import Driver, run_driver
from tests.support.cli import invoke_rmq
from tests.support.components import require
from tests.support.oracle import HAVE_JAVA, KIT, Jvm, broker_port
from tests.support.retention import (
    TOPIC,
    Placed,
    add_half_message,
    age,
    build_store,
    commitlog_names,
    store_files,
    write_conf,
)
from tests.support.serve import ServeProcess, wait_until
from tests.support.stores import sparse_copy

needs_client = pytest.mark.cpp

HOUR = time.localtime().tm_hour
THIS_HOUR = f"{HOUR:02d};{(HOUR + 1) % 24:02d}"  # the round may come in the next hour
OTHER_HOUR = f"{(HOUR + 12) % 24:02d}"
ROUND_WAIT = 60 + 30  # the first round, and the 30 s the issue allows after it
COMMON = {"cleanResourceInterval": "1000", "brokerClusterName": "RetentionCluster"}


@dataclass
class Case:
    server: ServeProcess
    store: Path
    before: set[str]  # the store's files before it was served
    plan: dict  # `rmq clean --config broker.conf --json` just before
    placed: list[Placed]
    drill: Path | None = None
    half: tuple[int, int] | None = None  # a half message's CommitLog and queue offsets
    real: Path | None = None  # a copy of the store the real 4.9.8 broker serves
    jvm: Jvm | None = None


def plan(store: Path, conf: Path, disk_ratio: str | None = None) -> dict:
    ratio = ["--disk-ratio", disk_ratio] if disk_ratio is not None else []
    result = invoke_rmq("clean", str(store), "--config", str(conf), "--json", *ratio)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def prepare(
    tmp: Path,
    name: str,
    conf_keys: dict[str, str],
    build: bool = True,
    drill: str | None = None,
    half: bool = False,
) -> Case:
    store = tmp / name / "store"
    store.mkdir(parents=True)
    placed = build_store(store, offsets={"G_BEHIND": 0, "G_DONE": 180}) if build else []
    if build:
        names = commitlog_names(store)
        age(store, names[:2], int(time.time() * 1000) - 2 * HOUR_MS)  # two old files, the others new
    half_at = add_half_message(store) if half else None
    conf = write_conf(tmp / name / "broker.conf", brokerName=f"broker-{name}", **COMMON, **conf_keys)
    extra = []
    drill_file = None
    if drill is not None:
        drill_file = tmp / name / "usage"
        drill_file.write_text(drill)
        extra = ["--disk-usage-from", str(drill_file)]
    planned = plan(store, conf, drill) if build else {}
    case = Case(ServeProcess(store, conf, extra), store, store_files(store), planned, placed, drill_file)
    case.half = half_at
    return case


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Case]]:
    tmp = tmp_path_factory.mktemp("retention")
    made = {
        # a drilled 10 % disk: the real disk's usage cannot add space deletions to the hour's
        "time": prepare(tmp, "time", {"fileReservedTime": "0", "deleteWhen": THIS_HOUR}, drill="0.10"),
        # 1 is clamped to 10 %: at the drilled 50 %, the disk asks for the expired files at once
        "space": prepare(
            tmp,
            "space",
            {"fileReservedTime": "1", "deleteWhen": OTHER_HOUR, "diskMaxUsedSpaceRatio": "1"},
            drill="0.50",
        ),
        "full": prepare(tmp, "full", {"deleteWhen": OTHER_HOUR}, drill="0.95", half=True),
        # the real broker measures the real disk: at 95 % its space rule starts only past 85 %
        # (diskSpaceCleanForciblyRatio), so a busy test disk does not add deletions to the hour's
        "mirror": prepare(
            tmp, "mirror", {"fileReservedTime": "1", "deleteWhen": THIS_HOUR, "diskMaxUsedSpaceRatio": "95"}
        ),
    }
    started = []
    try:
        if HAVE_JAVA:
            made["mirror"].real, made["mirror"].jvm = start_real(tmp, made["mirror"])
        for case in made.values():
            started.append(case.server.start())
        yield made
    finally:
        for server in started:
            server.kill()
        if made["mirror"].jvm is not None:
            made["mirror"].jvm.stop()


def start_real(tmp: Path, case: Case) -> tuple[Path, Jvm]:
    """The real 4.9.8 broker over a copy of the case's store (mtimes kept), with the case's keys."""
    real = tmp / "real" / "store"
    shutil.copytree(case.store, real, copy_function=sparse_copy)  # the mtimes come along
    port = broker_port()
    keys = read_properties(case.server.conf) if case.server.conf else {}
    keys.update(brokerName="real-retention", brokerId="0", listenPort=str(port), haListenPort=str(port + 1))
    conf = tmp / "real" / "broker.conf"
    conf.write_text(
        "".join(
            f"{k}={v}\n" for k, v in {**keys, "brokerIP1": "127.0.0.1", "storePathRootDir": str(real)}.items()
        )
    )
    env = {k: v for k, v in os.environ.items() if k != "JAVA_OPT_EXT"}
    env["ORACLE_STATE_DIR"] = str(tmp / "real" / "state")
    jvm = Jvm([str(KIT / "bin" / "broker"), "-c", str(conf)], tmp / "real" / "broker.out", env)
    jvm.wait_for("boot success")
    return real, jvm


def initial_commitlog(case: Case) -> list[str]:
    """The CommitLog file names of the store before it was served (a round may have run since)."""
    return sorted(path.split("/", 1)[1] for path in case.before if path.startswith("commitlog/"))


def deleted(case: Case) -> set[str]:
    return case.before - store_files(case.store)


def planned(case: Case) -> set[str]:
    return {step["path"] for step in case.plan["steps"]}


@pytest.mark.cpp
@needs_client
def test_expired_files_go_at_a_delete_hour_and_the_remaining_messages_are_consumed(
    cases: dict[str, Case], tmp_path: Path
) -> None:
    case = cases["time"]
    names = initial_commitlog(case)
    wait_until(
        lambda: commitlog_names(case.store) == names[-1:], ROUND_WAIT, "the expired CommitLog files deleted"
    )
    wait_until(lambda: deleted(case) == planned(case), 10, "the consume-queue files deleted as planned")
    assert case.plan["details"]["reasons"] == ["time"]
    assert [f["file"] for f in case.plan["details"]["commitLogFiles"]] == names[:-1]
    low = int(names[-1])
    kept = [p for p in case.placed if p.physical >= low]
    # the queues' minimum offsets moved to the first message kept
    status = json.loads(invoke_rmq("topicStatus", "-n", case.server.namesrv, "-t", TOPIC, "--json").stdout)
    mins = {row["queueId"]: row["minOffset"] for row in status if row["brokerName"] == "broker-time"}
    for queue_id in (0, 1):
        assert mins[queue_id] == min(p.queue_offset for p in kept if p.queue_id == queue_id)
    # the plan named the group that loses unread messages, with the counts per queue
    lost = {(x["group"], x["queueId"]): x["lost"] for x in case.plan["details"]["unreadLost"]}
    assert lost == {("G_BEHIND", q): mins[q] for q in (0, 1)}
    # consumers: the one behind starts at the new minimum, the other where it was; new messages too
    after = [f"new{i}" for i in range(6)]
    behind = Driver(
        tmp_path,
        "behind",
        {"op": "consume", "namesrv": case.server.namesrv, "topic": TOPIC, "group": "G_BEHIND"},
    )
    done = Driver(
        tmp_path, "done", {"op": "consume", "namesrv": case.server.namesrv, "topic": TOPIC, "group": "G_DONE"}
    )
    try:
        for consumer in (behind, done):
            consumer.wait_for(lambda ev: any(e.get("started") for e in ev), 30, "a consumer started")
        run_driver(
            tmp_path,
            "produce",
            {"op": "produce", "namesrv": case.server.namesrv, "topic": TOPIC, "keys": after},
        )
        want_behind = {p.key for p in kept} | set(after)
        want_done = {p.key for p in case.placed if p.queue_offset >= 180} | set(after)
        behind.wait_for(
            lambda ev: want_behind <= {e.get("key") for e in ev}, 60, "every message kept, to G_BEHIND"
        )
        done.wait_for(
            lambda ev: want_done <= {e.get("key") for e in ev}, 60, "the unread messages, to G_DONE"
        )
        # what must not come (a message of a deleted file, a second delivery) would come with the
        # pulls that brought these or the next ones, which a loopback broker answers at once; 1 s
        # is several pull rounds, and the exact lists below are the check
        time.sleep(1)
    finally:
        got_behind = [e["key"] for e in behind.stop() if "key" in e]
        got_done = [e["key"] for e in done.stop() if "key" in e]
    assert sorted(got_behind) == sorted(want_behind)
    assert sorted(got_done) == sorted(want_done)


def test_a_disk_fuller_than_the_ratio_deletes_the_expired_files_outside_the_hours(
    cases: dict[str, Case],
) -> None:
    case = cases["space"]
    names = initial_commitlog(case)
    wait_until(
        lambda: commitlog_names(case.store) == names[2:], ROUND_WAIT, "the two old CommitLog files deleted"
    )
    wait_until(lambda: deleted(case) == planned(case), 10, "the files deleted as planned")
    assert case.plan["details"]["reasons"] == ["space"]
    # the young files stay: a round every second (cleanResourceInterval=1000), and one that
    # deleted them would do so within its round; 2 s spans two (fewer on a loaded machine can only
    # weaken this check, not fail a correct broker)
    time.sleep(2)
    assert commitlog_names(case.store) == names[2:]
    config = json.loads(invoke_rmq("getBrokerConfig", "-b", case.server.broker, "--json").stdout)
    props = dict(config[0]["properties"])
    assert (props["diskMaxUsedSpaceRatio"], props["deleteWhen"], props["fileReservedTime"]) == (
        "1",
        OTHER_HOUR,
        "1",
    )


def _invoke(addr: str, request: RemotingCommand) -> RemotingCommand:
    async def go() -> RemotingCommand:
        async with RemotingClient() as client:
            return await client.invoke(addr, request, 10.0)

    return asyncio.run(go())


def _send(addr: str) -> RemotingCommand:
    header = hd.SendMessageRequestHeaderV2(
        a="PG", b=TOPIC, c="TBW102", d=4, e=0, f=0, g=int(time.time() * 1000), h=0, i=""
    )

    async def go() -> RemotingCommand:
        async with RemotingClient() as client:
            request = RemotingCommand.request(
                RC.SEND_MESSAGE_V2, header.to_ext_fields(), b"full?", version=407
            )
            return await client.invoke(addr, request, 10.0)

    return asyncio.run(go())


@pytest.mark.cpp
@needs_client
def test_above_the_warning_level_sends_are_refused_until_space_returns(
    cases: dict[str, Case], tmp_path: Path
) -> None:
    case = cases["full"]
    server = case.server
    assert case.drill is not None
    invoke_rmq("updateTopic", "-b", server.broker, "-t", TOPIC, check=True)
    wait_until(lambda: _send(server.broker).code == RS.SERVICE_NOT_AVAILABLE, ROUND_WAIT, "sends refused")
    assert case.half is not None
    back = hd.ConsumerSendMsgBackRequestHeader(offset=case.placed[-1].physical, group="G_BACK", delay_level=0)
    answer = _invoke(server.broker, RemotingCommand.request(RC.CONSUMER_SEND_MSG_BACK, back))
    assert (answer.code, answer.remark) == (RS.SYSTEM_ERROR, "SERVICE_NOT_AVAILABLE")  # as 4.9.8 words it
    end = hd.EndTransactionRequestHeader(
        producer_group="PG",
        tran_state_table_offset=case.half[1],
        commit_log_offset=case.half[0],
        commit_or_rollback=8,  # COMMIT
        from_transaction_check=False,
        msg_id="",
    )
    answer = _invoke(server.broker, RemotingCommand.request(RC.END_TRANSACTION, end))
    assert (answer.code, answer.remark) == (RS.SERVICE_NOT_AVAILABLE, "Service not available now.")
    answer = _send(server.broker)
    assert answer.remark is not None and answer.remark.startswith(
        "service not available now. It may be caused by one of the following reasons: "
        "the broker's disk is full [CL:  0.95 CQ:  0.95 INDEX:  0.95]"
    )
    status = json.loads(invoke_rmq("brokerStatus", "-b", server.broker, "--json").stdout)
    assert status[0]["table"]["commitLogDiskRatio"] == "0.95"
    clusters = invoke_rmq("clusterList", "-n", server.namesrv).stdout
    assert any("broker-full" in line and "0.9500" in line for line in clusters.splitlines()), clusters
    load = Driver(
        tmp_path,
        "load",
        {"op": "load", "namesrv": server.namesrv, "topic": TOPIC, "prefix": "L", "timeout_ms": 1000},
    )
    try:
        load.wait_for(lambda ev: any("error" in e for e in ev), 30, "the C++ client refused")
        assert not any("id" in e for e in load.events())
        case.drill.write_text("0.50")
        load.wait_for(lambda ev: any("id" in e for e in ev), 30, "the C++ client's sends stored again")
    finally:
        load.stop()
    assert _send(server.broker).code == RS.SUCCESS


@pytest.mark.java
def test_the_real_broker_deletes_the_files_rmq_deletes_and_plans(cases: dict[str, Case]) -> None:
    case = cases["mirror"]
    if case.real is None:
        require("java")
    names = initial_commitlog(case)
    wait_until(lambda: commitlog_names(case.real) == names[2:], ROUND_WAIT, "the real broker's deletion")
    wait_until(lambda: commitlog_names(case.store) == names[2:], 30, "rmq serve's deletion")
    # the consume queues follow the CommitLog in the same round, the real broker's a moment later
    wait_until(
        lambda: case.before - store_files(case.real) == deleted(case) == planned(case),
        30,
        "the real broker's deletions as rmq's and its plan",
    )
    deleted_real = case.before - store_files(case.real)
    assert deleted_real == deleted(case) == planned(case)
    assert {p for p in planned(case) if p.startswith("commitlog/")} == {f"commitlog/{n}" for n in names[:2]}
    assert any(p.startswith("consumequeue/") for p in planned(case))
