"""The broker.conf keys of a DLedger group (4.9.8 ``MessageStoreConfig``, passed to DLedger by
``DLedgerCommitLog``): ``enableDLegerCommitLog``, ``dLegerGroup``, ``dLegerPeers``
(``n0-host:port;n1-host:port;...``), ``dLegerSelfId``, ``preferredLeaderId``, ``enableBatchPush``;
the data files are ``mappedFileSizeCommitLog`` bytes, as every member's must be.

4.9.8 derives the broker id a follower registers with from the selfId: the number after its first
letter, plus one (``n0`` -> 1); a leader registers as 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqcli.conf.keys import setting
from rmqcli.conf.parse import refused
from rmqcli.dledger.member import parse_peers
from rmqcli.dledger.transfer import parse_preferred


@dataclass(frozen=True)
class DLedgerConfig:
    enable: bool = setting("enableDLegerCommitLog")
    group: str | None = setting("dLegerGroup")
    peers: str | None = setting("dLegerPeers")
    self_id: str | None = setting("dLegerSelfId")
    preferred_leader_id: str | None = setting("preferredLeaderId")
    batch_push: bool = setting("enableBatchPush")

    def peer_map(self) -> dict[str, str]:
        return parse_peers(self.peers or "")

    @property
    def preferred(self) -> tuple[str, ...]:
        return parse_preferred(self.preferred_leader_id)

    @property
    def follower_id(self) -> int:
        """``DLedgerCommitLog``: ``Integer.parseInt(selfId.substring(1)) + 1``."""
        return int((self.self_id or "")[1:]) + 1


def checked(config: DLedgerConfig) -> DLedgerConfig:
    """The group's keys as ``DLedgerServer`` needs them; one line naming the key otherwise."""
    if not config.enable:
        return config
    for key, value in (
        ("dLegerGroup", config.group),
        ("dLegerPeers", config.peers),
        ("dLegerSelfId", config.self_id),
    ):
        if not value:
            raise refused(f"enableDLegerCommitLog=true needs {key}")
    try:
        peers = config.peer_map()
    except ValueError as exc:
        raise refused(str(exc)) from None
    self_id = config.self_id or ""
    if self_id not in peers:
        raise refused(f"dLegerSelfId={self_id} is not one of dLegerPeers ({', '.join(peers)})")
    if len(self_id) < 2 or not self_id[1:].isdigit():
        raise refused(f"dLegerSelfId={self_id}: a letter and a number (n0, n1, ...), as 4.9.8 reads it")
    return config
