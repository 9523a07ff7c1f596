"""A slave's copy of its master's configuration (``SlaveSynchronize`` of RocketMQ 4.9.8).

Every 10 s, from 3 s after start, a slave asks its master (the broker address the NameServer
names in its registration answer, ``RegisterBrokerResult.masterAddr``) for:

* GET_ALL_TOPIC_CONFIG (21): when its ``dataVersion`` differs from the slave's, the slave's topic
  table is replaced by the master's and takes its data version; ``topics.json`` is written.
* GET_ALL_CONSUMER_OFFSET (43): the master's offsets are put over the slave's (``putAll``: a
  ``topic@group`` the master lacks keeps the slave's own); ``consumerOffset.json`` is written.
* GET_ALL_DELAY_OFFSET (45): the master's ``delayOffset.json`` content; the slave stores it.
* GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201): as topics, by ``dataVersion``; ``subscriptionGroup.json``.

With ``timerWheelEnable`` (5.1.1's ``syncAll`` and slave task; ``rmqcli.broker.timer.sync``):

* GET_TIMER_METRICS (61) with the parts above: the master's ``config/timermetrics`` when its data
  version differs.
* GET_TIMER_CHECK_POINT (60) every 3 s from 10 s after start: the master's ``lastReadTimeMs`` and
  ``masterTimerQueueOffset`` into the slave's ``config/timercheck``.

Each part fails alone with one log line (the master may be down: a slave keeps serving what it
has), as each ``sync*`` method of 4.9.8 catches its own exception. Nothing syncs while the
master address is unknown or is the slave's own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from rmqcli.broker.timer.sync import CHECKPOINT_DELAY, CHECKPOINT_PERIOD, TimerSync
from rmqcli.errors import RmqError
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode
from rmqcli.store.write.config import (
    BrokerConfigState,
    DataVersion,
    subscription_group_config,
    topic_config,
)

log = logging.getLogger(__name__)

INITIAL_DELAY = 3.0  # seconds: BrokerController.handleSlaveSynchronize
PERIOD = 10.0
TIMEOUT = 3.0  # BrokerOuterAPI's getAll* calls

Invoke = Callable[[str, RemotingCommand, float], Awaitable[RemotingCommand]]

TOPIC_KEYS = tuple(topic_config("", 0))  # the 7 keys of a 4.9.x TopicConfig
GROUP_KEYS = tuple(subscription_group_config(""))  # the 9 keys of a 4.9.x SubscriptionGroupConfig


@dataclass(frozen=True)
class Versioned:
    """A table the master versions: its request, answer bean and field, and where the slave keeps it."""

    code: int
    wrapper: type
    field: str  # the table in the answer
    table: str  # the ``BrokerConfigState`` attribute
    version: str  # its data version's attribute
    keys: tuple[str, ...]  # the 4.9.x keys the config file holds


TOPICS = Versioned(
    RC.GET_ALL_TOPIC_CONFIG,
    jb.TopicConfigSerializeWrapper,
    "topic_config_table",
    "topics",
    "topics_version",
    TOPIC_KEYS,
)
GROUPS = Versioned(
    RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
    jb.SubscriptionGroupWrapper,
    "subscription_group_table",
    "groups",
    "groups_version",
    GROUP_KEYS,
)


@dataclass
class SyncReport:
    """What one ``sync_all`` took from the master, and what failed (one line each)."""

    master: str | None
    changed: list[str] = field(default_factory=list)  # "topics", "offsets", "delay", "groups", ...
    failed: list[str] = field(default_factory=list)


class SlaveSynchronize:
    """Copies the master's topics, offsets, delay offsets and groups into ``state``."""

    def __init__(
        self,
        state: BrokerConfigState,
        persist: Callable[[], None],
        invoke: Invoke,
        own_addr: str,
        timer: TimerSync | None = None,
    ):
        self.state = state
        self.persist = persist  # writes the four config files
        self.invoke = invoke
        self.own_addr = own_addr
        self.timer = timer  # with timerWheelEnable: the timer checkpoint and metrics
        self.master_addr: str | None = None  # set from each registration answer

    async def run(self, initial_delay: float = INITIAL_DELAY, period: float = PERIOD) -> None:
        checkpoints = asyncio.get_running_loop().create_task(self.run_timer_checkpoint())
        try:
            await asyncio.sleep(initial_delay)
            while True:
                await self.sync_all()
                await asyncio.sleep(period)
        finally:
            checkpoints.cancel()

    async def run_timer_checkpoint(
        self, initial_delay: float = CHECKPOINT_DELAY, period: float = CHECKPOINT_PERIOD
    ) -> None:
        """``syncTimerCheckPoint`` on the slave task's period (nothing without a timer)."""
        if self.timer is None:
            return
        await asyncio.sleep(initial_delay)
        while True:
            await self.sync_timer_checkpoint()
            await asyncio.sleep(period)

    async def sync_timer_checkpoint(self) -> bool:
        """The master's timer checkpoint into the slave's; True when its file changed. A failure is
        one log line (``syncTimerCheckPoint Exception``)."""
        master = self.master_addr
        if self.timer is None or not master or master == self.own_addr:
            return False
        try:
            return self.timer.take_checkpoint(await self._body(master, RC.GET_TIMER_CHECK_POINT))
        except (RmqError, ValueError, OSError) as exc:
            log.warning("slave sync of the timer checkpoint from master %s failed: %s", master, exc)
            return False

    async def sync_all(self) -> SyncReport:
        master = self.master_addr
        report = SyncReport(master)
        if not master or master == self.own_addr:
            return report
        for name, part in (
            ("topics", lambda m: self._versioned(m, TOPICS)),
            ("offsets", self._offsets),
            ("delay", self._delay),
            ("groups", lambda m: self._versioned(m, GROUPS)),
            *([("timer metrics", self._timer_metrics)] if self.timer is not None else []),
        ):
            try:
                if await part(master):
                    report.changed.append(name)
            except (RmqError, ValueError, TypeError, KeyError, OSError) as exc:
                report.failed.append(f"{name}: {exc}")
                log.warning("slave sync of %s from master %s failed: %s", name, master, exc)
        if report.changed:
            self.persist()
            log.info("updated slave %s from master %s", ", ".join(report.changed), master)
        return report

    async def _body(self, master: str, code: int) -> bytes:
        response = await self.invoke(master, RemotingCommand.request(code), TIMEOUT)
        if response.code != ResponseCode.SUCCESS:
            raise RmqError(f"{master}: {response.describe()} {response.remark or ''}".rstrip())
        return response.body or b""

    async def _versioned(self, master: str, part: Versioned) -> bool:
        """Topics or groups: replaced by the master's, with its data version, when the versions
        differ (``DataVersion.equals``, then ``assignNewOne``)."""
        wrapper = jb.decode(part.wrapper, await self._body(master, part.code))
        theirs, version = getattr(wrapper, part.field), wrapper.data_version
        ours: DataVersion = getattr(self.state, part.version)
        if ours.counter == version.counter and ours.timestamp == version.timestamp:
            return False
        table: dict[str, dict] = getattr(self.state, part.table)
        table.clear()
        for name, config in theirs.items():
            table[name] = _shape(config, part.keys)
        ours.counter, ours.timestamp = version.counter, version.timestamp
        return True

    async def _timer_metrics(self, master: str) -> bool:
        """``syncTimerMetrics``: the master's metrics when their data version differs (written at
        once, not with the four config files)."""
        assert self.timer is not None
        return self.timer.take_metrics(await self._body(master, RC.GET_TIMER_METRICS))

    async def _offsets(self, master: str) -> bool:
        body = await self._body(master, RC.GET_ALL_CONSUMER_OFFSET)
        wrapper = jb.decode(jb.ConsumerOffsetSerializeWrapper, body)
        for key, queues in wrapper.offset_table.items():
            self.state.consumer_offsets[key] = dict(queues)
        return True  # 4.9.8 persists after every copy

    async def _delay(self, master: str) -> bool:
        response = await self.invoke(master, RemotingCommand.request(RC.GET_ALL_DELAY_OFFSET), TIMEOUT)
        if response.code != ResponseCode.SUCCESS or not response.body:
            return False  # "No delay offset in this broker": nothing to store
        wrapper = jb.decode(jb.DelayOffsetSerializeWrapper, response.body)
        self.state.delay_offsets = dict(wrapper.offset_table)
        return True


def _shape(bean: object, keys: tuple[str, ...]) -> dict:
    """A config bean as the 4.9.x fastjson dict the config files hold (its keys, sorted)."""
    value = jb.to_fastjson_value(bean)
    return {key: value[key] for key in keys if key in value}
