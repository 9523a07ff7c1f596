"""NOTIFICATION (200054) and POLLING_INFO (200055) of RocketMQ 5.1.1 (``NotificationProcessor``,
``PollingInfoProcessor``): whether a POP of the group would find something (held like a POP until
there is, or ``pollTime`` ends; a blocked orderly queue has nothing), and how many POPs are held
under ``topic@group@queueId``."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from rmqcli.broker.pop import constants as k
from rmqcli.broker.pop.polling import Polling
from rmqcli.broker.pop.pop import check_read, now_ms, pop_offset
from rmqcli.broker.pop.service import pop_service

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext


def has_message(ctl: BrokerContext, group: str, topic: str, queue_id: int) -> bool:
    """One look, without waiting; ``PopError`` for a refusal."""
    config = check_read(ctl, group, topic, queue_id, "peeking")
    svc = pop_service(ctl)

    def has(retry: bool, qid: int) -> bool:
        if svc.order.check_block(None, topic, group, qid, 0):
            return False
        name = k.pop_retry_topic(topic, group) if retry else topic
        return ctl.store.max_offset(name, qid) - pop_offset(ctl, name, group, qid, k.INIT_MODE_MIN, False) > 0

    random_q = random.randrange(100)
    retry_config = ctl.topics.get(k.pop_retry_topic(topic, group))
    retry_n = retry_config["readQueueNums"] if retry_config is not None else 0
    n = config["readQueueNums"]
    normal = [(random_q + i) % n for i in range(n)] if queue_id < 0 else [queue_id]
    return any(has(True, (random_q + i) % retry_n) for i in range(retry_n)) or any(
        has(False, q) for q in normal
    )


async def notification(
    ctl: BrokerContext, group: str, topic: str, queue_id: int, poll_time: int, born_time: int
) -> bool:
    """NOTIFICATION, held while there is nothing (the in-process call)."""
    svc = pop_service(ctl)
    born_time = born_time if born_time > 0 else now_ms()
    deadline = min(born_time + poll_time, now_ms() + svc.config.max_poll_ms)
    while True:
        if has_message(ctl, group, topic, queue_id):
            return True
        remaining = deadline - now_ms()
        if svc.notifications.check(topic, group, queue_id, poll_time, remaining) != Polling.SUSPENDED:
            return False
        await svc.notifications.wait(topic, group, queue_id, remaining / 1000)


def polling_num(ctl: BrokerContext, group: str, topic: str, queue_id: int) -> int:
    """POLLING_INFO: the POPs held under ``topic@group@queueId`` (``PopError`` for a refusal)."""
    check_read(ctl, group, topic, queue_id, "peeking")
    return pop_service(ctl).polling.count(topic, group, queue_id)
