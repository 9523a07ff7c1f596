"""What rmq checks beyond 4.9.8's ``PlainAccessValidator.parse`` (``permissions.needed_resources``):
the permissions follow the data, not the request code (issue 41).

* A consumer group named by any header field (``consumerGroup``, ``group``) needs SUB on it.
* A retry or dead-letter topic belongs to its group: a send to ``%RETRY%G`` needs SUB on G whatever
  group field it carries (4.9.8 checks only the group the header names, and nothing without one);
  ``%DLQ%G`` needs SUB on G besides the topic's own permission.
* A POP retry topic ``%RETRY%G_T`` (5.1.1's ``KeyBuilder.buildPopRetryTopic``) holds topic T's
  messages for group G: besides the group ``G_T`` it is read as, it needs SUB on the group G and
  the topic's permission on T (SUB to read it, PUB to send into it), wherever a request names it
  (a header's topic, a message read by id or sent back: ``messages``). The name is split at each
  ``_`` after which a subscription group of that name exists on the broker (``Names``); where
  several do (or the names are unknown: every ``_``), every split is checked: the stricter.
* LOCK_BATCH_MQ and UNLOCK_BATCH_MQ: SUB on the body's group and on each queue's topic;
  QUERY_ASSIGNMENT: SUB on the body's topic and group; QUERY_CONSUME_QUEUE, QUERY_CONSUMER_OFFSET,
  GET_CONSUME_STATS and QUERY_CONSUME_TIME_SPAN: SUB on the header's topic.
* A topic's metadata needs SUB on it: GET_TOPIC_STATS_INFO, GET_MAX_OFFSET, GET_MIN_OFFSET,
  SEARCH_OFFSET_BY_TIMESTAMP, GET_EARLIEST_MSG_STORETIME, QUERY_TOPIC_CONSUME_BY_WHO and
  GET_TOPIC_CONFIG (351) on the header's ``topic``; VIEW_BROKER_STATS_DATA on the topic (and
  group) its ``statsKey`` names (``STATS_KEYS``; a name not listed: every part as a topic).
  An admin account reads any topic's (it may read the whole tables): these topic reads
  (``TOPIC_READS``) and stats are not checked for it, even with entries of its own.
* The system topics that hold other topics' messages (``HOLDING_TOPICS`` and every ``rmq_sys_``
  topic) are an admin's only, whatever the request names them for (send, pull, pop, query, a
  message read by id): ``admin_topic``.

4.9.8 checks none of these; a refusal answers NO_PERMISSION (16) with an ``AclException`` text as
the 4.9.8 checks do.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

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
from rmqcli.broker.acl.permissions import PUB, SEND_V2_CODES, SUB, retry_topic
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC

HOLDING_TOPICS = frozenset(
    {SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC, TIMER_TOPIC}
)
GROUP_FIELDS = ("consumerGroup", "group")
TOPIC_READS = frozenset(
    {RC.QUERY_CONSUME_QUEUE, RC.QUERY_CONSUMER_OFFSET, RC.GET_CONSUME_STATS, RC.QUERY_CONSUME_TIME_SPAN,
     RC.GET_TOPIC_STATS_INFO, RC.GET_MAX_OFFSET, RC.GET_MIN_OFFSET, RC.SEARCH_OFFSET_BY_TIMESTAMP,
     RC.GET_EARLIEST_MSG_STORETIME, RC.QUERY_TOPIC_CONSUME_BY_WHO, RC.GET_TOPIC_CONFIG}
)  # fmt: skip
STATS_KEYS = {
    "TOPIC_PUT_NUMS": "T", "TOPIC_PUT_SIZE": "T", "GROUP_GET_NUMS": "TG", "GROUP_GET_SIZE": "TG",
    "SNDBCK_PUT_NUMS": "TG", "GROUP_GET_LATENCY": "TG", "QUEUE_PUT_NUMS": "T-", "QUEUE_PUT_SIZE": "T-",
    "QUEUE_GET_NUMS": "T-G", "QUEUE_GET_SIZE": "T-G", "GROUP_GET_FALL_SIZE": "-TG",
    "GROUP_GET_FALL_TIME": "-TG",
}  # fmt: skip
"""``BrokerStatsManager``'s stats names and what each ``@``-separated part of their keys is: a
topic (T), a group (G) or a queue id (-)."""
BODY_GROUPS = frozenset({RC.LOCK_BATCH_MQ, RC.UNLOCK_BATCH_MQ, RC.QUERY_ASSIGNMENT})
MAX_BODY_QUEUES = 4096  # topics of one lock body looked at; more is no client's request
SEND_CODES = SEND_V2_CODES | {RC.SEND_MESSAGE, RC.SEND_REPLY_MESSAGE}
MAX_POP_RETRY_NAME = 1024  # a longer %RETRY% name is no group's and topic's (255 + 127 characters)


class Names(Protocol):
    """The subscription groups a broker knows (``subscriptionGroup.json``'s table)."""

    def has_group(self, name: str) -> bool: ...


class StoreNames:
    """``Names`` over a store writer's live config tables (``BrokerConfigState.groups``)."""

    def __init__(self, writer: Any):
        self.writer = writer

    def has_group(self, name: str) -> bool:
        return name in self.writer.config.groups


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


def pop_retry_resources(topic: str, perm: int, names: Names | None) -> dict[str, int]:
    """The group G (SUB) and topic T (``perm``) of each reading of ``topic`` as a POP retry topic
    ``%RETRY%G_T`` whose group G exists (``names`` None: every reading); empty for other topics."""
    if not topic.startswith(RETRY_PREFIX) or len(topic) > MAX_POP_RETRY_NAME:
        return {}
    rest = topic[len(RETRY_PREFIX) :]
    found: dict[str, int] = {}
    at = rest.find("_", 1)
    while 0 < at < len(rest) - 1:
        group = rest[:at]
        if names is None or names.has_group(group):
            found.setdefault(RETRY_PREFIX + group, SUB)
            found.setdefault(rest[at + 1 :], perm)
        at = rest.find("_", at + 1)
    return found


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


def _stats_resources(request: RemotingCommand, add: Callable[[str | None, int], None]) -> None:
    """The topic and group of VIEW_BROKER_STATS_DATA's ``statsKey`` (``STATS_KEYS``)."""
    key = request.ext_fields.get("statsKey")
    if key is None:
        return
    parts = key.split("@")
    kinds = STATS_KEYS.get(request.ext_fields.get("statsName") or "")
    if kinds is None or len(kinds) != len(parts):
        kinds = "T" * len(parts)  # not a key this broker knows: each part as a topic, the stricter
    for kind, part in zip(kinds, parts, strict=True):
        if kind == "T":
            add(part, SUB)
        elif kind == "G":
            add(retry_topic(part), SUB)


def extra_resources(
    request: RemotingCommand, names: Names | None = None, *, admin: bool = False
) -> dict[str, int]:
    """The resources rmq checks besides 4.9.8's (see the module docstring); ``names``: the
    broker's groups, to read a POP retry topic by (None: every reading); ``admin``: the account
    is one, and reads any topic's metadata."""
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
        if code in TOPIC_READS and not admin:
            add(topic, SUB)
        for resource, perm in pop_retry_resources(topic, PUB if code in SEND_CODES else SUB, names).items():
            add(resource, perm)
    if code in BODY_GROUPS:
        _body_resources(request, add)
    if code == RC.VIEW_BROKER_STATS_DATA and not admin:
        _stats_resources(request, add)
    return extra
