"""Clients online at the brokers of ``tests.admin.adminserver``: one real connection per broker,
over which the client's HEART_BEAT registered it (protocol.md B.3), and which answers what a broker
relays to the client (B.5): GET_CONSUMER_RUNNING_INFO with the client's staged running info,
CONSUME_MESSAGE_DIRECTLY with CR_SUCCESS."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmqcli.admin.beans import ConsumeMessageDirectlyResult, ConsumerRunningInfo
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.client import RemotingClient
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS


@dataclass
class OnlineClient:
    """One client id; ``addrs`` is its address as each broker sees it."""

    client_id: str
    running_info: Any = None
    remoting: RemotingClient = field(default_factory=RemotingClient)
    addrs: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.remoting.register(RC.GET_CONSUMER_RUNNING_INFO, self._running_info)
        self.remoting.register(RC.CONSUME_MESSAGE_DIRECTLY, self._consume_directly)

    def addr_at(self, broker: Any) -> str:
        return self.addrs[broker.addr]

    async def heartbeat(self, broker_addr: str, data: jb.HeartbeatData, version: int) -> None:
        """HEART_BEAT to a broker, sent as a client of ``version`` (an MQVersion ordinal)."""
        connection = await self.remoting.connection(broker_addr)
        host, port = connection.writer.get_extra_info("sockname")[:2]
        self.addrs[broker_addr] = f"{host}:{port}"
        request = RemotingCommand.request(RC.HEART_BEAT, None, jb.encode(data), version=version)
        response = await self.remoting.invoke(broker_addr, request, 5)
        assert response.code == RS.SUCCESS, response.remark

    def _running_info(self, request: RemotingCommand, addr: str) -> RemotingCommand:
        return request.response(body=jb.encode(self.running_info or ConsumerRunningInfo()))

    def _consume_directly(self, request: RemotingCommand, addr: str) -> RemotingCommand:
        result = ConsumeMessageDirectlyResult(consume_result="CR_SUCCESS", spent_time_mills=1)
        return request.response(body=jb.encode(result))


def consumer_data(
    group: str, subscriptions: dict[str, str], consume_type: str, message_model: str
) -> jb.ConsumerData:
    """A consumer's part of HEART_BEAT: ``topic: expression`` subscriptions (``A || B`` or ``*``)."""
    return jb.ConsumerData(
        group_name=group,
        consume_type=consume_type,
        message_model=message_model,
        subscription_data_set=[
            jb.SubscriptionData(
                topic=topic,
                sub_string=expression,
                tags_set=[] if expression == "*" else [t.strip() for t in expression.split("||")],
            )
            for topic, expression in subscriptions.items()
        ],
    )
