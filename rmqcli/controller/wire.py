"""The controller's requests and answers on the wire (controller.md §2.4-§2.17).

Request headers are the 5.1.1 classes of ``remoting/protocol/header/controller`` (``req``: the
``@CFNotNull`` fields, which a request must carry even where Java gives a default, as
``designateElect``). An answer is built from a ``ControllerResult``: its header fields (Java names,
nulls left out) as ``extFields``, its remark, and its body in fastjson's form: properties sorted by
name, nulls left out, sets of ids in Java ``HashSet`` order, ``Map<Long, String>`` keys bare.
"""

from __future__ import annotations

from typing import Any

from formats import fastjson
from rmqcli.controller.bodies import (
    BrokerMemberGroup,
    BrokerReplicasInfo,
    ElectMasterResponseBody,
    ReplicaIdentity,
    ReplicasInfo,
    SyncStateSet,
)
from rmqcli.controller.javaorder import copy_capacity, hash_set_order
from rmqcli.controller.replicas import ControllerResult
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.headers.base import CommandHeader, header, opt, req

NOT_SET = "not set any response code"
"""The remark of ``RemotingCommand.createResponseCommand(null)``: a request the processor left
unanswered (a 1006 without names, a task that could not be queued), with SYSTEM_ERROR."""


@header
class AlterSyncStateSetRequestHeader(CommandHeader):
    broker_name: str | None = opt()
    master_broker_id: int | None = opt("long")
    master_epoch: int | None = opt("int")


@header
class ElectMasterRequestHeader(CommandHeader):
    cluster_name: str = req()
    broker_name: str = req()
    broker_id: int = req("long")
    designate_elect: bool = req("bool")


@header
class GetReplicaInfoRequestHeader(CommandHeader):
    broker_name: str | None = opt()


@header
class CleanControllerBrokerDataRequestHeader(CommandHeader):
    cluster_name: str | None = opt()
    broker_name: str = req()
    broker_controller_ids_to_clean: str | None = opt()
    is_clean_living_broker: bool = opt("bool", default=False)


@header
class GetNextBrokerIdRequestHeader(CommandHeader):
    cluster_name: str | None = opt()
    broker_name: str | None = opt()


@header
class ApplyBrokerIdRequestHeader(CommandHeader):
    cluster_name: str | None = opt()
    broker_name: str | None = opt()
    applied_broker_id: int | None = opt("long")
    register_check_code: str | None = opt()


@header
class RegisterBrokerToControllerRequestHeader(CommandHeader):
    cluster_name: str | None = opt()
    broker_name: str | None = opt()
    broker_id: int | None = opt("long")
    broker_address: str | None = opt()


@header
class NotifyBrokerRoleChangedRequestHeader(CommandHeader):
    """NOTIFY_BROKER_ROLE_CHANGED (1008, controller -> broker, oneway), §2.12."""

    master_address: str | None = opt()
    master_epoch: int | None = opt("int")
    sync_state_set_epoch: int | None = opt("int")
    master_broker_id: int | None = opt("long")


# --- answers ---------------------------------------------------------------------------------------


def answer(request: RemotingCommand, result: ControllerResult) -> RemotingCommand:
    """The response to ``request`` carrying ``result``: code, remark, header, body."""
    body = encode_body(result.body) if result.body is not None else b""
    return request.response(result.code, result.remark, header=result.header, body=body)


def encode_body(body: object) -> bytes:
    """A controller body in fastjson's form (§2.17)."""
    return fastjson.dumps(body_value(body)).encode("utf-8")


def ids(values: frozenset[int] | set[int]) -> list[int]:
    """A ``Set<Long>`` as fastjson iterates it: the ``HashSet`` order of a copied set."""
    ordered = sorted(values)
    return hash_set_order(ordered, copy_capacity(len(ordered)))


def body_value(body: object) -> Any:
    """The plain JSON value of a body, properties sorted by name and nulls left out."""
    if isinstance(body, SyncStateSet):
        return {"syncStateSet": ids(body.sync_state_set), "syncStateSetEpoch": body.sync_state_set_epoch}
    if isinstance(body, BrokerMemberGroup):
        out: dict[str, Any] = {
            "brokerAddrs": {k: v for k, v in body.broker_addrs.items() if v is not None},
            "brokerName": body.broker_name,
            "cluster": body.cluster,
        }
        return _no_nulls(out)
    if isinstance(body, ElectMasterResponseBody):
        group = body_value(body.broker_member_group) if body.broker_member_group is not None else None
        return _no_nulls({"brokerMemberGroup": group, "syncStateSet": ids(body.sync_state_set)})
    if isinstance(body, ReplicaIdentity):
        return _no_nulls({
            "alive": body.alive,
            "brokerAddress": body.broker_address,
            "brokerId": body.broker_id,
            "brokerName": body.broker_name,
        })  # fmt: skip
    if isinstance(body, ReplicasInfo):
        return _no_nulls({
            "inSyncReplicas": [body_value(r) for r in body.in_sync_replicas],
            "masterAddress": body.master_address,
            "masterBrokerId": body.master_broker_id,
            "masterEpoch": body.master_epoch,
            "notInSyncReplicas": [body_value(r) for r in body.not_in_sync_replicas],
            "syncStateSetEpoch": body.sync_state_set_epoch,
        })  # fmt: skip
    if isinstance(body, BrokerReplicasInfo):
        return {"replicasInfoTable": {k: body_value(v) for k, v in body.replicas_info_table.items()}}
    raise TypeError(f"not a controller body: {body!r}")


def _no_nulls(props: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in props.items() if v is not None}


def decode_sync_state_set(data: bytes | None) -> SyncStateSet | None:
    """A ``SyncStateSet`` body (1001 requests, 1008 notifications); None when absent or not one."""
    if not data:
        return None
    try:
        raw = fastjson.loads(data)
    except ValueError:
        return None
    if not isinstance(raw, dict):
        return None
    members = raw.get("syncStateSet") or []
    epoch = raw.get("syncStateSetEpoch", 0)
    try:
        return SyncStateSet(frozenset(int(i) for i in members), int(epoch))
    except (TypeError, ValueError):
        return None


def decode_names(data: bytes | None) -> list[str]:
    """A 1006 body: a JSON array of broker names (anything else: none)."""
    if not data:
        return []
    try:
        raw = fastjson.loads(data)
    except ValueError:
        return []
    return [str(n) for n in raw] if isinstance(raw, list) else []
