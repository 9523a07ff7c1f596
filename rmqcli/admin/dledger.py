"""DLedger groups from the outside: every member's Raft state (``dledgerStatus``) and a leadership
transfer on request (``leadershipTransfer``, DLedger 0.3.1.2's ``LeadershipTransferCommand``).

The group is found as a 4.9.8 broker describes itself: GET_BROKER_CONFIG (26) of each live broker of
the name gives ``enableDLegerCommitLog``, ``dLegerGroup``, ``dLegerPeers`` and ``dLegerSelfId``.
Each peer is then asked on its DLedger port (``DLedgerRpcNettyService``): METADATA (50000) for the
leader it knows, and a LEADERSHIP_TRANSFER naming no one for its term (``DLedgerServer
.handleLeadershipTransfer`` answers that UNEXPECTED_ARGUMENT with ``currTerm`` and changes nothing).
Index figures come from the broker's runtime info: rmq brokers add ``dLedger*`` keys; a Java broker
only has ``commitLogMaxOffset`` (its committed position, ``DLedgerCommitLog.getMaxOffset``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rmqcli.admin.broker import get_broker_config, runtime_tables
from rmqcli.admin.session import AdminSession
from rmqcli.dledger import protocol as dp
from rmqcli.dledger.runtime_keys import RAFT_KEYS, TEXT_FIELDS
from rmqcli.errors import BrokerError, NetworkError, RmqError, UsageError
from rmqcli.remoting import json_body as jb

TRANSFER_TIMEOUT_S = 10.0  # the leader answers once the transferee leads (or gave up)


@dataclass
class Peer:
    """One member of a DLedger group as ``dledgerStatus`` shows it."""

    broker_name: str
    group: str
    self_id: str
    peer_addr: str
    broker_addr: str | None = None
    role: str | None = None  # LEADER, FOLLOWER, CANDIDATE; None when it did not answer
    term: int | None = None
    leader_id: str | None = None
    begin_index: int | None = None  # the first entry its data files hold (older files cleaned up)
    end_index: int | None = None
    end_term: int | None = None
    committed_index: int | None = None
    committed_pos: int | None = None  # commitLogMaxOffset
    error: str | None = None
    error_kind: str | None = None


@dataclass
class Group:
    """A broker name in DLedger mode: its peers (``dLegerPeers``) in selfId order."""

    broker_name: str
    group: str
    peers: list[Peer] = field(default_factory=list)

    @property
    def leader(self) -> str | None:
        """The selfId that leads by its own account."""
        return next((p.self_id for p in self.peers if p.role == "LEADER"), None)


def parse_peers(text: str) -> dict[str, str]:
    """``dLegerPeers`` (``n0-host:port;n1-host:port``) as selfId -> address (``DLedgerConfig``)."""
    peers = {}
    for item in text.split(";"):
        self_id, sep, addr = item.strip().partition("-")
        if sep and self_id and addr:
            peers[self_id] = addr
    return peers


def dledger_status(session: AdminSession, cluster: str | None, broker_name: str | None) -> list[Group]:
    """Every DLedger group of the cluster (or the one broker name): its peers' state."""
    groups = [g for g in (_group(session, name) for name in _names(session, cluster, broker_name)) if g]
    if broker_name and not groups:
        raise UsageError(f"broker {broker_name} is not in DLedger mode (enableDLegerCommitLog is not true)")
    return groups


def leadership_transfer(
    session: AdminSession, broker_name: str, transferee: str, term: int | None, leader: str | None
) -> dict[str, object]:
    """LEADERSHIP_TRANSFER (51005) to the leader: ``transferee`` takes over in the next term."""
    group = _group(session, broker_name)
    if group is None:
        raise UsageError(f"broker {broker_name} is not in DLedger mode (enableDLegerCommitLog is not true)")
    peers = {p.self_id: p for p in group.peers}
    if transferee not in peers:
        raise UsageError(f"{transferee} is not a peer of group {group.group} ({', '.join(peers)})")
    leader = leader or group.leader
    if leader is None or leader not in peers:
        raise BrokerError(f"group {group.group} has no leader now")
    term = term if term is not None else peers[leader].term
    if transferee == leader:  # nothing to hand over (a Java leader would try to and fail)
        return {
            "group": group.group,
            "from": leader,
            "to": transferee,
            "term": term,
            "code": "ALREADY_LEADER",
        }
    req = dp.LeadershipTransferRequest(
        group=group.group, remote_id=leader, leader_id=leader, term=-1 if term is None else term,
        transfer_id=leader, transferee_id=transferee,
    )  # fmt: skip
    answer = _ask(
        session, peers[leader].peer_addr, dp.DLedgerRequestCode.LEADERSHIP_TRANSFER, req, TRANSFER_TIMEOUT_S
    )
    if isinstance(answer, RmqError):
        raise answer
    code = _code_name(answer.code)
    if answer.code != dp.SUCCESS:
        raise BrokerError(f"leadership transfer {leader} -> {transferee} refused by {leader}: {code}")
    return {"group": group.group, "from": leader, "to": transferee, "term": answer.term, "code": code}


# --- the group ---------------------------------------------------------------------------------
def _names(session: AdminSession, cluster: str | None, broker_name: str | None) -> list[str]:
    if broker_name:
        return [broker_name]
    info = session.cluster_info()
    if cluster:
        return session.broker_names_of_cluster(cluster)
    return sorted(info.broker_addr_table)


def _group(session: AdminSession, broker_name: str) -> Group | None:
    """The group of ``broker_name`` from its live brokers' configs, each peer asked."""
    data = session.cluster_info().broker_addr_table.get(broker_name)
    if data is None:
        raise UsageError(f"no broker named {broker_name} in the name server's cluster info")
    addrs = [data.broker_addrs[i] for i in sorted(data.broker_addrs)]
    configs: dict[str, dict[str, str]] = {}
    for addr in addrs:
        try:
            configs[addr] = dict(get_broker_config(session, addr, None)[0].properties)
        except RmqError:
            continue  # a broker that does not answer is shown through its peer port only
    dledger = {a: c for a, c in configs.items() if c.get("enableDLegerCommitLog", "").lower() == "true"}
    if not dledger:
        return None
    first = next(iter(dledger.values()))
    group = Group(broker_name, first.get("dLegerGroup", ""))
    by_self = {c.get("dLegerSelfId", ""): a for a, c in dledger.items()}
    runtime = dict(zip(addrs, runtime_tables(session, addrs), strict=True))
    for self_id, peer_addr in sorted(parse_peers(first.get("dLegerPeers", "")).items()):
        peer = Peer(broker_name, group.group, self_id, peer_addr, by_self.get(self_id))
        _ask_peer(session, peer)
        kv = runtime.get(peer.broker_addr or "")
        if isinstance(kv, dict):
            _from_runtime(peer, kv)
        group.peers.append(peer)
    return group


def _ask_peer(session: AdminSession, peer: Peer) -> None:
    """METADATA for the leader it knows, the no-one transfer for its term."""
    base = {"group": peer.group, "remote_id": peer.self_id}
    meta = _ask(session, peer.peer_addr, dp.DLedgerRequestCode.METADATA, dp.MetadataRequest(**base))
    if isinstance(meta, RmqError):
        peer.error, peer.error_kind = str(meta), "network" if isinstance(meta, NetworkError) else "broker"
        return
    if meta.code != dp.SUCCESS:
        peer.error, peer.error_kind = f"{peer.peer_addr}: METADATA answered {_code_name(meta.code)}", "broker"
        return
    peer.leader_id = meta.leader_id
    peer.role = (
        "CANDIDATE" if not meta.leader_id else "LEADER" if meta.leader_id == peer.self_id else "FOLLOWER"
    )
    probe = _ask(
        session,
        peer.peer_addr,
        dp.DLedgerRequestCode.LEADERSHIP_TRANSFER,
        dp.LeadershipTransferRequest(**base),
    )
    if not isinstance(probe, RmqError) and probe.code == dp.DLedgerResponseCode.UNEXPECTED_ARGUMENT:
        peer.term = probe.term


def _from_runtime(peer: Peer, kv: dict[str, str]) -> None:
    if "commitLogMaxOffset" in kv:
        peer.committed_pos = int(kv["commitLogMaxOffset"])
    for key, attr in RAFT_KEYS.items():
        value = kv.get(key)
        if value is None or value == "":
            continue
        setattr(peer, attr, value if attr in TEXT_FIELDS else int(value))


def _ask(
    session: AdminSession, addr: str, code: dp.DLedgerRequestCode, body: object, timeout: float | None = None
):  # type: ignore[no-untyped-def]
    """One DLedger request; its decoded answer, or the error met."""
    try:
        response = session.client.invoke(addr, dp.request_command(code, body), timeout or session.timeout)
    except NetworkError as exc:
        return exc
    if not response.body:  # DLedger answers in the body, whatever the remoting code
        return BrokerError(
            f"{addr}: DLedger request {code.name} answered {response.code} {response.remark or ''}"
        )
    try:
        return jb.decode(dp.RESPONSES[code], response.body)
    except jb.BodyError as exc:
        return BrokerError(f"{addr}: bad DLedger answer to {code.name}: {exc}")


def _code_name(code: int) -> str:
    try:
        return dp.DLedgerResponseCode(code).name
    except ValueError:
        return str(code)
