"""The POP state of one broker: settings, order info, long polling, the ck counter, the revive
service; created on first use (``pop_service``) and kept with the broker (``BrokerContext.parts``)."""

from __future__ import annotations

import itertools
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from rmqcli.broker.pop import constants as k
from rmqcli.broker.pop.config import PopConfig
from rmqcli.broker.pop.order import OrderInfoManager
from rmqcli.broker.pop.polling import PopLongPolling
from rmqcli.broker.pop.revive import ReviveService
from rmqcli.store.store import CONFIG_DIR

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext


class PopService:
    def __init__(self, ctl: BrokerContext):
        self.ctl = ctl
        self.config: PopConfig = ctl.config.pop
        self.order = OrderInfoManager(ctl.writer.root / CONFIG_DIR, ctl.store.config_writer)
        self.order.load()
        self.polling = PopLongPolling(self.config.pop_polling_size, self.config.max_pop_polling_size)
        # NOTIFICATION holds its requests apart (5.1.1: the NotificationProcessor's own service)
        self.notifications = PopLongPolling(self.config.pop_polling_size, self.config.max_pop_polling_size)
        ctl.store.listeners.append(self.polling.arrived)
        ctl.store.listeners.append(self.notifications.arrived)
        self._ck_numbers = itertools.count()
        self.revive_topic = k.revive_topic(ctl.config.broker_cluster_name)
        self._revive: ReviveService | None = None
        self.ensure_revive_topic()

    def ensure_revive_topic(self) -> None:
        """The revive topic, created at start as 5.1.1's ``TopicConfigManager`` does (8 queues, perm 6)."""
        if self.ctl.topics.get(self.revive_topic) is None and not self.ctl.config.is_slave:
            n = self.config.revive_queue_num
            self.ctl.topics.put(self.revive_topic, n, n, k.REVIVE_PERM)

    def wake(self, topic: str, group: str, queue_id: int = -1) -> None:
        """Wake the POPs and NOTIFICATIONs held for ``topic@group`` (queue ``queue_id``, -1 every)."""
        self.polling.notify(topic, group, queue_id)
        self.notifications.notify(topic, group, queue_id)

    def next_revive_qid(self) -> int:
        """Round robin over the revive queues (``ckMessageNumber % reviveQueueNum``)."""
        return next(self._ck_numbers) % self.config.revive_queue_num

    @property
    def revive(self) -> ReviveService:
        if self._revive is None:
            self._revive = ReviveService(self.ctl, self)
        return self._revive


def pop_service(ctl: BrokerContext) -> PopService:
    """The broker's POP state, made on first use (``BrokerContext.parts``)."""
    return ctl.parts.get(PopService, lambda: PopService(ctl))


def run(ctl: BrokerContext) -> Coroutine[Any, Any, None]:
    """The revive service (and the order info's persistence) until cancelled; also creates the
    revive topic, at start, as 5.1.1 does."""
    return pop_service(ctl).revive.run()
