"""The order in which 5.1.1's mqadmin visits a group's members (``CommandUtil``'s ``HashSet``).

getBrokerEpoch prints one block per address in that order; a CI run once listed the two members
of a controller-mode pair in the other order than the real mqadmin, whose addresses fell in one
bucket of the set (so the set kept the ``HashMap<Long, String>``'s id order).
"""

from __future__ import annotations

import json

from formats.javahash import hashmap_spread, long_hash, string_hash
from rmqcli.admin.broker import member_addresses
from rmqcli.remoting import json_body as jb


def cluster(groups: dict[str, dict[int, str]]) -> jb.ClusterInfo:
    """The ClusterInfo a name server sends (GET_BROKER_CLUSTER_INFO), ids as JSON object keys."""
    body = {
        "brokerAddrTable": {
            name: {"brokerName": name, "cluster": "C", "brokerAddrs": {str(i): a for i, a in addrs.items()}}
            for name, addrs in groups.items()
        },
        "clusterAddrTable": {"C": list(groups)},
    }
    return jb.decode(jb.ClusterInfo, json.dumps(body))


def bucket(addr: str) -> int:
    return hashmap_spread(string_hash(addr)) & 15


def test_one_bucket_keeps_the_id_order_whatever_order_the_name_server_listed() -> None:
    """The pair of the failed run: both in bucket 8, so id 0 comes first even when the name
    server's JSON listed id 2 first."""
    first, second = "127.0.0.1:17960", "127.0.0.1:28210"
    assert bucket(first) == bucket(second)
    info = cluster({"broker-a": {2: second, 0: first}})
    assert list(info.broker_addr_table["broker-a"].broker_addrs) == [2, 0]  # as listed
    assert member_addresses(info, ["broker-a"]) == [first, second]


def test_buckets_decide_over_ids() -> None:
    master, slave = "127.0.0.1:10911", "127.0.0.1:10914"
    assert bucket(master) > bucket(slave)
    assert member_addresses(cluster({"g": {0: master, 1: slave}}), ["g"]) == [slave, master]


def test_several_groups_share_one_set() -> None:
    groups = {
        "a": {0: "127.0.0.1:17960", 1: "127.0.0.1:10914"},
        "b": {0: "127.0.0.1:10911", 1: "127.0.0.1:28210"},
    }
    addrs = member_addresses(cluster(groups), ["a", "b", "missing"])
    assert sorted(addrs) == sorted(a for g in groups.values() for a in g.values())
    assert [bucket(a) for a in addrs] == sorted(bucket(a) for a in addrs)
    # 17960 and 28210 share bucket 8: group a's member was added first
    assert addrs.index("127.0.0.1:17960") < addrs.index("127.0.0.1:28210")


def test_long_hash_is_javas() -> None:
    """``Long.hashCode``: ``(int) (value ^ (value >>> 32))`` (the JDK's documented definition)."""
    assert [long_hash(v) for v in (0, 2, -1, 1 << 32, (1 << 63) - 1, -(1 << 63))] == [
        0,
        2,
        0,
        1,
        -(1 << 31),
        -(1 << 31),
    ]
