"""The text of the controller commands, as 5.1.1's ``tools/.../command/controller`` and
``GetSyncStateSetSubCommand`` print it (controller.md §8)."""

from __future__ import annotations

from typing import Any


def _java(value: object) -> str:
    """``String.format("%s")`` / ``%d`` of a possibly null boxed value."""
    return "null" if value is None else str(value)


def get_controller_meta_data(meta: Any) -> str:
    out = [
        f"\n#ControllerGroup\t{_java(meta.group)}",
        f"\n#ControllerLeaderId\t{_java(meta.controller_leader_id)}",
        f"\n#ControllerLeaderAddress\t{_java(meta.controller_leader_address)}",
    ]
    out += [f"\n#Peer:\t{peer}" for peer in meta.peers]
    return "".join(out) + "\n"


def _replica(r: Any) -> str:
    return (
        f"ReplicaIdentity{{brokerName='{r.broker_name}', brokerId={r.broker_id}, "
        f"brokerAddress='{_java(r.broker_address)}', alive={'true' if r.alive else 'false'}}}"
    )


def get_sync_state_set(groups: list[Any]) -> str:
    out = []
    for g in groups:
        out.append(
            f"\n#brokerName\t{g.broker_name}\n#MasterBrokerId\t{_java(g.master_broker_id)}\n"
            f"#MasterAddr\t{_java(g.master_address)}\n#MasterEpoch\t{g.master_epoch}\n"
            f"#SyncStateSetEpoch\t{g.sync_state_set_epoch}\n#SyncStateSetNums\t{len(g.in_sync_replicas)}\n"
        )
        out += [f"\nInSyncReplica:\t{_replica(r)}\n" for r in g.in_sync_replicas]
        out += [f"\nNotInSyncReplica:\t{_replica(r)}\n" for r in g.not_in_sync_replicas]
    return "".join(out)


def properties_order(keys: list[str]) -> list[str]:
    """The order a ``java.util.Properties`` iterates ``keys`` in: its ``ConcurrentHashMap``'s
    buckets, as a ``HashMap``'s (same spread, same growth), except that it grows at 3/4 full rather
    than past it (so at 12, 24, 48, ... keys the table is already twice as large)."""
    from formats.javahash import hashmap_order

    n, twelfths = len(keys), len(keys) // 12
    full = n >= 12 and n % 12 == 0 and twelfths & (twelfths - 1) == 0  # 12, 24, 48, ...: 3/4 of the table
    return hashmap_order(keys, grown_to=n + 1 if full else 0)


def get_controller_config(configs: list[Any]) -> str:
    """``GetControllerConfigSubCommand``: each controller's settings as mqadmin reads them back
    into a ``Properties`` (``MixAll.string2Properties``) and prints them, in its order."""
    out = []
    for c in configs:
        out.append(f"============{c.addr}============\n")
        out += [f"{key:<50}=  {c.properties[key]}\n" for key in properties_order(list(c.properties))]
    return "".join(out)


def update_controller_config(addrs: list[str], key: str, value: str) -> str:
    return f"update controller config success![{', '.join(addrs)}]\n{key} : {value}\n"


def elect_master(elected: Any) -> str:
    return (
        f"\n#ClusterName\t{elected.cluster_name}\n#BrokerName\t{elected.broker_name}"
        f"\n#BrokerMasterAddr\t{_java(elected.master_address)}\n#MasterEpoch\t{_java(elected.master_epoch)}"
        f"\n#SyncStateSetEpoch\t{_java(elected.sync_state_set_epoch)}\n"
    )


def clean_broker_metadata(broker_name: str) -> str:
    return f"clear broker {broker_name} metadata from controller success! \n"
