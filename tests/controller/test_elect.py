"""``DefaultElectPolicy`` (controller.md §3.5): in-sync set first, unclean election only when
enabled, the old master kept, a preferred broker, then epoch, offset and priority. The tie and
overflow cases give the broker a 5.1.1 controller picks for the same inputs."""

from __future__ import annotations

from rmqcli.controller.elect import DefaultElectPolicy, compare_live_info
from rmqcli.controller.heartbeat import BrokerLiveInfo


def info(broker_id: int, epoch: int = 1, offset: int = 0, priority: int = 2**31 - 1) -> BrokerLiveInfo:
    return BrokerLiveInfo(
        "broker-a", f"10.0.0.{broker_id}:10911", broker_id, 0, 10_000, None, epoch, offset, priority
    )


def policy(*alive: BrokerLiveInfo) -> DefaultElectPolicy:
    table = {i.broker_id: i for i in alive}
    return DefaultElectPolicy(
        alive=lambda cluster, name, broker_id: broker_id in table,
        live_info=lambda cluster, name, broker_id: table.get(broker_id),
    )


def elect(p: DefaultElectPolicy, in_sync, all_replicas=None, old=None, preferred=None):  # noqa: ANN001, ANN201
    return p.elect("DefaultCluster", "broker-a", in_sync, all_replicas, old, preferred)


def test_alive_in_sync_old_master_stays() -> None:
    p = policy(info(1, epoch=1, offset=10), info(2, epoch=5, offset=999))
    assert elect(p, {1, 2}, old=1) == 1


def test_dead_master_replaced_by_the_one_alive_in_sync_slave() -> None:
    p = policy(info(2), info(3, epoch=9, offset=10**9))  # 3 is alive but not in sync
    assert elect(p, {1, 2}, old=1) == 2


def test_no_in_sync_candidate_without_unclean_election() -> None:
    p = policy(info(3, epoch=9))
    assert elect(p, {1, 2}, all_replicas=None, old=1) is None


def test_no_in_sync_candidate_with_unclean_election() -> None:
    p = policy(info(3, epoch=2, offset=50), info(4, epoch=2, offset=70))
    assert elect(p, {1, 2}, all_replicas={1, 2, 3, 4}, old=1) == 4


def test_unclean_tried_only_when_in_sync_gives_nobody() -> None:
    p = policy(info(2, epoch=1, offset=5), info(3, epoch=9, offset=10**9))
    assert elect(p, {1, 2}, all_replicas={1, 2, 3}, old=1) == 2


def test_larger_epoch_first_then_larger_offset_then_smaller_priority() -> None:
    assert elect(policy(info(1, 1, 5000), info(2, 3, 10), info(3, 2, 9999)), {1, 2, 3}) == 2
    assert elect(policy(info(1, 2, 0), info(2, 2, 1000)), {1, 2}) == 2
    assert elect(policy(info(1, 1, 5, 9), info(2, 1, 5, 3), info(3, 1, 5, 4)), {1, 2, 3}) == 2


def test_preferred_broker() -> None:
    p = policy(info(1, epoch=9), info(2, epoch=1), info(3, epoch=1))
    assert elect(p, {1, 2, 3}, old=1, preferred=3) == 3  # even over the live old master
    assert elect(p, {1, 2, 3}, old=1, preferred=1) == 1
    assert elect(p, {1, 2}, old=1, preferred=3) is None  # not in sync: no fallback to 1 or 2
    assert elect(p, {1, 2}, all_replicas={1, 2, 3}, old=1, preferred=3) == 3  # unclean try finds it
    assert elect(policy(info(1), info(2)), {1, 2}, preferred=7) is None  # preferred not alive


def test_ties_merge_and_the_first_inserted_wins() -> None:
    # all equal: the TreeSet keeps the first id in HashSet order
    assert elect(policy(info(3, 1, 100, 7), info(2, 1, 100, 7), info(1, 1, 100, 7)), {3, 2, 1}) == 1


def test_offset_difference_cast_to_int() -> None:
    # 3e9 - 0 cast to int is positive: 5.1.1 ranks the empty broker 1 first
    assert elect(policy(info(1, 2, 0), info(2, 2, 3_000_000_000)), {1, 2}) == 1
    offsets = [0, 2_147_483_658, 4_294_967_316, 1_500_000_000, 3_700_000_000]
    assert elect(policy(*(info(i + 1, 1, o) for i, o in enumerate(offsets))), {1, 2, 3, 4, 5}) == 4
    offsets = [3_700_000_000, 1_500_000_000, 0, 4_294_967_316, 2_147_483_658, 100, 2_500_000_000]
    assert elect(policy(*(info(i + 1, 1, o) for i, o in enumerate(offsets))), set(range(1, 8))) == 2


def test_priority_difference_overflows() -> None:
    # MAX_VALUE - (-1) wraps to MIN_VALUE: the comparator ranks the MAX_VALUE broker as better
    assert compare_live_info(info(1, priority=2**31 - 1), info(2, priority=-1)) < 0
    assert compare_live_info(info(2, priority=-1), info(1, priority=2**31 - 1)) < 0
    # so which one the TreeSet puts first depends on insertion: 1 is the root, 2 goes left of it
    assert elect(policy(info(1, priority=2**31 - 1), info(2, priority=-1)), {1, 2}) == 2


def test_without_live_info_the_first_alive_id_in_hash_order() -> None:
    # 35 hashes to bucket 3, 20 to bucket 4: a HashSet iterates 35 first
    p = DefaultElectPolicy(alive=lambda c, n, i: i != 1)
    assert p.elect("c", "b", {20, 1, 35}, None, None, None) == 35


def test_without_alive_predicate_nobody_is_filtered() -> None:
    table = {1: info(1, epoch=1), 2: info(2, epoch=4)}
    p = DefaultElectPolicy(live_info=lambda c, n, i: table[i])
    assert p.elect("c", "b", {1, 2}, None, None, None) == 2
