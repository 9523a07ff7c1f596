"""What rmq checks beyond 4.9.8's ``PlainAccessValidator.parse`` (``permissions.needed_resources``):
the permissions follow the data, not the request code (issue 41).

* A consumer group named by any header field (``consumerGroup``, ``group``) needs SUB on it.
* A retry or dead-letter topic belongs to its group: a send to ``%RETRY%G`` needs SUB on G whatever
  group field it carries (4.9.8 checks only the group the header names, and nothing without one);
  ``%DLQ%G`` needs SUB on G besides the topic's own permission.
* LOCK_BATCH_MQ and UNLOCK_BATCH_MQ: SUB on the body's group and on each queue's topic;
  QUERY_ASSIGNMENT: SUB on the body's topic and group; QUERY_CONSUME_QUEUE, QUERY_CONSUMER_OFFSET,
  GET_CONSUME_STATS and QUERY_CONSUME_TIME_SPAN: SUB on the header's topic.
* The system topics that hold other topics' messages (``HOLDING_TOPICS`` and every ``rmq_sys_``
  topic) are an admin's only, whatever the request names them for (send, pull, pop, query, a
  message read by id): ``admin_topic``.

4.9.8 checks none of these; a refusal answers NO_PERMISSION (16) with an ``AclException`` text as
the 4.9.8 checks do.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from formats.names import (
    DLQ_PREFIX,
    RETRY_PREFIX,
    SCHEDULE_TOPIC,
    SYSTEM_TOPIC_PREFIX,
    TIMER_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)
from rmqcli.broker.acl.permissions import SEND_V2_CODES, SUB, retry_topic
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC

HOLDING_TOPICS = frozenset(
    {SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC, TIMER_TOPIC}
)
GROUP_FIELDS = ("consumerGroup", "group")
TOPIC_READS = frozenset(
    {RC.QUERY_CONSUME_QUEUE, RC.QUERY_CONSUMER_OFFSET, RC.GET_CONSUME_STATS, RC.QUERY_CONSUME_TIME_SPAN}
)
BODY_GROUPS = frozenset({RC.LOCK_BATCH_MQ, RC.UNLOCK_BATCH_MQ, RC.QUERY_ASSIGNMENT})
MAX_BODY_QUEUES = 4096  # topics of one lock body looked at; more is no client's request


def is_holding_topic(topic: str) -> bool:
    """A system topic whose messages are other topics' (delayed, half, timer, revive...)."""
    return topic in HOLDING_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def owning_group(topic: str) -> str | None:
    """The group resource (its retry topic) a retry or dead-letter topic belongs to."""
    if topic.startswith(RETRY_PREFIX):
        return topic
    if topic.startswith(DLQ_PREFIX):
        return retry_topic(topic[len(DLQ_PREFIX) :])
    return None


def admin_topic(needed: dict[str, int]) -> str | None:
    """The first holding topic among ``needed``: only an admin account may name it."""
    return next((name for name in needed if is_holding_topic(name)), None)


def _body_resources(request: RemotingCommand, add: Callable[[str | None, int], None]) -> None:
    """The group and topics a lock, unlock or assignment body names (unreadable: the handler says)."""
    if not request.body:
        return
    try:
        data = json.loads(request.body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return
    if not isinstance(data, dict):
        return
    group = data.get("consumerGroup")
    if isinstance(group, str):
        add(retry_topic(group), SUB)
    topics = [data.get("topic")]
    queues = data.get("mqSet")
    if isinstance(queues, list):
        topics += [q.get("topic") for q in queues[:MAX_BODY_QUEUES] if isinstance(q, dict)]
    for topic in topics:
        if isinstance(topic, str):
            add(topic, SUB)


def extra_resources(request: RemotingCommand) -> dict[str, int]:
    """The resources rmq checks besides 4.9.8's (see the module docstring)."""
    f = request.ext_fields
    code = request.code
    extra: dict[str, int] = {}

    def add(resource: str | None, perm: int) -> None:
        if resource is not None:
            extra.setdefault(resource, perm)

    for key in GROUP_FIELDS:
        group = f.get(key)
        if group is not None:
            add(retry_topic(group), SUB)
    topic = f.get("b") if code in SEND_V2_CODES else f.get("topic")
    if topic is not None:
        add(owning_group(topic), SUB)
        if code in TOPIC_READS:
            add(topic, SUB)
    if code in BODY_GROUPS:
        _body_resources(request, add)
    return extra
