"""Who may connect to a master's HA port when the broker has ``aclEnable=true`` (rmq's own: 4.9.8's
``HAService.AcceptSocketService`` takes every connection, and an 8-byte offset of 0 from anyone
streams the CommitLog).

A peer is admitted when its host

* matches ``globalWhiteRemoteAddresses`` of the ACL files (RocketMQ's ACL guide lists a master's
  slaves there, since 4.9.8 slaves sign nothing);
* matches ``rmqHaAllowedAddresses`` (rmq's own broker.conf key: comma-separated patterns, each as a
  ``whiteRemoteAddress``: ``192.168.1.*``, ``10.0.0.1-9``, an exact address);
* or is the host of a broker the name servers list under this broker's name: the route of the
  topic named after the broker name (GET_ROUTEINFO_BY_TOPIC, asked at most every
  ``LOOKUP_SECONDS``, one lookup at a time). rmq's NameServer with ``aclEnable`` takes
  registrations only from signed admin accounts, its own broker, or white-listed addresses; a
  4.9.8 NameServer takes anyone's, so with one of those use the lists above.

The master's own host is one of the group's, so a slave on the same machine needs no list.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from rmqcli.broker.acl.addresses import AclConfigError, Matcher, compile_pattern
from rmqcli.broker.acl.setup import BrokerAcl, plain_host
from rmqcli.errors import RmqError, UsageError
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode

log = logging.getLogger(__name__)

LOOKUP_SECONDS = 5.0
LOOKUP_TIMEOUT = 3.0
Invoke = Callable[[str, RemotingCommand, float], Awaitable[RemotingCommand]]


def allow_list(text: str) -> list[Matcher]:
    """``rmqHaAllowedAddresses``; a bad pattern is a usage error at start."""
    try:
        return [compile_pattern(part) for part in text.split(",") if part.strip()]
    except AclConfigError as exc:
        raise UsageError(f"broker.conf: rmqHaAllowedAddresses: {exc}") from None


def host_of(addr: str) -> str:
    return plain_host(addr.rpartition(":")[0] or addr)


class HaGate:
    """``await admit(host)``: may ``host`` replicate from this master."""

    def __init__(
        self, acl: BrokerAcl, allowed: str, broker_name: str, namesrv_addrs: list[str], invoke: Invoke
    ):
        self.acl = acl
        self.allowed = allow_list(allowed)
        self.broker_name = broker_name
        self.namesrv_addrs = namesrv_addrs
        self.invoke = invoke
        self.members: set[str] = set()
        self._looked = -LOOKUP_SECONDS
        self._lock = asyncio.Lock()

    async def admit(self, host: str) -> bool:
        host = plain_host(host)
        if any(match(host) for match in (*self.acl.files.global_white, *self.allowed)):
            return True
        if host in self.members:
            return True
        async with self._lock:  # one lookup at a time; a refused flood waits for it, not more
            if time.monotonic() - self._looked >= LOOKUP_SECONDS:
                self.members = await self._lookup()
                self._looked = time.monotonic()
        return host in self.members

    async def _lookup(self) -> set[str]:
        """The hosts of this broker name's members, from every name server that answers."""
        hosts: set[str] = set()
        request = {"topic": self.broker_name}
        for addr in self.namesrv_addrs:
            try:
                answer = await self.invoke(
                    addr, RemotingCommand.request(RC.GET_ROUTEINFO_BY_TOPIC, dict(request)), LOOKUP_TIMEOUT
                )
                if answer.code != ResponseCode.SUCCESS or not answer.body:
                    continue
                route = jb.decode(jb.TopicRouteData, answer.body)
            except (RmqError, ValueError) as exc:
                log.warning("HA: the members of %s from %s: %s", self.broker_name, addr, exc)
                continue
            for data in route.broker_datas:
                if data.broker_name == self.broker_name:
                    hosts.update(host_of(a) for a in data.broker_addrs.values())
        return hosts
