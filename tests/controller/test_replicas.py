"""The controller's replicated state and request checks (controller.md §2.5-§2.16, §3.1-§3.5)."""

from __future__ import annotations

import pytest

from rmqcli.controller import events as ev
from rmqcli.controller.bodies import BrokerMemberGroup, ElectMasterResponseBody, ReplicaIdentity, SyncStateSet
from rmqcli.controller.elect import DefaultElectPolicy
from rmqcli.controller.heartbeat import BrokerLiveInfo
from rmqcli.controller.replicas import ReplicasInfoManager
from rmqcli.errors import CorruptDataError

C, A = "DefaultCluster", "broker-a"
ADDR = {1: "127.0.0.1:30911", 2: "127.0.0.1:30921", 3: "127.0.0.1:30931"}


def alive_of(*ids: int):  # noqa: ANN201
    return lambda cluster, name, broker_id: broker_id in ids


def policy(*ids: int, epochs: dict[int, tuple[int, int]] | None = None) -> DefaultElectPolicy:
    epochs = epochs or {}

    def live(cluster: str | None, name: str, broker_id: int) -> BrokerLiveInfo:
        epoch, offset = epochs.get(broker_id, (1, 0))
        return BrokerLiveInfo(name, ADDR.get(broker_id), broker_id, 0, 10_000, None, epoch, offset)

    return DefaultElectPolicy(alive=alive_of(*ids), live_info=live)


def apply_id(broker_id: int) -> ev.ApplyBrokerIdEvent:
    return ev.ApplyBrokerIdEvent(
        C, A, ADDR[broker_id], broker_id, f"{ADDR[broker_id]};17000000000{broker_id:02d}"
    )


def group_of_three() -> ReplicasInfoManager:
    """Ids 1-3 registered, 1 elected, in-sync set {1, 2}: master epoch 1, set epoch 2."""
    m = ReplicasInfoManager()
    m.apply_all(
        [
            apply_id(1),
            apply_id(2),
            apply_id(3),
            ev.ElectMasterEvent(A, True, 1),
            ev.AlterSyncStateSetEvent(A, {1, 2}),
        ]
    )
    return m


def commit(m: ReplicasInfoManager, result) -> None:  # noqa: ANN001
    """What the leader does after DLedger commits: every controller applies the entries."""
    for body in [ev.encode(e) for e in result.events]:
        m.apply(ev.decode(body))


# --- replay (§3.2, §3.4) -------------------------------------------------------------------------


def test_replaying_entries_rebuilds_the_state() -> None:
    log = [
        b"",  # the first leader's empty entry
        ev.encode(apply_id(1)),
        ev.encode(apply_id(2)),
        ev.encode(ev.ElectMasterEvent(A, True, 1)),
        ev.encode(ev.AlterSyncStateSetEvent(A, frozenset({1, 2}))),
        ev.encode(ev.ElectMasterEvent(A, False)),  # master gone, nobody electable
        ev.encode(ev.UpdateBrokerAddressEvent(C, A, "10.9.9.9:10911", 2)),
        ev.encode(ev.ElectMasterEvent(A, True, 2)),
        ev.encode(apply_id(3)),
    ]
    m = ReplicasInfoManager()
    for body in log:
        event = ev.decode_entry(body)
        if event is not None:
            m.apply(event)
    info, replicas = m.sync_state_info[A], m.replica_info[A]
    assert (info.master_broker_id, info.master_epoch, info.sync_state_set_epoch) == (2, 3, 3)
    assert info.sync_state_set == {2}
    assert replicas.next_assign_broker_id == 4
    assert replicas.broker_id_info[2] == ("10.9.9.9:10911", "127.0.0.1:30921;1700000000002")
    assert replicas.cluster_name == C


def test_elect_event_not_elected_keeps_the_set() -> None:
    m = group_of_three()
    m.apply(ev.ElectMasterEvent(A, False))
    info = m.sync_state_info[A]
    assert (info.master_broker_id, info.master_epoch, info.sync_state_set, info.sync_state_set_epoch) == (
        None,
        2,
        {1, 2},
        2,
    )


def test_counter_counts_adds_not_max_and_ignores_known_ids() -> None:
    m = ReplicasInfoManager()
    m.apply_all([apply_id(1), ev.ApplyBrokerIdEvent(C, A, "x:1", 7, "x:1;1"), apply_id(1)])
    assert m.replica_info[A].next_assign_broker_id == 3
    assert m.replica_info[A].broker_id_info[1] == (ADDR[1], "127.0.0.1:30911;1700000000001")


def test_events_for_unknown_groups() -> None:
    m = ReplicasInfoManager()
    m.apply(ev.ElectMasterEvent("nope", True, 1))
    m.apply(ev.AlterSyncStateSetEvent("nope", frozenset({1})))
    m.apply(ev.CleanBrokerDataEvent("nope", frozenset({1})))
    assert m.replica_info == {} and m.sync_state_info == {}
    with pytest.raises(CorruptDataError, match="for broker group 'nope', which has no replicas"):
        m.apply(ev.UpdateBrokerAddressEvent(C, "nope", "a:1", 1))


def test_clean_some_ids_and_the_whole_group() -> None:
    m = group_of_three()
    m.apply(ev.CleanBrokerDataEvent(A, frozenset({2, 3})))
    assert set(m.replica_info[A].broker_id_info) == {1}
    assert m.sync_state_info[A].sync_state_set == {1}
    m.apply(ev.CleanBrokerDataEvent(A))
    assert A not in m.replica_info and A not in m.sync_state_info


def test_clean_emptying_the_set_leaves_the_group_in_one_table() -> None:
    m = group_of_three()
    m.apply(ev.CleanBrokerDataEvent(A, frozenset({1, 2})))
    assert set(m.replica_info[A].broker_id_info) == {3} and A not in m.sync_state_info
    assert not m.contains(A)
    assert m.get_next_broker_id(C, A).header["nextBrokerId"] == 4  # the replica table still answers
    m.apply(ev.ApplyBrokerIdEvent(C, A, "h:4", 4, "h:4;1"))  # not contained: both tables start afresh
    assert set(m.replica_info[A].broker_id_info) == {4}
    assert m.replica_info[A].next_assign_broker_id == 2
    assert m.sync_state_info[A].master_epoch == 0


# --- 1013, 1012 (§2.15, §2.16) -------------------------------------------------------------------


def test_apply_broker_id() -> None:
    m = ReplicasInfoManager()
    r = m.apply_broker_id(C, A, 2, "127.0.0.1:30921;1")
    assert r.code == 2014 and not r.events
    assert (
        r.remark
        == "Broker-set: broker-a hasn't been registered in controller, but broker try to apply brokerId: 2"
    )
    assert r.header == {"clusterName": C, "brokerName": A}
    r = m.apply_broker_id(C, A, 1, "127.0.0.1:30911;1700000000000")
    assert r.code == 0
    assert r.events == [ev.ApplyBrokerIdEvent(C, A, "127.0.0.1:30911", 1, "127.0.0.1:30911;1700000000000")]
    commit(m, r)
    assert m.get_next_broker_id(C, A).header == {"clusterName": C, "brokerName": A, "nextBrokerId": 2}
    assert m.apply_broker_id(C, A, 1, "127.0.0.1:30911;1700000000000").code == 0  # same check code: a retry
    r = m.apply_broker_id(C, A, 1, "127.0.0.1:30999;5")
    assert (r.code, r.remark, r.events) == (2014, "Fail to apply brokerId: 1 in broker-set: broker-a", [])
    assert m.apply_broker_id(C, A, 5, "h:5;5").code == 0  # any unused id of a known group


def test_next_broker_id_of_unknown_group_is_1() -> None:
    assert ReplicasInfoManager().get_next_broker_id(C, "x").header["nextBrokerId"] == 1


# --- 1003 (§2.7) ---------------------------------------------------------------------------------


def test_register_broker() -> None:
    m = group_of_three()
    r = m.register_broker(C, "broker-b", 1, ADDR[1], alive_of(1))
    assert (r.code, r.remark) == (2010, "Broker-set: broker-b hasn't been registered in controller")
    r = m.register_broker(C, A, 9, "h:9", alive_of(1))
    assert (r.code, r.remark) == (2010, "BrokerId: 9 hasn't been registered in broker-set: broker-a")
    r = m.register_broker(C, A, 2, ADDR[2], alive_of(1, 2))
    assert r.code == 0 and r.events == []
    assert r.header == {
        "clusterName": C,
        "brokerName": A,
        "masterBrokerId": 1,
        "masterAddress": ADDR[1],
        "masterEpoch": 1,
        "syncStateSetEpoch": 2,
    }
    assert r.body == SyncStateSet(frozenset({1, 2}), 2)
    r = m.register_broker(C, A, 2, "10.0.0.2:10911", alive_of(2))  # master dead, new address
    assert r.header == {"clusterName": C, "brokerName": A}
    assert r.events == [ev.UpdateBrokerAddressEvent(C, A, "10.0.0.2:10911", 2)]


# --- 1001 (§2.5) ---------------------------------------------------------------------------------


def alter(m: ReplicasInfoManager, new_set, master=1, master_epoch=1, set_epoch=2, alive=(1, 2, 3)):  # noqa: ANN001, ANN201
    return m.alter_sync_state_set(A, master, master_epoch, new_set, set_epoch, alive_of(*alive))


def test_alter_sync_state_set_success() -> None:
    m = group_of_three()
    r = alter(m, [1, 2, 3])
    assert (r.code, r.header, r.body) == (
        0,
        {"newSyncStateSetEpoch": 3},
        SyncStateSet(frozenset({1, 2, 3}), 3),
    )
    assert r.events == [ev.AlterSyncStateSetEvent(A, frozenset({1, 2, 3}))]
    commit(m, r)
    assert (m.sync_state_info[A].sync_state_set, m.sync_state_info[A].sync_state_set_epoch) == ({1, 2, 3}, 3)
    assert alter(m, [1, 2, 3], set_epoch=2).code == 2013  # equal sets are checked before the epoch


@pytest.mark.parametrize(
    ("kwargs", "code", "remark"),
    [
        (
            {"new_set": [2, 1]},
            2013,
            "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet",
        ),
        (
            {"new_set": [2, 3], "master": 2},
            2002,
            "Rejecting alter syncStateSet request because the current leader is:{1}, not {2}",
        ),
        (
            {"new_set": [1], "master_epoch": 0},
            2000,
            "Rejecting alter syncStateSet request because the current master epoch is:{1}, not {0}",
        ),
        (
            {"new_set": [1], "set_epoch": 1},
            2001,
            "Rejecting alter syncStateSet request because the current syncStateSet epoch is:{2}, not {1}",
        ),
        (
            {"new_set": [1, 2, 4]},
            2003,
            "Rejecting alter syncStateSet request because the replicas {4} don't exist",
        ),
        (
            {"new_set": [1, 2, 3], "alive": (1, 2)},
            2006,
            "Rejecting alter syncStateSet request because the replicas {3} don't alive",
        ),
        (
            {"new_set": [2, 3]},
            2013,
            "Rejecting alter syncStateSet request because the newSyncStateSet don't contains origin "
            "leader {1}",
        ),
    ],
)
def test_alter_sync_state_set_refusals(kwargs: dict, code: int, remark: str) -> None:
    m = group_of_three()
    r = alter(m, **kwargs)
    assert (r.code, r.remark, r.events, r.header) == (code, remark, [], {"newSyncStateSetEpoch": 0})


def test_alter_sync_state_set_check_order() -> None:
    m = group_of_three()
    # wrong master, wrong epochs and an unknown id at once: the master check answers
    assert alter(m, [2, 9], master=2, master_epoch=7, set_epoch=7).code == 2002
    assert alter(m, [1, 9], master_epoch=7, set_epoch=7).code == 2000
    assert alter(m, [1, 9], set_epoch=7).code == 2001
    unknown = m.alter_sync_state_set("broker-x", 1, 1, [1], 2, alive_of(1))
    assert (unknown.code, unknown.remark) == (2013, "Broker metadata is not existed")


# --- 1002 (§2.6, §3.5) ---------------------------------------------------------------------------


def test_first_election_takes_the_asking_broker_unchecked() -> None:
    m = ReplicasInfoManager()
    m.apply_all([apply_id(1), apply_id(2)])
    r = m.elect_master(A, 2, False, policy())  # nobody alive: the first election does not look
    assert r.code == 0
    assert r.header == {
        "masterBrokerId": 2,
        "masterAddress": ADDR[2],
        "masterEpoch": 1,
        "syncStateSetEpoch": 1,
    }
    assert r.body == ElectMasterResponseBody(
        frozenset({2}), BrokerMemberGroup(C, A, {1: ADDR[1], 2: ADDR[2]})
    )
    assert r.events == [ev.ElectMasterEvent(A, True, 2)]


def test_elect_unknown_group() -> None:
    r = ReplicasInfoManager().elect_master(A, 1, False, policy(1))
    assert (r.code, r.remark, r.events) == (2010, "Broker hasn't been registered", [])


def test_elect_old_master_still_alive() -> None:
    m = group_of_three()
    r = m.elect_master(A, 2, False, policy(1, 2))
    assert r.code == 2011
    assert r.remark == "The old master 1 is still alive, not need to elect new master for broker broker-a"
    assert r.header == {
        "masterBrokerId": 1,
        "masterAddress": ADDR[1],
        "masterEpoch": 1,
        "syncStateSetEpoch": 2,
    }
    assert r.body == ElectMasterResponseBody(frozenset({1, 2}))
    assert r.events == []


def test_elect_after_master_death() -> None:
    m = group_of_three()
    r = m.elect_master(A, None, False, policy(2, 3, epochs={3: (9, 9)}))  # controller-triggered
    assert r.code == 0 and r.events == [ev.ElectMasterEvent(A, True, 2)]
    assert r.header == {
        "masterBrokerId": 2,
        "masterAddress": ADDR[2],
        "masterEpoch": 2,
        "syncStateSetEpoch": 3,
    }
    commit(m, r)
    info = m.sync_state_info[A]
    assert (info.master_broker_id, info.sync_state_set, info.master_epoch, info.sync_state_set_epoch) == (
        2,
        {2},
        2,
        3,
    )


def test_elect_nobody_electable() -> None:
    m = group_of_three()
    r = m.elect_master(A, 3, False, policy(3))  # broker-triggered: 3 is alive but not in sync
    assert (r.code, r.remark, r.events) == (2012, "Failed to elect a new master", [])
    r = m.elect_master(A, None, False, policy(3))  # controller-triggered: the master is dropped
    assert (r.code, r.remark) == (2004, "Old master has down and failed to elect a new broker master")
    assert r.events == [ev.ElectMasterEvent(A, False)]
    commit(m, r)
    assert (m.sync_state_info[A].master_broker_id, m.sync_state_info[A].master_epoch) == (None, 2)


def test_elect_unclean_when_enabled() -> None:
    m = group_of_three()
    m.enable_elect_unclean_master = True
    r = m.elect_master(A, None, False, policy(3))
    assert r.code == 0 and r.events == [ev.ElectMasterEvent(A, True, 3)]


def test_admin_designated_election() -> None:
    m = group_of_three()
    r = m.elect_master(A, 2, True, policy(1, 2))  # mqadmin electMaster -b 2 while 1 is alive
    assert r.code == 0 and r.header["masterBrokerId"] == 2 and r.header["masterEpoch"] == 2
    r = m.elect_master(A, 3, True, policy(1, 2, 3))  # 3 is not in sync
    assert r.code == 2012


# --- 1004, 1006 (§2.8, §2.10) --------------------------------------------------------------------


def test_get_replica_info() -> None:
    m = group_of_three()
    r = m.get_replica_info(A)
    assert r.header == {"masterBrokerId": 1, "masterAddress": ADDR[1], "masterEpoch": 1}
    assert r.body == SyncStateSet(frozenset({1, 2}), 2)
    m.apply(ev.ElectMasterEvent(A, False))
    assert m.get_replica_info(A).header == {"masterEpoch": 2}
    r = m.get_replica_info("broker-x")
    assert (r.code, r.remark) == (2008, "Broker metadata is not existed")


def test_get_sync_state_data() -> None:
    m = group_of_three()
    r = m.get_sync_state_data(["broker-x", A], alive_of(1, 3))
    assert list(r.body.replicas_info_table) == [A]
    info = r.body.replicas_info_table[A]
    assert (info.master_broker_id, info.master_address, info.master_epoch, info.sync_state_set_epoch) == (
        1,
        ADDR[1],
        1,
        2,
    )
    assert info.in_sync_replicas == [
        ReplicaIdentity(A, 1, ADDR[1], True),
        ReplicaIdentity(A, 2, ADDR[2], False),
    ]
    assert info.not_in_sync_replicas == [ReplicaIdentity(A, 3, ADDR[3], True)]


def test_sync_state_data_lists_ids_in_hash_map_order() -> None:
    m = ReplicasInfoManager()
    m.apply_all([ev.ApplyBrokerIdEvent(C, A, f"h:{i}", i, f"h:{i};0") for i in (1, 2, 4)])
    # a HashMap sized for 3 entries has 4 buckets: 4 lands in bucket 0
    r = m.get_sync_state_data([A], alive_of())
    assert [x.broker_id for x in r.body.replicas_info_table[A].not_in_sync_replicas] == [4, 1, 2]


# --- 1011 (§2.14) --------------------------------------------------------------------------------


def test_clean_broker_data_refusals() -> None:
    m = group_of_three()
    r = m.clean_broker_data(C, A, None, False, alive_of())
    assert (r.code, r.remark) == (2009, "Broker broker-a is still alive, clean up failure")
    r = m.clean_broker_data(C, A, "2;x", False, alive_of())
    assert r.code == 2009
    assert r.remark == (
        "Please set the option <brokerControllerIdsToClean> according to the format, exception: "
        'java.lang.NumberFormatException: For input string: "x"'
    )
    r = m.clean_broker_data(C, A, "3;2", False, alive_of(2, 3))
    assert (r.code, r.remark) == (2009, "Broker [broker-a,  2] is still alive, clean up failure")
    r = m.clean_broker_data(C, "broker-x", "1", False, alive_of())
    assert (r.code, r.remark) == (2009, "Broker broker-x is not existed,clean broker data failure.")
    assert all(not x.events for x in [r])


def test_clean_broker_data_events() -> None:
    m = group_of_three()
    r = m.clean_broker_data(C, A, "3;2;", False, alive_of(1))
    assert r.code == 0 and r.events == [ev.CleanBrokerDataEvent(A, frozenset({2, 3}))]
    commit(m, r)
    assert set(m.replica_info[A].broker_id_info) == {1} and m.sync_state_info[A].sync_state_set == {1}
    r = m.clean_broker_data(C, A, "1", True, alive_of(1))  # living brokers too: the list is not read
    assert r.events == [ev.CleanBrokerDataEvent(A, None)]
    commit(m, r)
    assert not m.contains(A) and A not in m.replica_info


def test_scan_need_reelect() -> None:
    m = group_of_three()
    m.apply_all(
        [ev.ApplyBrokerIdEvent(C, "broker-b", "b:1", 1, "b:1;0"), ev.ElectMasterEvent("broker-b", True, 1)]
    )
    assert m.scan_need_reelect_broker_sets(alive_of(2)) == [A]  # broker-b: nobody alive
    assert m.scan_need_reelect_broker_sets(alive_of(1)) == []  # both masters (id 1) alive
