"""The broker's ``config/*.json`` in the 4.9.x shapes (formats.md §5.3).

``TopicConfig`` and ``SubscriptionGroupConfig`` are fastjson beans: their keys come out in
alphabetical order. consumerOffset.json and delayOffset.json have bare integer keys.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from formats import fastjson
from formats.names import PERM_READ_WRITE, SCHEDULE_TOPIC, TIMER_TOPIC
from rmqcli.store.configfiles import DELAY, OFFSETS, SUBSCRIPTIONS, TOPICS, load_config, write_config

DEFAULT_QUEUE_NUMS = 4  # what a producer asks for when a topic is auto-created
SINGLE_TAG = "SINGLE_TAG"


def topic_config(name: str, queue_nums: int, perm: int = PERM_READ_WRITE, order: bool = False) -> dict:
    return {
        "order": order,
        "perm": perm,
        "readQueueNums": queue_nums,
        "topicFilterType": SINGLE_TAG,
        "topicName": name,
        "topicSysFlag": 0,
        "writeQueueNums": queue_nums,
    }


def subscription_group_config(name: str) -> dict:
    """The 9 keys of a 4.9.x ``SubscriptionGroupConfig`` with the broker's defaults."""
    return {
        "brokerId": 0,
        "consumeBroadcastEnable": True,
        "consumeEnable": True,
        "consumeFromMinEnable": True,
        "groupName": name,
        "notifyConsumerIdsChangedEnable": True,
        "retryMaxTimes": 16,
        "retryQueueNums": 1,
        "whichBrokerWhenConsumeSlowly": 1,
    }


@dataclass
class DataVersion:
    counter: int = 0
    timestamp: int = 0

    def bump(self, now: int) -> None:
        self.counter += 1
        self.timestamp = now

    def as_dict(self) -> dict:
        return {"counter": self.counter, "timestamp": self.timestamp}


@dataclass
class BrokerConfigState:
    """Topics, subscription groups, consumer offsets and delay offsets of one store."""

    topics: dict[str, dict] = field(default_factory=dict)
    topics_version: DataVersion = field(default_factory=DataVersion)
    groups: dict[str, dict] = field(default_factory=dict)
    groups_version: DataVersion = field(default_factory=DataVersion)
    consumer_offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    delay_offsets: dict[int, int] = field(default_factory=dict)

    def ensure_topic(self, name: str, queue_id: int, clock: Callable[[], int], delay_levels: int) -> None:
        """Register a topic on first use; grow its queue count to cover ``queue_id``. The 5.x timer's
        topic is never registered (a 5.1.1 broker keeps no config for it)."""
        if name == TIMER_TOPIC:
            return
        current = self.topics.get(name)
        if current is not None and current["writeQueueNums"] > queue_id:
            return
        if current is not None:  # grown, everything else kept (perm, order, 5.x attributes...)
            grown = dict(current)
            grown["writeQueueNums"] = queue_id + 1
            grown["readQueueNums"] = max(current["readQueueNums"], queue_id + 1)
            self.topics[name] = grown
            self.topics_version.bump(clock())
            return
        wanted = delay_levels if name == SCHEDULE_TOPIC else DEFAULT_QUEUE_NUMS
        self.set_topic(name, max(queue_id + 1, wanted), clock())

    def set_topic(self, name: str, queue_nums: int, now: int, *, perm: int = PERM_READ_WRITE, order=False):
        self.topics[name] = topic_config(name, queue_nums, perm, order)
        self.topics_version.bump(now)

    def set_group(self, name: str, now: int) -> None:
        self.groups[name] = subscription_group_config(name)
        self.groups_version.bump(now)

    def set_consumer_offset(self, topic: str, group: str, queue_id: int, offset: int) -> None:
        self.consumer_offsets.setdefault(f"{topic}@{group}", {})[queue_id] = offset

    def write(self, config_dir: Path) -> None:
        self.write_topics(config_dir)
        write_config(config_dir, SUBSCRIPTIONS, self._groups_json())
        write_config(config_dir, OFFSETS, {"offsetTable": self.consumer_offsets})
        write_config(config_dir, DELAY, {"offsetTable": dict(sorted(self.delay_offsets.items()))})

    def write_topics(self, config_dir: Path) -> None:
        """topics.json alone (``TopicConfigManager.persist`` after ``updateTopicConfig``)."""
        write_config(config_dir, TOPICS, self._topics_json())

    def texts(self, *, topics_only: bool = False, topics: bool = True) -> dict[str, str]:
        """The files' texts as ``write`` makes them (fastjson, pretty), by file name: taken at once,
        written later (``rmqcli.store.write.configsync``); without topics.json when ``topics`` is
        false."""
        tables: dict[str, dict[str, Any]] = {TOPICS: self._topics_json()} if topics else {}
        if not topics_only:
            tables[SUBSCRIPTIONS] = self._groups_json()
            tables[OFFSETS] = {"offsetTable": self.consumer_offsets}
            tables[DELAY] = {"offsetTable": dict(sorted(self.delay_offsets.items()))}
        return {name: fastjson.dumps(data, pretty=True) for name, data in tables.items()}

    def _topics_json(self) -> dict[str, Any]:
        return {"dataVersion": self.topics_version.as_dict(), "topicConfigTable": self.topics}

    def _groups_json(self) -> dict[str, Any]:
        return {"dataVersion": self.groups_version.as_dict(), "subscriptionGroupTable": self.groups}

    @classmethod
    def load(cls, config_dir: Path) -> BrokerConfigState:
        """What the files in ``config_dir`` hold (missing files give empty tables)."""
        state = cls()
        topics = load_config(config_dir, TOPICS).data
        state.topics = dict(topics.get("topicConfigTable", {}))
        state.topics_version = _version(topics)
        groups = load_config(config_dir, SUBSCRIPTIONS).data
        state.groups = dict(groups.get("subscriptionGroupTable", {}))
        state.groups_version = _version(groups)
        offsets = load_config(config_dir, OFFSETS).data.get("offsetTable", {})
        state.consumer_offsets = {k: {int(q): int(o) for q, o in v.items()} for k, v in offsets.items()}
        delay = load_config(config_dir, DELAY).data.get("offsetTable", {})
        state.delay_offsets = {int(k): int(v) for k, v in delay.items()}
        return state


def _version(data: dict) -> DataVersion:
    dv = data.get("dataVersion", {})
    return DataVersion(int(dv.get("counter", 0)), int(dv.get("timestamp", 0)))
