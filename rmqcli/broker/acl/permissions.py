"""Permissions and the resources a request needs (``Permission``, ``PlainAccessValidator.parse``).

Permission bits as 4.9.x: DENY 1, ANY 2, PUB 4, SUB 8. A group's permission is kept under its
retry topic ``%RETRY%group``; a resource that is a retry topic is checked against the group
permissions. The request codes and the fields they are read from follow 4.9.8's ``parse``; rmq
adds the batch and reply sends (4.9.8 checks no resource for them) and more admin-only codes
(``ADMIN_CODES``): the ACL's own updates and the commands that delete data.
"""

from __future__ import annotations

from formats.names import RETRY_PREFIX
from rmqcli.broker.acl.addresses import AclConfigError
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC

DENY, ANY, PUB, SUB = 1, 2, 4, 8
_NAMES = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}

ADMIN_CODES_498 = frozenset(
    {RC.UPDATE_AND_CREATE_TOPIC, RC.UPDATE_BROKER_CONFIG, RC.DELETE_TOPIC_IN_BROKER,
     RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, RC.DELETE_SUBSCRIPTIONGROUP}
)  # fmt: skip
NAMESRV_ADMIN_CODES = frozenset(
    {RC.PUT_KV_CONFIG, RC.DELETE_KV_CONFIG, RC.WIPE_WRITE_PERM_OF_BROKER, RC.ADD_WRITE_PERM_OF_BROKER,
     RC.DELETE_TOPIC_IN_NAMESRV, RC.UPDATE_NAMESRV_CONFIG, RC.REGISTER_TOPIC_IN_NAMESRV}
)  # fmt: skip
"""The embedded NameServer's writes: kept for admin accounts when the broker has ``aclEnable``."""
NAMESRV_BROKER_CODES = frozenset({RC.REGISTER_BROKER, RC.UNREGISTER_BROKER, RC.BROKER_HEARTBEAT})
"""A broker's own requests to the embedded NameServer: with ``aclEnable`` signed by an admin
account or by the broker of the same process (4.9.8 and 5.1.1 brokers sign none: an address in
``globalWhiteRemoteAddresses`` lets a Java broker's requests through)."""
ADMIN_CODES = ADMIN_CODES_498 | NAMESRV_ADMIN_CODES | NAMESRV_BROKER_CODES | frozenset(
    {RC.UPDATE_AND_CREATE_TOPIC_LIST, RC.UPDATE_AND_CREATE_ACL_CONFIG, RC.DELETE_ACL_CONFIG,
     RC.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, RC.GET_BROKER_CLUSTER_ACL_CONFIG, RC.TRIGGER_DELETE_FILES,
     RC.CLEAN_EXPIRED_CONSUMEQUEUE, RC.CLEAN_UNUSED_TOPIC, RC.DELETE_EXPIRED_COMMITLOG,
     RC.RESET_CONSUMER_OFFSET_IN_BROKER, RC.INVOKE_BROKER_TO_RESET_OFFSET, RC.CLONE_GROUP_OFFSET,
     RC.SET_MESSAGE_REQUEST_MODE}
) | frozenset(
    {RC.GET_ALL_TOPIC_CONFIG, RC.GET_ALL_CONSUMER_OFFSET, RC.GET_ALL_DELAY_OFFSET,
     RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, RC.GET_BROKER_CONFIG, RC.GET_BROKER_RUNTIME_INFO,
     RC.GET_BROKER_CONSUME_STATS}
)  # fmt: skip
"""Codes only an ``admin: true`` account may send: 4.9.8's five, and rmq's additions (the ACL's
own updates, the commands that delete data, and the broker's whole tables and settings, which a
slave copies: its account must be an admin, or its address in ``globalWhiteRemoteAddresses``; and
GET_BROKER_CONSUME_STATS, every group's consume stats)."""


def parse_perm(text: object) -> int:
    """``Permission.parsePermFromString``: unknown or missing text is DENY."""
    return _NAMES.get(str(text).strip(), DENY) if text is not None else DENY


def check_permission(needed: int, owned: int) -> bool:
    """``Permission.checkPermission``."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def retry_topic(group: str | None) -> str | None:
    return None if group is None else RETRY_PREFIX + group


def is_group_resource(resource: str) -> bool:
    return resource.startswith(RETRY_PREFIX)


def describe(resource: str) -> str:
    """``PlainAccessResource.printStr``: ``group:G`` or ``topic:T``."""
    if is_group_resource(resource):
        return f"group:{resource[len(RETRY_PREFIX) :]}"
    return f"topic:{resource}"


def parse_resource_perms(entries: object, *, topics: bool) -> dict[str, int]:
    """``Permission.parseResourcePerms``: ``name=PERM`` entries; groups keyed by retry topic."""
    if not entries:
        return {}
    if not isinstance(entries, list):
        raise AclConfigError(
            f"Parse resource permission failed for {'topic' if topics else 'group'}:{entries}"
        )
    perms: dict[str, int] = {}
    for entry in entries:
        items = [part for part in str(entry).split("=") if part]
        if len(items) != 2:
            raise AclConfigError(
                f"Parse resource permission failed for {'topic' if topics else 'group'}:{entry}"
            )
        name = items[0].strip()
        perms[name if topics else RETRY_PREFIX + name] = parse_perm(items[1])
    return perms


def check_resource_perms(entries: list[str] | None) -> None:
    """``Permission.checkResourcePerms``: what an update request may carry."""
    for entry in entries or []:
        items = [part for part in entry.split("=") if part]
        if len(items) != 2:
            raise AclConfigError(
                f"Parse Resource format error for {entry}.\n"
                "The expected resource format is 'Res=Perm'. For example: topicA=SUB"
            )
        if items[1].strip() != "DENY" and parse_perm(items[1]) == DENY:
            raise AclConfigError(
                f"Parse resource permission error for {entry}.\n"
                "The expected permissions are 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'."
            )


POP_FAMILY = frozenset(
    {
        RC.POP_MESSAGE,
        RC.ACK_MESSAGE,
        RC.PEEK_MESSAGE,
        RC.CHANGE_MESSAGE_INVISIBLETIME,
        RC.NOTIFICATION,
        RC.POLLING_INFO,
    }
)
"""5.x POP consumption: SUB on the topic and on the group, as a pull needs (5.1.1's
``PlainAccessResource.parse`` has no case for them: any account with a valid signature may pop)."""


SEND_V2_CODES = frozenset({RC.SEND_MESSAGE_V2, RC.SEND_BATCH_MESSAGE, RC.SEND_REPLY_MESSAGE_V2})


def needed_resources(request: RemotingCommand) -> dict[str, int]:
    """The resources ``request`` touches and the permission each needs (``parse``'s switch)."""
    f = request.ext_fields
    code = request.code
    needed: dict[str, int] = {}

    def add(resource: str | None, perm: int) -> None:
        if resource is not None:
            needed[resource] = perm

    if code in (RC.SEND_MESSAGE, RC.SEND_REPLY_MESSAGE):
        topic = f.get("topic")
        if topic is not None and is_group_resource(topic):
            add(retry_topic(f.get("group")), SUB)
        else:
            add(topic, PUB)
    elif code in SEND_V2_CODES:
        topic = f.get("b")
        if topic is not None and is_group_resource(topic):
            add(retry_topic(f.get("a")), SUB)
        else:
            add(topic, PUB)
    elif code == RC.CONSUMER_SEND_MSG_BACK:
        add(retry_topic(f.get("group")), SUB)
    elif code == RC.PULL_MESSAGE:
        add(f.get("topic"), SUB)
        add(retry_topic(f.get("consumerGroup")), SUB)
    elif code == RC.QUERY_MESSAGE:
        add(f.get("topic"), SUB)
    elif code == RC.HEART_BEAT:
        if not request.body:
            raise AclConfigError("heartbeat without a body")
        data = jb.decode(jb.HeartbeatData, request.body)
        for consumer in data.consumer_data_set:
            add(retry_topic(consumer.group_name), SUB)
            for subscription in consumer.subscription_data_set:
                add(subscription.topic, SUB)
    elif code in (RC.UNREGISTER_CLIENT, RC.GET_CONSUMER_LIST_BY_GROUP):
        add(retry_topic(f.get("consumerGroup")), SUB)
    elif code == RC.UPDATE_CONSUMER_OFFSET:
        add(retry_topic(f.get("consumerGroup")), SUB)
        add(f.get("topic"), SUB)
    elif code in POP_FAMILY:  # rmq's own: 5.1.1 checks only the signature of these
        topic = f.get("topic")
        if topic is not None and not is_group_resource(topic):  # a pop-retry topic is the group's
            add(topic, SUB)
        add(retry_topic(f.get("consumerGroup")), SUB)
    return needed
