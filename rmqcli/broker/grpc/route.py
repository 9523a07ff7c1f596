"""QueryRoute and QueryAssignment (the 5.1 proxy's ``RouteActivity`` over ``LocalTopicRouteService``).

In local mode the broker is the only one and its queues are answered from its own topic table: one
``MessageQueue`` per queue, the read-only ones first, then write-only, then read-write (ids counted
on across the three, ``genMessageQueueFromQueueData``), each naming the broker (id 0, master) at the
gRPC endpoint, the address every later call of the client goes to, and the topic's accepted message
type (its ``message.type`` attribute; NORMAL when it has none, as ``getTopicMessageType``). A topic
the broker does not have is TOPIC_NOT_FOUND; nothing is created by a route query.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from formats.names import SYS_GROUP_PREFIX
from rmqcli.broker.grpc import convert
from rmqcli.broker.grpc import status as st
from rmqcli.broker.names import validate_group
from rmqcli.broker.state import is_readable, is_writable

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext

# definition.proto: Permission, AddressScheme
NONE, READ, WRITE, READ_WRITE = 1, 2, 3, 4
IPV4, IPV6, DOMAIN_NAME = 1, 2, 3


@dataclass(frozen=True)
class Endpoint:
    """The gRPC endpoint advertised in routes: where clients reach this server."""

    host: str
    port: int

    @property
    def scheme(self) -> int:
        if ":" in self.host:
            return IPV6
        parts = self.host.split(".")
        return IPV4 if len(parts) == 4 and all(p.isdigit() for p in parts) else DOMAIN_NAME


def permission(perm: int) -> int:
    """``convertToPermission``."""
    readable, writable = is_readable(perm), is_writable(perm)
    if readable and writable:
        return READ_WRITE
    if readable:
        return READ
    return WRITE if writable else NONE


def broker(d: Any, ctl: BrokerContext, endpoint: Endpoint) -> Any:
    address = d.Address(host=endpoint.host, port=endpoint.port)
    return d.Broker(
        name=ctl.config.broker_name, id=0, endpoints=d.Endpoints(scheme=endpoint.scheme, addresses=[address])
    )


def topic_config(ctl: BrokerContext, topic: str) -> dict:
    config = ctl.topics.get(topic)
    if config is None:
        raise st.GrpcStatusError(st.TOPIC_NOT_FOUND, f"topic[{topic}] not exist")  # TOPIC_NOT_EXIST
    return config


def message_queues(d: Any, resource: Any, config: dict, brk: Any) -> list[Any]:
    """``genMessageQueueFromQueueData``."""
    perm, reads, writes = config["perm"], config["readQueueNums"], config["writeQueueNums"]
    r = w = rw = 0
    if is_readable(perm) and is_writable(perm):
        rw = min(reads, writes)
        r, w = reads - rw, writes - rw
    elif is_writable(perm):
        w = writes
    elif is_readable(perm):
        r = reads
    accepted = convert.topic_type(config)
    accepted = convert.NORMAL if accepted is None else accepted
    queues = []
    for count, perm_value in ((r, READ), (w, WRITE), (rw, READ_WRITE)):
        for _ in range(count):
            queues.append(
                d.MessageQueue(
                    topic=resource,
                    id=len(queues),
                    permission=perm_value,
                    broker=brk,
                    accept_message_types=[accepted],
                )
            )
    return queues


def query_route(s: Any, ctl: BrokerContext, endpoint: Endpoint, request: Any) -> Any:
    d = s.definition
    convert.check_topic(request.topic.name)
    config = topic_config(ctl, request.topic.name)
    queues = message_queues(d, request.topic, config, broker(d, ctl, endpoint))
    return s.service.QueryRouteResponse(status=st.make(d, st.OK), message_queues=queues)


def check_group(group: str) -> None:
    """``GrpcValidator.validateConsumerGroup`` (ILLEGAL_CONSUMER_GROUP)."""
    problem = validate_group(group)
    if problem:
        raise st.GrpcStatusError(st.ILLEGAL_CONSUMER_GROUP, problem)
    if group.startswith(SYS_GROUP_PREFIX):  # MixAll.isSysConsumerGroup
        raise st.GrpcStatusError(st.ILLEGAL_CONSUMER_GROUP, "cannot use system consumer group")


def query_assignment(s: Any, ctl: BrokerContext, endpoint: Endpoint, request: Any) -> Any:
    """One assignment (queue id -1: the whole broker) when the topic is readable, else FORBIDDEN."""
    d = s.definition
    convert.check_topic(request.topic.name)
    check_group(request.group.name)
    config = topic_config(ctl, request.topic.name)
    if not (is_readable(config["perm"]) and config["readQueueNums"] > 0):
        return s.service.QueryAssignmentResponse(status=st.make(d, st.FORBIDDEN, "no readable queue"))
    queue = d.MessageQueue(
        topic=request.topic, id=-1, permission=permission(config["perm"]), broker=broker(d, ctl, endpoint)
    )
    return s.service.QueryAssignmentResponse(
        status=st.make(d, st.OK), assignments=[d.Assignment(message_queue=queue)]
    )
