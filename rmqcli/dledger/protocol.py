"""The DLedger peers' RPC: request codes, response codes and the JSON bodies.

Specified by DLedger 0.3.1.2 ``DLedgerRpcNettyService`` and ``io.openmessaging.storage.dledger
.protocol``: every RPC is a remoting request whose header carries only the code (no extFields) and
whose body is the fastjson form of the request bean (getters sorted by name, nulls left out, enums
by name, ``byte[]`` in Base64). The answer is a remoting response with code 200 whatever happened:
the outcome is the ``code`` inside its body, which must always be present (a Java caller fails on an
empty body). Every bean carries ``RequestOrResponse``'s base: group, remoteId (the receiver),
localId (the sender), code (200), leaderId (the leader; the candidate in a vote) and term (-1).
"""

from __future__ import annotations

from dataclasses import field
from enum import IntEnum

from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codec import RemotingCommand, SerializeType
from rmqcli.remoting.json_body import bean, prop


class DLedgerRequestCode(IntEnum):
    """``DLedgerRequestCode``."""

    METADATA = 50000
    APPEND = 50001
    GET = 50002
    VOTE = 51001
    HEART_BEAT = 51002
    PULL = 51003
    PUSH = 51004
    LEADERSHIP_TRANSFER = 51005


class DLedgerResponseCode(IntEnum):
    """``DLedgerResponseCode``: the ``code`` inside a response body."""

    UNKNOWN = -1
    SUCCESS = 200
    TIMEOUT = 300
    METADATA_ERROR = 301
    NETWORK_ERROR = 302
    UNSUPPORTED = 303
    UNKNOWN_GROUP = 400
    UNKNOWN_MEMBER = 401
    UNEXPECTED_MEMBER = 402
    EXPIRED_TERM = 403
    NOT_LEADER = 404
    NOT_FOLLOWER = 405
    INCONSISTENT_STATE = 406
    INCONSISTENT_TERM = 407
    INCONSISTENT_INDEX = 408
    INCONSISTENT_LEADER = 409
    INDEX_OUT_OF_RANGE = 410
    UNEXPECTED_ARGUMENT = 411
    REPEATED_REQUEST = 412
    REPEATED_PUSH = 413
    DISK_ERROR = 414
    DISK_FULL = 415
    TERM_NOT_READY = 416
    FALL_BEHIND_TOO_MUCH = 417
    TAKE_LEADERSHIP_FAILED = 418
    INDEX_LESS_THAN_LOCAL_BEGIN = 419
    REQUEST_WITH_EMPTY_BODYS = 420
    PUSH_REQUEST_IS_FULL = 421
    INTERNAL_ERROR = 500
    TERM_CHANGED = 501
    WAIT_QUORUM_ACK_TIMEOUT = 502
    LEADER_PENDING_FULL = 503
    ILLEGAL_MEMBER_STATE = 504
    LEADER_NOT_READY = 505
    LEADER_TRANSFERRING = 506


# ``VoteResponse.RESULT`` by ordinal (fastjson writes the name, reads either)
VOTE_RESULTS = (
    "UNKNOWN", "ACCEPT", "REJECT_UNKNOWN_LEADER", "REJECT_UNEXPECTED_LEADER", "REJECT_EXPIRED_VOTE_TERM",
    "REJECT_ALREADY_VOTED", "REJECT_ALREADY_HAS_LEADER", "REJECT_TERM_NOT_READY",
    "REJECT_TERM_SMALL_THAN_LEDGER", "REJECT_EXPIRED_LEDGER_TERM", "REJECT_SMALL_LEDGER_END_INDEX",
    "REJECT_TAKING_LEADERSHIP",
)  # fmt: skip
PUSH_TYPES = ("APPEND", "COMMIT", "COMPARE", "TRUNCATE")  # ``PushEntryRequest.Type``
SUCCESS = int(DLedgerResponseCode.SUCCESS)


@bean
class _Base:
    """``RequestOrResponse``."""

    group: str | None = None
    remote_id: str | None = None
    local_id: str | None = None
    code: int = SUCCESS
    leader_id: str | None = None
    term: int = -1


@bean
class HeartBeatRequest(_Base):
    pass


@bean
class HeartBeatResponse(_Base):
    pass


@bean
class VoteRequest(_Base):
    ledger_end_index: int = -1
    ledger_end_term: int = -1


@bean
class VoteResponse(_Base):
    vote_result: str = prop("UNKNOWN", enum=VOTE_RESULTS)


@bean
class DLedgerEntry:
    """``DLedgerEntry`` as its getters show it (``formats.dledger.EntryHeader`` and the body)."""

    body: bytes | None = None
    body_crc: int = 0
    chain_crc: int = 0
    channel: int = 0
    index: int = -1
    magic: int = 0
    pos: int = -1
    size: int = 0
    term: int = -1


@bean
class PushEntryRequest(_Base):
    """``PushEntryRequest``; ``batch``, ``count``, ``firstEntryIndex``, ``lastEntryIndex`` are its
    derived getters (``with_entries`` sets them), ignored when read."""

    commit_index: int = -1
    type: str = prop("APPEND", enum=PUSH_TYPES)
    entry: DLedgerEntry | None = None
    batch_entry: list[DLedgerEntry] = field(default_factory=list)
    total_size: int = 0
    batch: bool = False
    count: int = 0
    first_entry_index: int = -1
    last_entry_index: int = -1

    def with_entries(self) -> PushEntryRequest:
        """The derived properties from ``entry``/``batch_entry``, as the Java getters compute them."""
        self.batch = bool(self.batch_entry)
        if self.batch:
            self.count = len(self.batch_entry)
            self.first_entry_index = self.batch_entry[0].index
            self.last_entry_index = self.batch_entry[-1].index
        elif self.entry is not None:
            self.count, self.first_entry_index, self.last_entry_index = 1, self.entry.index, self.entry.index
        else:
            self.count, self.first_entry_index, self.last_entry_index = 0, -1, -1
        return self


@bean
class PushEntryResponse(_Base):
    index: int | None = None
    begin_index: int = -1
    end_index: int = -1
    count: int = 0


@bean
class LeadershipTransferRequest(_Base):
    transfer_id: str | None = None
    transferee_id: str | None = None
    take_leadership_ledger_index: int = 0


@bean
class LeadershipTransferResponse(_Base):
    pass


@bean
class MetadataRequest(_Base):
    pass


@bean
class MetadataResponse(_Base):
    peers: dict[str, str] | None = None


REQUESTS: dict[int, type] = {
    DLedgerRequestCode.VOTE: VoteRequest,
    DLedgerRequestCode.HEART_BEAT: HeartBeatRequest,
    DLedgerRequestCode.PUSH: PushEntryRequest,
    DLedgerRequestCode.LEADERSHIP_TRANSFER: LeadershipTransferRequest,
    DLedgerRequestCode.METADATA: MetadataRequest,
}
RESPONSES: dict[int, type] = {
    DLedgerRequestCode.VOTE: VoteResponse,
    DLedgerRequestCode.HEART_BEAT: HeartBeatResponse,
    DLedgerRequestCode.PUSH: PushEntryResponse,
    DLedgerRequestCode.LEADERSHIP_TRANSFER: LeadershipTransferResponse,
    DLedgerRequestCode.METADATA: MetadataResponse,
}


def request_command(code: DLedgerRequestCode, body: object) -> RemotingCommand:
    """A DLedger request: the code, no extFields, the bean's fastjson bytes as body."""
    return RemotingCommand.request(int(code), None, jb.encode(body))


def response_command(request: RemotingCommand, body: object) -> RemotingCommand:
    """The answer to ``request``: remoting code 200 and the bean as body, in a JSON header whatever
    the request's (``DLedgerRpcNettyService`` does not copy its serialize type)."""
    return request.response(SUCCESS, body=jb.encode(body), serialize_type=SerializeType.JSON)
