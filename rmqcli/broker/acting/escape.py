"""``EscapeBridge`` of RocketMQ 5.1.1: where a broker's own puts go when it is not its group's master.

A master (broker id 0) stores locally. A slave acting as master (SlaveActingMaster) must not write
its CommitLog, which replicates its master's; with ``enableRemoteEscape=true`` it sends the message
to a writable master of another group that has the topic, as a producer would:

- the topic's route from the name servers (GET_ROUTEINFO_BY_TOPIC, kept ``ROUTE_SECONDS``);
- the publish queues as a 4.x client builds them (``topicRouteData2TopicPublishInfo``): the write
  queues of each group whose queue data is writable and which has a broker id 0;
- one of them round robin; the message's queue id becomes it;
- SEND_MESSAGE_V2 (310) to that master, ``WAIT=false`` added, producer group ``PGROUP`` or
  ``InnerProducerGroup_<brokerName>_<brokerId>``, ``defaultTopic`` TBW102 with 8 queues;
- success when it answers SUCCESS, FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE
  (the message is stored there), as ``PutMessageResult.isOk`` with ``remotePut``.

Without ``enableRemoteEscape`` (or without SlaveActingMaster) a slave's put fails
(SERVICE_NOT_AVAILABLE); the caller keeps the message and tries again later.
"""

from __future__ import annotations

import itertools
import logging
import random
import time
from typing import TYPE_CHECKING, Protocol

from formats import commitlog as fmt
from rmqcli.errors import RmqError
from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.store.write.messages import InnerMessage

if TYPE_CHECKING:
    from rmqcli.broker.config import BrokerConfig
    from rmqcli.broker.services.messagestore import MessageStore
    from rmqcli.remoting.client import RemotingClient

log = logging.getLogger(__name__)

ROUTE_SECONDS = 30.0  # loadBalancePollNameServerInterval
SEND_TIMEOUT = 3.0
STORED = frozenset({RS.SUCCESS, RS.FLUSH_DISK_TIMEOUT, RS.FLUSH_SLAVE_TIMEOUT, RS.SLAVE_NOT_AVAILABLE})
PERM_WRITE = 2


class EscapingBroker(Protocol):
    """What the bridge uses of its broker: the settings and the local store. The broker's
    ``context.BrokerContext`` names the bridge among its members, so the bridge names only these."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def store(self) -> MessageStore: ...


class EscapeBridge:
    """Puts of one broker's own services (delayed delivery, the transaction check)."""

    def __init__(self, ctl: EscapingBroker, remoting: RemotingClient, namesrv_addrs: list[str]):
        self.ctl = ctl
        self.remoting = remoting
        self.namesrv_addrs = namesrv_addrs
        self._routes: dict[str, tuple[float, list[tuple[str, int]]]] = {}
        self._turn = itertools.count(random.randrange(1 << 16))
        self.escaped = 0

    @property
    def local(self) -> bool:
        """``peekMasterBroker``: this broker is its group's master."""
        return not self.ctl.config.is_slave

    async def put(self, inner: InnerMessage, route_topic: str | None = None) -> bool:
        """Store ``inner`` here (a master) or at another group's master; whether it is stored.
        ``route_topic``: when no master has ``inner``'s topic yet (a retry topic), a master of
        this topic gets it, in queue 0 (the master creates the retry topic, as for a send-back)."""
        if self.local:
            self.ctl.store.put_inner(inner)
            return True
        acting = self.ctl.config.acting
        if not (acting.enable_slave_acting_master and acting.enable_remote_escape):
            return False
        return await self._remote(inner, route_topic)

    async def _remote(self, inner: InnerMessage, route_topic: str | None) -> bool:
        queues = await self._publish_queues(inner.topic)
        if not queues and route_topic:
            queues = sorted({(addr, 0) for addr, _ in await self._publish_queues(route_topic)})
        if not queues:
            log.warning("escape of a %s message: no writable master has the topic", inner.topic)
            return False
        addr, queue_id = queues[next(self._turn) % len(queues)]
        props = dict(inner.properties)
        props[fmt.PROPERTY_WAIT] = "false"
        config = self.ctl.config
        group = props.get("PGROUP") or f"InnerProducerGroup_{config.broker_name}_{config.broker_id}"
        header = hd.SendMessageRequestHeaderV2(
            a=group,
            b=inner.topic,
            c="TBW102",
            d=8,
            e=queue_id,
            f=inner.sys_flag,
            g=inner.born_timestamp,
            h=inner.flag,
            i=fmt.encode_properties(props).decode("utf-8"),
            j=inner.reconsume_times,
            m=False,
        )
        request = RemotingCommand.request(RC.SEND_MESSAGE_V2, header, inner.body)
        try:
            answer = await self.remoting.invoke(addr, request, SEND_TIMEOUT)
        except RmqError as exc:
            log.warning("escape of a %s message to %s failed: %s", inner.topic, addr, exc)
            self._routes.pop(inner.topic, None)
            return False
        if answer.code not in STORED:
            log.warning(
                "escape of a %s message to %s: %s %s", inner.topic, addr, answer.describe(), answer.remark
            )
            return False
        self.escaped += 1
        return True

    async def _publish_queues(self, topic: str) -> list[tuple[str, int]]:
        cached = self._routes.get(topic)
        if cached is not None and time.monotonic() - cached[0] < ROUTE_SECONDS and cached[1]:
            return cached[1]
        queues: list[tuple[str, int]] = []
        for addr in self.namesrv_addrs:
            try:
                answer = await self.remoting.invoke(
                    addr, RemotingCommand.request(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), SEND_TIMEOUT
                )
            except RmqError:
                continue
            if answer.code != RS.SUCCESS:
                continue
            route = jb.decode(jb.TopicRouteData, answer.body)
            masters = {b.broker_name: b.broker_addrs[0] for b in route.broker_datas if 0 in b.broker_addrs}
            for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
                if qd.perm & PERM_WRITE and qd.broker_name in masters:
                    queues += [(masters[qd.broker_name], q) for q in range(qd.write_queue_nums)]
            break
        self._routes[topic] = (time.monotonic(), queues)
        return queues
