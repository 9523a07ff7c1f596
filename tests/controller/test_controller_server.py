"""``ControllerServer`` in this process over real sockets (controller.md §2, §3.4-§3.8): the answers
of each request with their codes and remarks, a group's life from its first id to a re-election
when its master's connection closes (with the 1008 notice the live broker receives), the state
rebuilt from the log after a restart, and the refusals of a controller that is not the leader."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

from formats.dledger import BODY_OFFSET, EntryHeader
from rmqcli.controller.config import ControllerConfig
from rmqcli.controller.server import ControllerServer
from rmqcli.ops.safety import BACKUP_DIR
from rmqcli.remoting.client import RemotingClient
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.server.connection import Server
from tests.support.serve import free_port

CLUSTER, GROUP = "C1", "broker-a"


def config(tmp: Path, peers: str | None = None) -> ControllerConfig:
    port = free_port()
    return ControllerConfig(
        group="group1",
        peers=peers or f"n0-127.0.0.1:{port}",
        self_id="n0",
        store_path=str(tmp / "store"),
        config_store_path=str(tmp / "controller.properties"),
        mapped_file_size=1 << 20,
    )


@asynccontextmanager
async def controller(cfg: ControllerConfig, lead: bool = True) -> AsyncIterator[tuple[ControllerServer, str]]:
    server = ControllerServer(cfg)
    port = await server.start()
    try:
        if lead:
            for _ in range(500):
                if server.leading:
                    break
                await asyncio.sleep(0.01)
            assert server.leading
        yield server, f"127.0.0.1:{port}"
    finally:
        await server.close()


async def call(
    client: RemotingClient, addr: str, code: int, header=None, body: bytes = b""
) -> RemotingCommand:  # type: ignore[no-untyped-def]  # noqa: E501
    return await client.invoke(addr, RemotingCommand.request(code, header, body), 5.0)


def heartbeat(broker_id: int | None, port: int, **more: str) -> dict[str, str]:
    header = {"clusterName": CLUSTER, "brokerName": GROUP, "brokerAddr": f"127.0.0.1:{port}", **more}
    if broker_id is not None:
        header["brokerId"] = str(broker_id)
    return header


async def join(client: RemotingClient, addr: str, broker_id: int, port: int) -> RemotingCommand:
    """A broker's registration (§5.3): apply its id, register, heartbeat."""
    applied = await call(client, addr, RC.CONTROLLER_APPLY_BROKER_ID, {
        "clusterName": CLUSTER, "brokerName": GROUP, "appliedBrokerId": str(broker_id),
        "registerCheckCode": f"127.0.0.1:{port};{broker_id}"})  # fmt: skip
    assert applied.code == 0, applied
    await call(client, addr, RC.BROKER_HEARTBEAT, heartbeat(broker_id, port))
    return await call(client, addr, RC.CONTROLLER_REGISTER_BROKER, {
        "clusterName": CLUSTER, "brokerName": GROUP, "brokerId": str(broker_id),
        "brokerAddress": f"127.0.0.1:{port}"})  # fmt: skip


def test_the_answers_of_a_single_controller(tmp_path: Path) -> None:
    async def go() -> None:
        cfg = config(tmp_path)
        async with controller(cfg) as (_server, addr), RemotingClient() as client:
            meta = await call(client, addr, RC.CONTROLLER_GET_METADATA_INFO)
            assert (meta.code, meta.ext_fields) == (0, {
                "group": "group1", "controllerLeaderId": "n0", "controllerLeaderAddress": addr,
                "isLeader": "true", "peers": f"n0:{addr};"})  # fmt: skip
            refused = await call(client, addr, RC.BROKER_HEARTBEAT, heartbeat(None, 1))
            assert (refused.code, refused.remark) == (2005, "Heart beat with empty brokerId")
            beat = await call(client, addr, RC.BROKER_HEARTBEAT, heartbeat(1, 1))
            assert (beat.code, beat.remark) == (0, "Heart beat success")
            other = await call(client, addr, RC.GET_BROKER_EPOCH_CACHE)
            assert (other.code, other.remark) == (3, " request type 1007 not supported")
            empty = await call(client, addr, RC.CONTROLLER_GET_SYNC_STATE_DATA)
            assert (empty.code, empty.remark) == (1, "not set any response code")
            no_flag = {"clusterName": CLUSTER, "brokerName": GROUP, "brokerId": "1"}
            missing = await call(client, addr, RC.CONTROLLER_ELECT_MASTER, no_flag)
            assert missing.code == 1 and "designateElect" in (missing.remark or "")
            path = await call(client, addr, RC.UPDATE_CONTROLLER_CONFIG, body=b"configStorePath=/x\n")
            assert (path.code, path.remark) == (16, "Can not update config path")
            updated = await call(
                client, addr, RC.UPDATE_CONTROLLER_CONFIG, body=b"enableElectUncleanMaster=true\n"
            )
            assert updated.code == 0
            text = (await call(client, addr, RC.GET_CONTROLLER_CONFIG)).body.decode()
            assert "enableElectUncleanMaster=true\n" in text and "isProcessReadEvent=false\n" in text
            assert "enableElectUncleanMaster=true\n" in Path(cfg.config_store_path).read_text()

    asyncio.run(go())


def test_a_group_from_its_first_id_to_a_re_election(tmp_path: Path) -> None:
    """Ids 1 and 2, the first elected by its own request, the in-sync set grown by the master;
    when the master's connection closes the other is elected at once and told so (1008)."""

    async def go() -> None:
        notices: list[RemotingCommand] = []
        b2 = Server("b2", lambda request, _conn: notices.append(request))
        b2_port = await b2.start("127.0.0.1", 0)
        async with controller(config(tmp_path)) as (_server, addr), RemotingClient() as client:
            assert (await call(client, addr, RC.CONTROLLER_GET_NEXT_BROKER_ID, {
                "clusterName": CLUSTER, "brokerName": GROUP})).ext_fields["nextBrokerId"] == "1"  # fmt: skip
            first = await join(client, addr, 1, 1111)
            assert first.code == 0 and json.loads(first.body) == {"syncStateSet": [], "syncStateSetEpoch": 0}
            elect = {"clusterName": CLUSTER, "brokerName": GROUP, "brokerId": "1", "designateElect": "false"}
            elected = await call(client, addr, RC.CONTROLLER_ELECT_MASTER, elect)
            assert elected.code == 0 and elected.ext_fields == {
                "masterBrokerId": "1", "masterAddress": "127.0.0.1:1111", "masterEpoch": "1",
                "syncStateSetEpoch": "1"}  # fmt: skip
            async with RemotingClient() as b2_client:  # b2's own connection, kept open
                second = await join(b2_client, addr, 2, b2_port)
                assert second.code == 0 and second.ext_fields["masterBrokerId"] == "1"
                again = await call(client, addr, RC.CONTROLLER_ELECT_MASTER, {**elect, "brokerId": "2"})
                assert again.code == 2011 and again.remark == (
                    "The old master 1 is still alive, not need to elect new master for broker broker-a"
                )
                grow = {"brokerName": GROUP, "masterBrokerId": "1", "masterEpoch": "1"}
                body = json.dumps({"syncStateSet": [1, 2], "syncStateSetEpoch": 1}).encode()
                grown = await call(client, addr, RC.CONTROLLER_ALTER_SYNC_STATE_SET, grow, body)
                assert (grown.code, grown.ext_fields) == (0, {"newSyncStateSetEpoch": "2"})
                stale = await call(client, addr, RC.CONTROLLER_ALTER_SYNC_STATE_SET, grow, body)
                assert stale.code == 2013
                await client.close()  # the master's connection goes: it is inactive at once
                for _ in range(300):
                    if notices:
                        break
                    await asyncio.sleep(0.01)
                (notice,) = notices
                assert notice.code == RC.NOTIFY_BROKER_ROLE_CHANGED and notice.is_oneway
                assert notice.ext_fields == {"masterAddress": f"127.0.0.1:{b2_port}", "masterEpoch": "2",
                                             "syncStateSetEpoch": "3", "masterBrokerId": "2"}  # fmt: skip
                assert json.loads(notice.body) == {"syncStateSet": [2], "syncStateSetEpoch": 3}
                info = await call(b2_client, addr, RC.CONTROLLER_GET_REPLICA_INFO, {"brokerName": GROUP})
                assert info.ext_fields["masterBrokerId"] == "2" and info.ext_fields["masterEpoch"] == "2"
                data = await call(
                    b2_client, addr, RC.CONTROLLER_GET_SYNC_STATE_DATA, body=b'["broker-a","none"]'
                )
                table = json.loads(data.body)["replicasInfoTable"]
                assert list(table) == [GROUP] and table[GROUP]["masterBrokerId"] == 2
                assert [(r["brokerId"], r["alive"]) for r in table[GROUP]["inSyncReplicas"]] == [(2, True)]
                assert [(r["brokerId"], r["alive"]) for r in table[GROUP]["notInSyncReplicas"]] == [
                    (1, False)
                ]
        await b2.close()

    asyncio.run(go())


def test_the_state_is_rebuilt_from_the_log_after_a_restart(tmp_path: Path) -> None:
    cfg = config(tmp_path)

    async def first() -> None:
        async with controller(cfg) as (_server, addr), RemotingClient() as client:
            await join(client, addr, 1, 1111)
            elect = {"clusterName": CLUSTER, "brokerName": GROUP, "brokerId": "1", "designateElect": "false"}
            assert (await call(client, addr, RC.CONTROLLER_ELECT_MASTER, elect)).code == 0

    async def second() -> dict[str, str]:
        async with controller(cfg) as (server, addr), RemotingClient() as client:
            assert server.applied_index >= 3  # apply id, elect, the two leaders' first entries
            info = await call(client, addr, RC.CONTROLLER_GET_REPLICA_INFO, {"brokerName": GROUP})
            assert json.loads(info.body) == {"syncStateSet": [1], "syncStateSetEpoch": 1}
            group = {"clusterName": CLUSTER, "brokerName": GROUP}
            nxt = await call(client, addr, RC.CONTROLLER_GET_NEXT_BROKER_ID, group)
            assert nxt.ext_fields["nextBrokerId"] == "2"
            return info.ext_fields

    asyncio.run(first())
    # the master's connection closed before the controller stopped: nobody else was alive, so the
    # master was lost (ElectMasterEvent(false): epoch 2, the in-sync set kept), as the log replays
    assert asyncio.run(second()) == {"masterEpoch": "2"}


def test_a_controller_without_a_quorum_is_not_the_leader(tmp_path: Path) -> None:
    """Peers that never answer: no leader, so every leader-only request gets 2007 while the
    local ones are answered."""

    async def go() -> None:
        own, a, b = free_port(), free_port(), free_port()
        cfg = replace(config(tmp_path), peers=f"n0-127.0.0.1:{own};n1-127.0.0.1:{a};n2-127.0.0.1:{b}")
        async with controller(cfg, lead=False) as (_server, addr), RemotingClient() as client:
            for code, header in ((RC.CONTROLLER_GET_NEXT_BROKER_ID, {"brokerName": GROUP}),
                                 (RC.CONTROLLER_GET_REPLICA_INFO, {"brokerName": GROUP})):  # fmt: skip
                answer = await call(client, addr, code, header)
                assert (answer.code, answer.remark) == (2007, "The controller is not in leader state")
            meta = await call(client, addr, RC.CONTROLLER_GET_METADATA_INFO)
            assert meta.ext_fields["isLeader"] == "false" and "controllerLeaderId" not in meta.ext_fields
            assert (await call(client, addr, RC.BROKER_HEARTBEAT, heartbeat(1, 1))).code == 0

    asyncio.run(go())


def test_three_controllers_keep_the_state_when_the_leader_goes(tmp_path: Path) -> None:
    """A quorum of three: the leader's answer is committed on a majority; when the leader stops,
    the other two elect a leader of a later term that holds the same groups and goes on."""
    from rmqcli.dledger.node import Timing

    async def go() -> None:
        ports = {n: free_port() for n in ("n0", "n1", "n2")}
        peers = ";".join(f"{n}-127.0.0.1:{p}" for n, p in ports.items())
        timing = Timing(heartbeat_interval_ms=300, max_heartbeat_leak=3)
        servers = {}
        for n in ports:
            cfg = replace(config(tmp_path / n), peers=peers, self_id=n)
            servers[n] = ControllerServer(cfg, timing)
            await servers[n].start()

        async def leader(among: dict[str, ControllerServer]) -> str:
            for _ in range(1000):
                leading = [n for n, s in among.items() if s.leading]
                if leading:
                    return leading[0]
                await asyncio.sleep(0.01)
            raise AssertionError("no leader")

        try:
            first = await leader(servers)
            addr = f"127.0.0.1:{ports[first]}"
            async with RemotingClient() as broker:  # broker 1's connection stays open throughout
                await join(broker, addr, 1, 1111)
                elect = {
                    "clusterName": CLUSTER,
                    "brokerName": GROUP,
                    "brokerId": "1",
                    "designateElect": "false",
                }
                assert (await call(broker, addr, RC.CONTROLLER_ELECT_MASTER, elect)).code == 0
                follower = next(n for n in servers if n != first)
                other = f"127.0.0.1:{ports[follower]}"
                refused = await call(broker, other, RC.CONTROLLER_GET_REPLICA_INFO, {"brokerName": GROUP})
                assert refused.code == 2007
                meta = await call(broker, other, RC.CONTROLLER_GET_METADATA_INFO)
                assert (
                    meta.ext_fields["controllerLeaderId"] == first and meta.ext_fields["isLeader"] == "false"
                )
                term = servers[first].state.curr_term
                await servers.pop(first).close()
                second = await leader(servers)
                assert servers[second].state.curr_term > term
                addr = f"127.0.0.1:{ports[second]}"
                info = await call(broker, addr, RC.CONTROLLER_GET_REPLICA_INFO, {"brokerName": GROUP})
                assert info.ext_fields == {
                    "masterBrokerId": "1",
                    "masterAddress": "127.0.0.1:1111",
                    "masterEpoch": "1",
                }
                group = {"clusterName": CLUSTER, "brokerName": GROUP}
                nxt = await call(broker, addr, RC.CONTROLLER_GET_NEXT_BROKER_ID, group)
                assert nxt.ext_fields["nextBrokerId"] == "2"
                async with RemotingClient() as b2:
                    assert (await join(b2, addr, 2, 2222)).code == 0  # a write commits on the two left
        finally:
            for s in servers.values():
                await s.close()

    asyncio.run(go())


def test_a_torn_last_entry_is_cut_at_the_next_start(tmp_path: Path, caplog) -> None:  # type: ignore[no-untyped-def]
    """A kill in the middle of an append leaves a torn entry after the last sound one: the next
    start cuts it (kept in a backup of controllerStorePath), as DLedger's recovery does, and the
    state replays from the entries before it."""
    cfg = config(tmp_path)

    async def first() -> None:
        async with controller(cfg) as (_server, addr), RemotingClient() as client:
            await join(client, addr, 1, 1111)

    asyncio.run(first())
    data = sorted((Path(cfg.member_home) / "data").iterdir())[-1]
    raw = bytearray(data.read_bytes())
    end = len(raw.rstrip(b"\0"))
    torn = bytes(raw[:30])  # the first 30 bytes of an entry header: a torn next entry
    raw[end : end + len(torn)] = torn
    data.write_bytes(bytes(raw))

    async def second() -> int:
        async with controller(cfg) as (server, addr), RemotingClient() as client:
            group = {"clusterName": CLUSTER, "brokerName": GROUP}
            nxt = await call(client, addr, RC.CONTROLLER_GET_NEXT_BROKER_ID, group)
            assert nxt.ext_fields["nextBrokerId"] == "2"
            return server.applied_index

    assert asyncio.run(second()) >= 1
    lines = [r.getMessage() for r in caplog.records if "recovered the controller's log" in r.getMessage()]
    assert len(lines) == 1 and f"it ends at entry 1 (byte {end})" in lines[0], lines
    after = EntryHeader.parse(data.read_bytes()[end : end + BODY_OFFSET])  # where the torn one was
    assert (after.index, after.pos) == (2, end)  # the new leader's first entry
    backups = [p for p in (tmp_path / "store" / BACKUP_DIR).iterdir() if p.is_dir()]
    assert len(backups) == 1
