"""PEEK_MESSAGE (200052): ``PeekMessageProcessor`` of RocketMQ 5.1.1: what a POP would read now
(from the group's pop offsets, the pop-retry topic too), without a ck, without moving an offset.
SUCCESS (remark FOUND) with the stored records, else PULL_NOT_FOUND (NO_MESSAGE_IN_QUEUE); the
header has ``restNum`` (pop time, invisible time and revive queue are 0)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rmqcli.broker.pop import constants as k
from rmqcli.broker.pop.pop import PopError, check_read, pop_offset
from rmqcli.broker.pop.read import read_queue
from rmqcli.remoting.codes import ResponseCode as RS

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext


@dataclass
class PeekResult:
    code: int
    remark: str
    rest_num: int
    records: list[bytes] = field(default_factory=list)


def peek_message(ctl: BrokerContext, group: str, topic: str, queue_id: int, max_msg_nums: int) -> PeekResult:
    """The in-process call; ``PopError`` for a refusal."""
    if not 0 < max_msg_nums <= k.MAX_POP_NUMS:  # rmq's own bound (5.1.1 checks none here)
        raise PopError(RS.SYSTEM_ERROR, f"maxMsgNums {max_msg_nums} is out of [1, {k.MAX_POP_NUMS}]")
    config = check_read(ctl, group, topic, queue_id, "peeking")
    random_q = random.randrange(100)
    records: list[bytes] = []
    rest = 0

    def peek(retry: bool, qid: int) -> None:
        nonlocal rest
        name = k.pop_retry_topic(topic, group) if retry else topic
        offset = pop_offset(ctl, name, group, qid, k.INIT_MODE_MIN, False)
        rest += ctl.store.max_offset(name, qid) - offset
        if len(records) >= max_msg_nums:
            return
        got = read_queue(ctl, name, qid, offset, max_msg_nums - len(records), None)
        if got.status in ("OFFSET_TOO_SMALL", "OFFSET_OVERFLOW_BADLY"):
            got = read_queue(ctl, name, qid, got.next_begin_offset, max_msg_nums - len(records), None)
        records.extend(got.records)

    retry_config = ctl.topics.get(k.pop_retry_topic(topic, group))
    need_retry = random_q % 5 == 0
    if need_retry and retry_config is not None:
        for i in range(retry_config["readQueueNums"]):
            peek(True, (random_q + i) % retry_config["readQueueNums"])
    if queue_id < 0:
        for i in range(config["readQueueNums"]):
            peek(False, (random_q + i) % config["readQueueNums"])
    else:
        peek(False, queue_id)
    if not need_retry and len(records) < max_msg_nums and retry_config is not None:
        for i in range(retry_config["readQueueNums"]):
            peek(True, (random_q + i) % retry_config["readQueueNums"])
    if records:
        return PeekResult(RS.SUCCESS, "FOUND", rest, records)
    return PeekResult(RS.PULL_NOT_FOUND, "NO_MESSAGE_IN_QUEUE", rest)
