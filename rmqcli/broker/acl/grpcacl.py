"""The plain ACL for the calls of 5.x clients over gRPC, as 5.1.1's proxy checks them
(``AuthenticationInterceptor`` -> ``PlainAccessValidator.parse(GeneratedMessageV3,
AuthenticationHeader)`` -> ``PlainPermissionManager.validate`` with ``PlainPermissionChecker``),
against the same ``plain_acl.yml`` accounts as remoting.

Every request message (each command of a Telemetry stream too) is checked:

1. parse, before any white list: the ``authorization`` metadata as ``AuthorizationHeader`` reads
   it (``<method> Credential=<ak>[/...], SignedHeaders=x-mq-date-time, Signature=<hex>``; the
   method and SignedHeaders are not checked), then ``x-mq-date-time``, then the resources the
   message names (below). A malformed header or message is refused; a missing ``authorization``
   or ``x-mq-date-time`` is ``MissingMetadata`` (5.1.1 fails there with a NullPointerException,
   which its clients see as gRPC INTERNAL);
2. ``validator.authenticate``: global white list, access key, the account's white list, and the
   signature: HmacSHA1 of the ``x-mq-date-time`` value with the secret key, sent in hex (the
   date is not checked against the clock, and ``x-mq-session-token`` not at all, as 5.1.1);
3. a send to RMQ_SYS_TRACE_TOPIC passes; an ``admin: true`` account passes everything;
4. each resource against the account's entry, else its default (``validator.check_resources``).

The resources (``parse``'s switch; PUB, SUB, ANY as ``permissions``):

* QueryRoute: the topic ANY;
* SendMessage: its messages' one topic PUB (no message, or two topics: refused); EndTransaction:
  the topic PUB;
* QueryAssignment, ReceiveMessage (the queue's topic), AckMessage, ChangeInvisibleDuration,
  ForwardMessageToDeadLetterQueue: the group SUB and the topic SUB;
* Heartbeat of a consumer: its group SUB (none: refused); NotifyClientTermination: the group SUB;
* Telemetry ``settings``: each publishing topic PUB; the subscription's group SUB and each of its
  topics SUB; neither publishing nor subscription: refused. Other commands name nothing.

A topic that is a POP retry topic ``%RETRY%G_T`` also needs SUB on the group G and the call's
permission on T (``ownership.pop_retry_resources``; rmq's own, as over remoting). Without the
broker's group names (``validate``'s ``names``), every reading of the name is checked.

No MessagingService call maps to an admin request code (``RequestMapping``), so none is
admin-only. Two deliberate differences from 5.1.1:

* a group is checked as a group (its ``groupPerms`` entry, else ``defaultGroupPerm``), as 5.1.4's
  ``addGroupResourceAndPerm`` does; 5.1.1 checks the group's bare name as a topic, so
  ``groupPerms`` had no effect over gRPC;
* a resource is checked by its name alone: rmq's gRPC calls use ``Resource.name`` and ignore
  ``resource_namespace`` (5.1.1 checks ``namespace%name``).
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from typing import Any

from rmqcli.broker.acl.ownership import Names, pop_retry_resources
from rmqcli.broker.acl.permissions import ANY, PUB, SUB, retry_topic
from rmqcli.broker.acl.plainacl import PlainAclFiles
from rmqcli.broker.acl.validator import AccessDenied, authenticate, check_resources, traced

CONSUMER_TYPES = frozenset({"PUSH_CONSUMER", "SIMPLE_CONSUMER"})
_HEX = re.compile(r"[0-9a-fA-F]*")


class MissingMetadata(Exception):
    """A call without ``authorization`` or ``x-mq-date-time``: 5.1.1's proxy fails on it with a
    NullPointerException, answered as gRPC INTERNAL (before any white list is looked at)."""


@dataclass(frozen=True)
class Authorization:
    """``AuthorizationHeader``: the access key, and the signature in Base64 (as it compares)."""

    access_key: str | None
    signature: str | None


def java_split(text: str, sep: str, limit: int = 0) -> list[str]:
    """``String.split`` on a literal separator: ``limit`` 0 drops trailing empty strings, a
    positive one splits at most ``limit - 1`` times; no separator at all gives ``[text]``."""
    if sep not in text:
        return [text]
    if limit > 0:
        return text.split(sep, limit - 1)
    parts = text.split(sep)
    while parts and not parts[-1]:
        parts.pop()
    return parts


def hex_to_base64(text: str) -> str:
    """``AuthorizationHeader.hexToBase64`` (commons-codec ``Hex.decodeHex``)."""
    if len(text) % 2:
        raise AccessDenied("Odd number of characters.")
    if not _HEX.fullmatch(text):
        index, char = next((i, c) for i, c in enumerate(text) if c not in "0123456789abcdefABCDEF")
        raise AccessDenied(f"Illegal hexadecimal character {char} at index {index}")
    return base64.b64encode(bytes.fromhex(text)).decode("ascii")


def parse_authorization(header: str) -> Authorization:
    """5.1.1's ``AuthorizationHeader(String)``: the first space ends the method, then
    comma-separated ``key=value`` items; ``Credential`` up to its first ``/`` is the access key."""
    method_rest = java_split(header, " ", 2)
    if len(method_rest) != 2:
        raise AccessDenied("authorization header is incorrect")
    access_key: str | None = None
    signature: str | None = None
    for item in java_split(method_rest[1], ","):
        kv = java_split(item.strip(" \t\r\n"), "=", 2)
        if len(kv) != 2:
            raise AccessDenied(f"authorization keyValues length is incorrect, actual length={len(kv)}")
        if kv[0] == "Credential":
            credential = java_split(kv[1], "/")
            if not credential:
                raise AccessDenied("authorization credential length is incorrect, actual length=0")
            access_key = credential[0]
        elif kv[0] == "Signature":
            signature = hex_to_base64(kv[1])
    return Authorization(access_key, signature)


def _enum_name(message: Any, field: str) -> str:
    value = getattr(message, field)
    enum = message.DESCRIPTOR.fields_by_name[field].enum_type.values_by_number.get(value)
    return enum.name if enum is not None else str(value)


def needed_resources(message: Any, names: Names | None = None) -> dict[str, int]:
    """The resources a request message names and the permission each needs: 5.1.1's
    (``parsed_resources``), then each POP retry topic's group and topic."""
    needed = parsed_resources(message)
    return with_pop_retry(needed, names)


def with_pop_retry(needed: dict[str, int], names: Names | None) -> dict[str, int]:
    """``needed`` and, for each POP retry topic in it, its group and topic (``ownership``)."""
    popped: dict[str, int] = {}
    for resource, perm in needed.items():
        for key, wanted in pop_retry_resources(resource, perm, names).items():
            popped.setdefault(key, wanted)
    for key, wanted in popped.items():
        needed.setdefault(key, wanted)
    return needed


def parsed_resources(message: Any) -> dict[str, int]:
    """The resources a request message names and the permission each needs (``parse``'s switch;
    groups under their retry topic, as the ACL keeps them)."""
    name = message.DESCRIPTOR.name
    needed: dict[str, int] = {}

    def topic(resource: Any, perm: int) -> None:
        needed[resource.name] = perm

    def group(resource: Any) -> None:
        needed[retry_topic(resource.name) or ""] = SUB

    if name == "HeartbeatRequest":
        if _enum_name(message, "client_type") in CONSUMER_TYPES:
            if not message.HasField("group"):
                raise AccessDenied("Consumer heartbeat doesn't have group")
            group(message.group)
    elif name == "SendMessageRequest":
        if not message.messages:
            raise AccessDenied("SendMessageRequest, messageCount is zero")
        first = message.messages[0].topic
        if any(m.topic != first for m in message.messages):
            raise AccessDenied("SendMessageRequest, messages' topic is not consistent")
        topic(first, PUB)
    elif name == "ReceiveMessageRequest":
        group(message.group)
        topic(message.message_queue.topic, SUB)
    elif name in (
        "AckMessageRequest",
        "ChangeInvisibleDurationRequest",
        "ForwardMessageToDeadLetterQueueRequest",
    ):
        group(message.group)
        topic(message.topic, SUB)
    elif name == "EndTransactionRequest":
        topic(message.topic, PUB)
    elif name == "TelemetryCommand":
        if message.WhichOneof("command") == "settings":
            settings = message.settings
            if settings.HasField("publishing"):
                for resource in settings.publishing.topics:
                    topic(resource, PUB)
            if settings.HasField("subscription"):
                group(settings.subscription.group)
                for entry in settings.subscription.subscriptions:
                    topic(entry.topic, SUB)
            if not settings.HasField("publishing") and not settings.HasField("subscription"):
                raise AccessDenied("settings command doesn't have publishing or subscription")
    elif name == "NotifyClientTerminationRequest":
        group(message.group)
    elif name == "QueryRouteRequest":
        topic(message.topic, ANY)
    elif name == "QueryAssignmentRequest":
        group(message.group)
        topic(message.topic, SUB)
    return needed


def validate(
    files: PlainAclFiles,
    remote_host: str,
    authorization: str | None,
    date_time: str | None,
    message: Any,
    names: Names | None = None,
) -> None:
    """Raise ``AccessDenied`` (or ``MissingMetadata``) unless ``message`` may run; ``names``: the
    broker's groups, to read a POP retry topic by (None: every reading)."""
    if authorization is None:
        raise MissingMetadata("the call has no authorization metadata")
    signed = parse_authorization(authorization)
    if date_time is None:
        raise MissingMetadata("the call has no x-mq-date-time metadata")
    try:
        needed = parsed_resources(message)
    except AccessDenied:
        raise
    except Exception as exc:  # parse(): a message it cannot read
        raise AccessDenied(str(exc) or type(exc).__name__) from None
    stamp = date_time.encode("utf-8")
    account = authenticate(files, remote_host, signed.access_key, lambda: stamp, signed.signature)
    if account is None or traced(needed) or account.admin:  # traced: 5.1.1's resources only
        return
    check_resources(account, with_pop_retry(needed, names), listed="No permission")
