"""Cluster, broker and name server commands of mqadmin: clusterList, brokerStatus, getBrokerConfig,
updateBrokerConfig, wipeWritePerm, addWritePerm, getNamesrvConfig, updateNamesrvConfig,
updateKvConfig, deleteKvConfig, cleanExpiredCQ, deleteExpiredCommitLog, cleanUnusedTopic
(protocol.md C.2, C.4.1, C.4.7, C.5; B.2, B.4)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmqcli.admin.session import AdminSession, target_addrs
from rmqcli.errors import BrokerError, NetworkError, NotFoundError, RmqError
from rmqcli.remoting import headers as hd
from rmqcli.remoting.codes import RequestCode


def error_kind(exc: BaseException) -> str:
    """``"network"`` (exit 5) or ``"broker"`` (exit 6, an error response) for a per-broker failure."""
    return "network" if isinstance(exc, NetworkError) else "broker"


def parse_properties(body: bytes) -> list[tuple[str, str]]:
    """Properties text (``MixAll.properties2String``: ``key=value`` lines) as ordered pairs."""
    pairs = []
    for line in body.decode("utf-8", "replace").splitlines():
        text = line.strip()
        if not text or text[0] in "#!":
            continue
        key, _, value = text.partition("=")
        pairs.append((key.strip(), value.strip()))
    return pairs


def properties_text(pairs: dict[str, str]) -> bytes:
    """``MixAll.properties2String``: one ``key=value`` line per entry."""
    return "".join(f"{k}={v}\n" for k, v in pairs.items()).encode("utf-8")


def runtime_tables(session: AdminSession, addrs: list[str]) -> list[dict[str, str] | RmqError]:
    """GET_BROKER_RUNTIME_INFO (28) to each address at once: its KVTable, or the error it met."""
    from rmqcli.remoting import json_body as jb

    out: list[dict[str, str] | RmqError] = []
    for response in session.call_each(addrs, RequestCode.GET_BROKER_RUNTIME_INFO):
        if isinstance(response, RmqError):
            out.append(response)
            continue
        try:
            out.append(jb.decode_or_empty(jb.KVTable, response.body).table)
        except RmqError as exc:
            out.append(exc)
    return out


@dataclass
class ClusterBroker:
    """One broker address of ``clusterList`` with its runtime KV table (C.4.1)."""

    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    runtime: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    error_kind: str | None = None  # "network" or "broker"


def cluster_list(session: AdminSession) -> list[ClusterBroker]:
    """``clusterList``: 106, then 28 to every address; clusters in ``HashMap`` order, broker names
    sorted, ids ascending (C.4.1). A broker that fails keeps its row with ``error`` set."""
    from formats.javahash import hashmap_order

    session._cluster_info = None  # -i repeats: fresh data each round
    info = session.cluster_info()
    rows = []
    for cluster in hashmap_order(list(info.cluster_addr_table)):
        for name in sorted(info.cluster_addr_table[cluster]):
            data = info.broker_addr_table.get(name)
            if data is None:
                continue
            for broker_id in sorted(data.broker_addrs):
                rows.append(ClusterBroker(cluster, name, broker_id, data.broker_addrs[broker_id]))
    for row, kv in zip(rows, runtime_tables(session, [r.addr for r in rows]), strict=True):
        if isinstance(kv, RmqError):
            row.error, row.error_kind = str(kv), error_kind(kv)
        else:
            row.runtime = kv
    return rows


def every_addr(session: AdminSession, broker_addr: str | None, cluster: str | None) -> list[str]:
    """``-b``, else every master and slave of ``-c`` (of every cluster without ``-c``; 106 first)."""
    if broker_addr:
        return [broker_addr.strip()]
    return session.all_addrs_of_cluster(cluster.strip() if cluster else None)


@dataclass
class BrokerStatus:
    addr: str
    table: dict[str, str]


def broker_status(session: AdminSession, broker_addr: str | None, cluster: str | None) -> list[BrokerStatus]:
    """``brokerStatus``: 28 to ``-b``, or to every master and slave of ``-c`` (106 first)."""
    addrs = every_addr(session, broker_addr, cluster)
    out = []
    for addr, kv in zip(addrs, runtime_tables(session, addrs), strict=True):
        if isinstance(kv, RmqError):
            raise kv
        out.append(BrokerStatus(addr, dict(sorted(kv.items()))))
    return out


@dataclass
class HAStatus:
    """GET_BROKER_HA_STATUS (907) of one broker: RocketMQ 5's ``HARuntimeInfo``."""

    addr: str
    info: Any  # json_body.HARuntimeInfo


def ha_status(session: AdminSession, broker_addr: str | None, cluster: str | None) -> list[HAStatus]:
    """``haStatus`` (RocketMQ 5's command): 907 to ``-b``, or to every master of ``-c``. A 4.x
    broker has no such request: its REQUEST_CODE_NOT_SUPPORTED is the error reported."""
    from rmqcli.remoting import json_body as jb

    addrs = target_addrs(session, broker_addr, cluster)
    out = []
    for addr, response in zip(addrs, session.call_each(addrs, RequestCode.GET_BROKER_HA_STATUS), strict=True):
        if isinstance(response, RmqError):
            raise response
        out.append(HAStatus(addr, jb.decode_or_empty(jb.HARuntimeInfo, response.body)))
    return out


def member_addresses(info: Any, names: list[str]) -> list[str]:
    """Every address of the groups ``names``, in the order of 5.1.1 ``CommandUtil``'s ``HashSet``:
    each group's ``brokerAddrs`` (a ``HashMap<Long, String>``) walked in its own order, all added
    to one ``HashSet<String>``, which is then iterated."""
    from formats.javahash import hashmap_order, long_hash

    added: list[str] = []
    for name in names:
        data = info.broker_addr_table.get(name)
        if data is None:
            continue
        for broker_id in hashmap_order(list(data.broker_addrs), long_hash):
            added.append(data.broker_addrs[broker_id])
    return hashmap_order(added)


@dataclass
class BrokerEpochs:
    addr: str
    cache: Any  # json_body.EpochEntryCache


def get_broker_epoch(
    session: AdminSession, broker_name: str | None, cluster: str | None
) -> list[BrokerEpochs]:
    """``getBrokerEpoch`` (5.1.1 ``GetBrokerEpochSubCommand``, controller.md §8.2): every address,
    masters and slaves, of ``-b``'s group or of each group of ``-c``, in the order of the
    ``HashSet`` ``CommandUtil`` collects them in; GET_BROKER_EPOCH_CACHE (1007) to each, the first
    failure failing the command. A broker not in controller mode fails it (5.1.1: SYSTEM_ERROR)."""
    from formats.javahash import hashmap_order
    from rmqcli.remoting import json_body as jb

    info = session.cluster_info()
    if broker_name:
        names = [broker_name.strip()]
    else:
        assert cluster is not None
        names = hashmap_order(info.cluster_addr_table.get(cluster.strip()) or ())
        if not names:
            raise NotFoundError(f"[error] no cluster {cluster.strip()!r} in the name server's cluster info")
    addrs = member_addresses(info, names)
    out = []
    for addr in addrs:
        response = session.call(addr, RequestCode.GET_BROKER_EPOCH_CACHE)
        out.append(BrokerEpochs(addr, jb.decode_or_empty(jb.EpochEntryCache, response.body)))
    return out


@dataclass
class BrokerConfig:
    """GET_BROKER_CONFIG (26) of one broker: its ``dataVersion`` header and the properties."""

    addr: str
    broker_name: str | None
    broker_id: int | None
    master_addr: str | None
    version: str | None
    properties: list[tuple[str, str]]


def get_broker_config(
    session: AdminSession, broker_addr: str | None, cluster: str | None
) -> list[BrokerConfig]:
    """``getBrokerConfig``: ``-b`` one address; ``-c`` every master then its slaves (C.4.7)."""

    targets: list[tuple[str, str | None, int | None, str | None]] = []
    if broker_addr:
        targets.append((broker_addr.strip(), None, None, None))
    elif cluster:
        info = session.cluster_info()
        for name in session.broker_names_of_cluster(cluster.strip()):
            data = info.broker_addr_table.get(name)
            if data is None:
                continue
            master = data.broker_addrs.get(0)
            for broker_id in sorted(data.broker_addrs):
                targets.append((data.broker_addrs[broker_id], name, broker_id, master))
    else:
        from rmqcli.errors import UsageError

        raise UsageError("one of -b/--brokerAddr or -c/--clusterName is required")
    out = []
    for addr, name, broker_id, master in targets:
        response = session.call(addr, RequestCode.GET_BROKER_CONFIG)
        out.append(
            BrokerConfig(
                addr=addr,
                broker_name=name,
                broker_id=broker_id,
                master_addr=master,
                version=response.ext_fields.get("version"),
                properties=parse_properties(response.body),
            )
        )
    return out


def update_broker_config(
    session: AdminSession, key: str, value: str, broker_addr: str | None, cluster: str | None
) -> list[str]:
    """``updateBrokerConfig``: UPDATE_BROKER_CONFIG (25) with ``key=value`` to ``-b`` / ``-c`` masters."""

    body = properties_text({key.strip(): value.strip()})
    done = []
    for addr in target_addrs(session, broker_addr, cluster):
        session.call(addr, RequestCode.UPDATE_BROKER_CONFIG, body=body)
        done.append(addr)
    return done


@dataclass
class WritePermResult:
    """One name server's answer to WIPE (205) / ADD (327) WRITE_PERM_OF_BROKER."""

    namesrv: str
    ok: bool
    topic_count: int | None = None
    error: str | None = None
    error_kind: str | None = None


def _write_perm(session: AdminSession, broker_name: str, wipe: bool) -> list[WritePermResult]:

    name = broker_name.strip()
    header: hd.CommandHeader
    if wipe:
        code = RequestCode.WIPE_WRITE_PERM_OF_BROKER
        header = hd.WipeWritePermOfBrokerRequestHeader(broker_name=name)
        key = "wipeTopicCount"  # WipeWritePermOfBrokerResponseHeader, read leniently
    else:
        code = RequestCode.ADD_WRITE_PERM_OF_BROKER
        header = hd.AddWritePermOfBrokerRequestHeader(broker_name=name)
        key = "addTopicCount"
    out = []
    for addr in session.namesrv:
        try:
            response = session.call(addr, code, header)
        except (NetworkError, BrokerError) as exc:
            out.append(WritePermResult(addr, False, error=str(exc), error_kind=error_kind(exc)))
            continue
        count = response.ext_fields.get(key)
        out.append(WritePermResult(addr, True, int(count) if count and count.lstrip("-").isdigit() else 0))
    return out


def wipe_write_perm(session: AdminSession, broker_name: str) -> list[WritePermResult]:
    """``wipeWritePerm``: 205 to every name server of ``-n``."""
    return _write_perm(session, broker_name, True)


def add_write_perm(session: AdminSession, broker_name: str) -> list[WritePermResult]:
    """``addWritePerm``: 327 to every name server of ``-n``."""
    return _write_perm(session, broker_name, False)


def get_namesrv_config(session: AdminSession) -> dict[str, list[tuple[str, str]]]:
    """``getNamesrvConfig``: GET_NAMESRV_CONFIG (319) of every name server."""

    return {
        addr: parse_properties(session.call(addr, RequestCode.GET_NAMESRV_CONFIG).body)
        for addr in session.namesrv
    }


def update_namesrv_config(session: AdminSession, key: str, value: str) -> list[str]:
    """``updateNamesrvConfig``: UPDATE_NAMESRV_CONFIG (318) with ``key=value`` to every name server."""

    body = properties_text({key.strip(): value.strip()})
    for addr in session.namesrv:
        session.call(addr, RequestCode.UPDATE_NAMESRV_CONFIG, body=body)
    return list(session.namesrv)


def update_kv_config(session: AdminSession, namespace: str, key: str, value: str) -> list[str]:
    """``updateKvConfig``: PUT_KV_CONFIG (100) to every name server."""

    header = hd.PutKVConfigRequestHeader(namespace=namespace.strip(), key=key.strip(), value=value.strip())
    for addr in session.namesrv:
        session.call(addr, RequestCode.PUT_KV_CONFIG, header)
    return list(session.namesrv)


def delete_kv_config(session: AdminSession, namespace: str, key: str) -> list[str]:
    """``deleteKvConfig``: DELETE_KV_CONFIG (102) to every name server."""

    header = hd.DeleteKVConfigRequestHeader(namespace=namespace.strip(), key=key.strip())
    for addr in session.namesrv:
        session.call(addr, RequestCode.DELETE_KV_CONFIG, header)
    return list(session.namesrv)


@dataclass
class CleanResult:
    """The brokers asked and whether every one answered SUCCESS (``success`` / ``false``)."""

    brokers: list[str]
    ok: bool
    errors: list[str] = field(default_factory=list)
    error_kind: str | None = None


def _clean(session: AdminSession, code: int, broker_addr: str | None, cluster: str | None) -> CleanResult:
    addrs = every_addr(session, broker_addr, cluster)
    result = CleanResult(brokers=addrs, ok=True)
    for response in session.call_each(addrs, code):
        if isinstance(response, RmqError):
            result.ok = False
            result.errors.append(str(response))
            result.error_kind = result.error_kind or error_kind(response)
    return result


def clean_expired_cq(session: AdminSession, broker_addr: str | None, cluster: str | None) -> CleanResult:
    """``cleanExpiredCQ``: CLEAN_EXPIRED_CONSUMEQUEUE (306) to ``-b``, or every broker of ``-c`` (all)."""

    return _clean(session, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, broker_addr, cluster)


def delete_expired_commitlog(
    session: AdminSession, broker_addr: str | None, cluster: str | None
) -> CleanResult:
    """``deleteExpiredCommitLog``: DELETE_EXPIRED_COMMITLOG (329) to ``-b`` / ``-c`` brokers."""

    return _clean(session, RequestCode.DELETE_EXPIRED_COMMITLOG, broker_addr, cluster)


def clean_unused_topic(session: AdminSession, broker_addr: str | None, cluster: str | None) -> CleanResult:
    """``cleanUnusedTopic``: CLEAN_UNUSED_TOPIC (316) to ``-b`` / ``-c`` brokers."""

    return _clean(session, RequestCode.CLEAN_UNUSED_TOPIC, broker_addr, cluster)


@dataclass
class GroupMember:
    """One live member of a broker group (GET_BROKER_MEMBER_GROUP, 901) and whether it runs its
    group's delayed delivery and transaction check (``brokerActive``): the master, or the slave
    acting for it under SlaveActingMaster."""

    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    active: str  # "true", "false", or "" when its runtime info could not be read
    error: str | None = None


def broker_member_group(session: AdminSession, cluster: str, broker_name: str) -> list[GroupMember]:
    """901 to the name server (RocketMQ 5's request; a 4.x name server does not answer it), then
    GET_BROKER_RUNTIME_INFO (28) to each member, ids ascending."""
    from rmqcli.remoting import headers as hd
    from rmqcli.remoting import json_body as jb

    header = hd.GetBrokerMemberGroupRequestHeader(cluster_name=cluster, broker_name=broker_name)
    response = session.call_namesrv(RequestCode.GET_BROKER_MEMBER_GROUP, header)
    group = jb.decode_or_empty(jb.GetBrokerMemberGroupResponseBody, response.body).broker_member_group
    members = [
        GroupMember(cluster, broker_name, bid, group.broker_addrs[bid], "")
        for bid in sorted(group.broker_addrs)
    ]
    for member, kv in zip(members, runtime_tables(session, [m.addr for m in members]), strict=True):
        if isinstance(kv, RmqError):
            member.error = str(kv)
        else:
            member.active = kv.get("brokerActive", "")
    return members
