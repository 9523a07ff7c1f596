"""A broker's view of its group under SlaveActingMaster (``BrokerController`` of RocketMQ 5.1.1:
``scheduleSendHeartbeat``, ``syncBrokerMemberGroup``, ``updateMinBroker``).

``GroupMembership.run`` sends BROKER_HEARTBEAT (904, oneway) to every name server each
``brokerHeartbeatInterval`` and asks one of them for the group's live members
(GET_BROKER_MEMBER_GROUP, 901) each ``syncBrokerMemberGroupPeriod``. A slave that learns a new
smallest broker id calls ``on_min_change(min_id, min_addr, offline_addr)``: ``offline_addr`` is the
previous smallest member's address when the new smallest id is larger (that member left), else
None. A master never reacts. An empty or failed answer changes nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from rmqcli.broker.acting.config import ActingConfig
from rmqcli.errors import RmqError
from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS

log = logging.getLogger(__name__)

TIMEOUT = 3.0  # s, GET_BROKER_MEMBER_GROUP (BrokerOuterAPI.syncBrokerMemberGroup)

Invoke = Callable[[str, RemotingCommand, float], Awaitable[RemotingCommand]]
Oneway = Callable[[str, RemotingCommand, float], Awaitable[None]]


@dataclass(frozen=True)
class Identity:
    cluster: str
    name: str
    broker_id: int
    addr: str


@dataclass
class GroupMembership:
    """The group's live members as the name servers see them, and the smallest id among them."""

    identity: Identity
    config: ActingConfig
    namesrv_addrs: list[str]
    invoke: Invoke
    oneway: Oneway
    on_min_change: Callable[[int, str | None, str | None], None]
    members: dict[int, str] = field(default_factory=dict)
    min_id: int = 0  # minBrokerIdInGroup: 0 until a member group says otherwise
    min_addr: str | None = None

    @property
    def alive_replicas(self) -> int:
        """``aliveReplicaNumInGroup``: the live members, this broker included (``totalReplicas``
        until the first member group arrives)."""
        if not self.members:
            return self.config.total_replicas
        return len(self.members) + (self.identity.broker_id not in self.members)

    @property
    def acting(self) -> bool:
        """This slave is the group's smallest live member: it acts as master."""
        return self.identity.broker_id != 0 and self.min_id == self.identity.broker_id

    async def run(self) -> None:
        await asyncio.gather(self._heartbeats(), self._syncs())

    async def _heartbeats(self) -> None:
        header = hd.BrokerHeartbeatRequestHeader(
            cluster_name=self.identity.cluster, broker_addr=self.identity.addr, broker_name=self.identity.name
        )
        period = self.config.broker_heartbeat_interval / 1000
        while True:
            await asyncio.sleep(period)
            for addr in self.namesrv_addrs:
                beat = RemotingCommand.request(RC.BROKER_HEARTBEAT, header, oneway=True)
                try:
                    await self.oneway(addr, beat, 1.0)
                except RmqError as exc:
                    log.debug("heartbeat to name server %s failed: %s", addr, exc)

    async def _syncs(self) -> None:
        period = self.config.sync_broker_member_group_period / 1000
        while True:
            await asyncio.sleep(period)
            group = await self.fetch()
            if group is not None:
                self.update(group)

    async def fetch(self) -> dict[int, str] | None:
        """The group from the first name server that answers; None when none does."""
        header = hd.GetBrokerMemberGroupRequestHeader(
            cluster_name=self.identity.cluster, broker_name=self.identity.name
        )
        for addr in self.namesrv_addrs:
            request = RemotingCommand.request(RC.GET_BROKER_MEMBER_GROUP, header)
            try:
                answer = await self.invoke(addr, request, TIMEOUT)
            except RmqError as exc:
                log.debug("member group from name server %s failed: %s", addr, exc)
                continue
            if answer.code != RS.SUCCESS:
                return {}
            try:
                body = jb.decode(jb.GetBrokerMemberGroupResponseBody, answer.body)
            except (ValueError, TypeError, KeyError) as exc:
                log.warning("name server %s: unreadable member group: %s", addr, exc)
                continue
            return dict(body.broker_member_group.broker_addrs)
        return None

    def update(self, group: dict[int, str]) -> None:
        """``syncBrokerMemberGroup`` + ``updateMinBroker``."""
        if not group:
            log.warning("the name servers know no member of group %s", self.identity.name)
            return
        self.members = group
        if not self.config.enable_slave_acting_master or self.identity.broker_id == 0:
            return
        min_id = min(group)
        if min_id == self.min_id and group[min_id] == self.min_addr:
            return
        offline = self.min_addr if min_id > self.min_id else None
        log.warning(
            "group %s: smallest live broker id %d -> %d (%s)%s",
            self.identity.name,
            self.min_id,
            min_id,
            group[min_id],
            f"; {offline} left" if offline else "",
        )
        self.min_id, self.min_addr = min_id, group[min_id]
        self.on_min_change(min_id, group[min_id], offline)
