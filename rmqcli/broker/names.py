"""Topic and group names as RocketMQ 4.9.8 checks them: the one place the broker validates a name.

Topics follow ``org.apache.rocketmq.common.topic.TopicValidator`` (``validateTopic``: blank, then the
characters ``^[%|a-zA-Z0-9_-]+$``, then at most 127 characters; ``SYSTEM_TOPIC_SET`` and
``NOT_ALLOWED_SEND_TOPIC_SET``). The 4.9.8 broker checks no group name; its clients do
(``org.apache.rocketmq.client.Validators.checkGroup``: blank, at most 255 characters, the same
characters), and ``validate_group`` applies that check, with its messages, wherever this broker
would persist a group name or store under it. A valid name is a single path component: neither
``/``, ``.`` nor anything outside ASCII letters, digits and ``%|_-``.

The checks take the whole name (``fullmatch``: ``"Evil\\n"`` is illegal) and return the remark, or
None when the name is valid.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Protocol

from formats.names import (  # noqa: F401 - the names checked here, also importable from here
    DLQ_PREFIX,
    NOT_ALLOWED_SEND_TOPICS,
    REPLY_TOPIC_POSTFIX,
    RETRY_PREFIX,
    SYSTEM_TOPIC_PREFIX,
    SYSTEM_TOPICS,
)

VALID_CHARS = "^[%|a-zA-Z0-9_-]+$"  # TopicValidator.VALID_PATTERN_STR, as the remarks quote it
_VALID = re.compile(r"[%|a-zA-Z0-9_-]+")
TOPIC_MAX_LENGTH = 127  # TopicValidator.TOPIC_MAX_LENGTH
GROUP_MAX_LENGTH = 255  # Validators.CHARACTER_MAX_LENGTH
_NOT_WHITESPACE = frozenset("\u00a0\u2007\u202f")  # non-breaking spaces: not Character.isWhitespace


def _java_whitespace(ch: str) -> bool:
    """``Character.isWhitespace``."""
    if ch in "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f":
        return True
    return unicodedata.category(ch) in ("Zs", "Zl", "Zp") and ch not in _NOT_WHITESPACE


def is_blank(text: str | None) -> bool:
    """``UtilAll.isBlank``: None, empty, or whitespace only."""
    return not text or all(_java_whitespace(ch) for ch in text)


def _java_length(text: str) -> int:
    """``String.length()``: UTF-16 code units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def is_legal(name: str) -> bool:
    """Not ``TopicValidator.isTopicOrGroupIllegal`` (an empty name is legal there, as in Java)."""
    return not name or _VALID.fullmatch(name) is not None


@functools.lru_cache(maxsize=4096)  # the same few topics are sent to over and over
def validate_topic(topic: str | None) -> str | None:
    """``TopicValidator.validateTopic`` (its answer is SYSTEM_ERROR with this remark)."""
    if topic is None or is_blank(topic):
        return "The specified topic is blank."
    if not is_legal(topic):
        return f"The specified topic contains illegal characters, allowing only {VALID_CHARS}"
    if len(topic) > TOPIC_MAX_LENGTH:
        return "The specified topic is longer than topic max length."
    return None


@functools.lru_cache(maxsize=4096)
def validate_group(group: str | None) -> str | None:
    """``Validators.checkGroup`` of the 4.9.8 client, its messages as remarks."""
    if group is None or is_blank(group):
        return "the specified group is blank"
    if _java_length(group) > GROUP_MAX_LENGTH:
        return f"the specified group is longer than group max length {GROUP_MAX_LENGTH}."
    if not is_legal(group):
        return f"the specified group[{group}] contains illegal characters, allowing only {VALID_CHARS}"
    return None


def validate_subscription_topic(topic: str | None) -> str | None:
    """``validate_topic`` for a topic a consumer subscribes to: its own ``%RETRY%<group>`` may be
    as long as the prefix and a 255-character group (``validate_group``)."""
    if topic is None or is_blank(topic):
        return "The specified topic is blank."
    if not is_legal(topic):
        return f"The specified topic contains illegal characters, allowing only {VALID_CHARS}"
    limit = len(RETRY_PREFIX) + GROUP_MAX_LENGTH if topic.startswith(RETRY_PREFIX) else TOPIC_MAX_LENGTH
    if len(topic) > limit:
        return "The specified topic is longer than topic max length."
    return None


def is_system_topic(topic: str, extra: tuple[str, ...] = ()) -> bool:
    """``TopicValidator.isSystemTopic``; ``extra``: the names a broker adds to the set at start."""
    return topic in SYSTEM_TOPICS or topic in extra or topic.startswith(SYSTEM_TOPIC_PREFIX)


def broker_system_topics(
    cluster_name: str, broker_name: str, trace_topic: str | None = None
) -> tuple[str, ...]:
    """What ``TopicConfigManager``'s constructor adds to ``SYSTEM_TOPIC_SET``: the cluster name, the
    broker name, ``<cluster>_REPLY_TOPIC`` and, with ``traceTopicEnable``, ``msgTraceTopicName``
    (``trace_topic``)."""
    names = (cluster_name, broker_name, f"{cluster_name}_{REPLY_TOPIC_POSTFIX}")
    return (*names, trace_topic) if trace_topic else names


class NamedBroker(Protocol):
    """What ``config_system_topics`` reads of a broker's settings (``config.BrokerConfig``, which
    imports this module for its checks: named here by shape, not imported)."""

    @property
    def broker_cluster_name(self) -> str: ...
    @property
    def broker_name(self) -> str: ...
    @property
    def trace_topic_enable(self) -> bool: ...
    @property
    def msg_trace_topic_name(self) -> str: ...


def config_system_topics(config: NamedBroker) -> tuple[str, ...]:
    """``broker_system_topics`` of a broker's settings."""
    trace = config.msg_trace_topic_name if config.trace_topic_enable else None
    return broker_system_topics(config.broker_cluster_name, config.broker_name, trace)
