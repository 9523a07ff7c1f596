"""A group's clients: consumerConnection, producerConnection, consumerStatus and the running info
of one consumer, relayed by a broker (protocol.md C.2, C.4.7; requests B.4, B.5; bodies B.9)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from formats.names import RETRY_PREFIX
from rmqcli.admin.session import AdminSession, master_addr, masters
from rmqcli.errors import BrokerError, NetworkError
from rmqcli.remoting import headers as hd
from rmqcli.remoting.codes import RequestCode, ResponseCode

if TYPE_CHECKING:
    from rmqcli.admin.beans import ConsumerRunningInfo
    from rmqcli.remoting.json_body import ConsumerConnection, ProducerConnection

C = TypeVar("C")

NOT_ONLINE = f"{ResponseCode.CONSUMER_NOT_ONLINE.name}({int(ResponseCode.CONSUMER_NOT_ONLINE)})"
NO_CONNECTION = f"{NOT_ONLINE}: Not found the consumer group connection"


class ConsumerNotOnline(BrokerError):
    """mqadmin's ``MQClientException(CONSUMER_NOT_ONLINE, …)``: exit 6 like a broker error."""


def _random_master(session: AdminSession, topic: str) -> str | None:
    """The master of one broker of ``topic``'s route, picked at random (105); None for no broker."""
    import random

    datas = session.route(topic).broker_datas
    return master_addr(random.choice(datas).broker_addrs) if datas else None


def _connections(
    session: AdminSession, addr: str | None, code: int, header: hd.CommandHeader, cls: type[C]
) -> C:
    """The connection list ``code`` asks ``addr`` for, as ``cls``: empty without an address or a body."""
    from rmqcli.remoting import json_body as jb

    return jb.decode_or_empty(cls, session.call(addr, code, header).body) if addr else cls()


def consumer_connection(
    session: AdminSession, group: str, broker_addr: str | None = None
) -> ConsumerConnection:
    """``examineConsumerConnectionInfo``: GET_CONSUMER_CONNECTION_LIST (203) to ``-b``, else to one
    broker of the ``%RETRY%G`` route (105); no connection is CONSUMER_NOT_ONLINE."""
    from rmqcli.remoting import json_body as jb

    group = group.strip()
    addr = broker_addr.strip() if broker_addr else _random_master(session, RETRY_PREFIX + group)
    header = hd.GetConsumerConnectionListRequestHeader(consumer_group=group)
    result = _connections(
        session, addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, header, jb.ConsumerConnection
    )
    if not result.connection_set:
        raise ConsumerNotOnline(NO_CONNECTION)
    return result


def producer_connection(session: AdminSession, group: str, topic: str) -> ProducerConnection:
    """``producerConnection``: 105 for the topic, GET_PRODUCER_CONNECTION_LIST (204) to one broker."""
    from rmqcli.remoting import json_body as jb

    addr = _random_master(session, topic.strip())
    header = hd.GetProducerConnectionListRequestHeader(producer_group=group.strip())
    result = _connections(
        session, addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, header, jb.ProducerConnection
    )
    if not result.connection_set:
        raise BrokerError("Not found the producer group connection")
    return result


def running_info(
    session: AdminSession, group: str, client_id: str, jstack: bool = False
) -> ConsumerRunningInfo:
    """GET_CONSUMER_RUNNING_INFO (307) through a broker of ``%RETRY%G`` (the broker asks the client);
    three times the usual timeout, as ``DefaultMQAdminExtImpl`` waits for relayed requests."""
    from rmqcli.admin.beans import ConsumerRunningInfo
    from rmqcli.remoting import json_body as jb

    datas = session.route(RETRY_PREFIX + group).broker_datas
    addr = next((addr for _, addr in masters(datas)), None)
    if addr is None:
        raise BrokerError(f"no broker in the route of {RETRY_PREFIX}{group}")
    header = hd.GetConsumerRunningInfoRequestHeader(
        consumer_group=group, client_id=client_id, jstack_enable=jstack
    )
    response = session.call(addr, RequestCode.GET_CONSUMER_RUNNING_INFO, header, timeout=session.timeout * 3)
    return jb.decode_or_empty(ConsumerRunningInfo, response.body)


@dataclass
class ConsumerStatusRow:
    index: int
    client_id: str
    version: int
    path: str


@dataclass
class ConsumerStatusResult:
    """``consumerStatus``: the table of clients (files written) and the analysis, or one client's info."""

    rows: list[ConsumerStatusRow] = field(default_factory=list)
    infos: dict[str, ConsumerRunningInfo] = field(default_factory=dict)
    same_subscription: bool | None = None
    rebalance_ok: bool | None = None
    client: ConsumerRunningInfo | None = None


def consumer_status(
    session: AdminSession,
    group: str,
    *,
    client_id: str | None = None,
    broker_addr: str | None = None,
    jstack: bool = False,
    directory: str = ".",
) -> ConsumerStatusResult:
    """``consumerStatus``: 203 (``-b`` or the retry route), then 307 per client; each client's
    ``formatString`` is written to ``<now>/<clientId>`` as mqadmin does. ``-i`` asks one client."""
    import os
    import time

    group = group.strip()
    connection = consumer_connection(session, group, broker_addr)
    result = ConsumerStatusResult()
    if client_id:
        result.client = running_info(session, group, client_id.strip(), jstack)
        return result
    now = int(time.time() * 1000)
    index = 1
    for conn in connection.connection_set:
        try:
            info = running_info(session, group, conn.client_id, jstack)
        except (BrokerError, NetworkError):
            continue
        from rmqcli.admin.beans import running_info_string

        path = f"{now}/{conn.client_id}"
        full = os.path.join(directory, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as fh:
            fh.write(running_info_string(info))
        result.infos[conn.client_id] = info
        result.rows.append(ConsumerStatusRow(index, conn.client_id, conn.version, path))
        index += 1
    if result.infos:
        subs = [
            sorted((s.topic, s.sub_string) for s in info.subscription_set) for info in result.infos.values()
        ]
        result.same_subscription = all(s == subs[0] for s in subs)
        result.rebalance_ok = result.same_subscription
    return result
