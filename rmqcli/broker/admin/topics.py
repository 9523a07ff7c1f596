"""Topic requests of ``AdminBrokerProcessor`` (protocol.md B.4): UPDATE_AND_CREATE_TOPIC (17,
answered once the name servers have the topic, as 4.9.8 re-registers before it answers),
DELETE_TOPIC_IN_BROKER (215), GET_ALL_TOPIC_CONFIG (21) and RocketMQ 5's GET_TOPIC_CONFIG (351).

RocketMQ 5.1.1's topic attributes: the ``attributes`` header field of 17 (``+key=value,-key``) is
parsed as ``AttributeParser`` does and applied as ``TopicConfigManager.updateTopicConfig``
(``alterCurrentAttributes``) does; a topic keeps its attributes when a request names none. A topic
without attributes is stored without the key, as 4.9.8 stores it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmqcli.admin.attributes import TOPIC_ATTRIBUTES, ParseError, hash_ordered, parse_to_map
from rmqcli.broker.admin.store import clean_unused_topics
from rmqcli.broker.names import config_system_topics, is_system_topic, validate_topic
from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.remoting.server.connection import Connection, Reply

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext


def topic_problem(ctl: BrokerContext, topic: str) -> str | None:
    """``TopicValidator.validateTopic`` then ``isSystemTopic``, whose set holds the broker's cluster
    and broker names and its trace topic (``TopicConfigManager``): the remark of UPDATE_AND_CREATE_TOPIC and
    DELETE_TOPIC_IN_BROKER, both SYSTEM_ERROR."""
    problem = validate_topic(topic)
    if problem:
        return problem
    extra = config_system_topics(ctl.config)
    if is_system_topic(topic, extra):
        return f"The topic[{topic}] is conflict with system topic."
    return None


def update_and_create_topic(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.CreateTopicRequestHeader)
    if ctl.config.is_slave:  # validateSlave
        return req.response(
            RS.SYSTEM_ERROR,
            "Can't modify topic or subscription group from slave broker, "
            "please execute it from master broker.",
        )
    problem = topic_problem(ctl, h.topic)
    if problem:
        return req.response(RS.SYSTEM_ERROR, problem)
    if h.read_queue_nums < 0 or h.write_queue_nums < 0:
        return req.response(RS.SYSTEM_ERROR, "the queue numbers must not be negative")
    try:
        requested = parse_to_map(h.attributes)
    except ParseError as exc:  # 5.1.1 parses outside its try: the remoting layer's answer
        return req.response(RS.SYSTEM_ERROR, exc.simple_desc())
    current = ctl.topics.get(h.topic)
    try:
        attributes = alter_attributes(current is None, _attributes_of(current), requested)
    except AttributeProblem as exc:
        return req.response(RS.SYSTEM_ERROR, str(exc))
    ctl.topics.put(
        h.topic,
        h.read_queue_nums,
        h.write_queue_nums,
        h.perm,
        order=h.order,
        topic_sys_flag=h.topic_sys_flag or 0,
        topic_filter_type=h.topic_filter_type,
        attributes=attributes,
        notify=False,  # persisted here, and registered alone below (no full re-registration)
    )
    ctl.store.persist_topics()
    return _registered(ctl, h.topic, req.response())


class AttributeProblem(ValueError):
    """The message of the ``RuntimeException`` ``updateTopicConfig`` throws (SYSTEM_ERROR's remark)."""


def _attributes_of(config: dict | None) -> dict[str, str]:
    value = (config or {}).get("attributes")
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def alter_attributes(create: bool, current: dict[str, str], requested: dict[str, str]) -> dict[str, str]:
    """``TopicConfigManager.alterCurrentAttributes`` (5.1.1): ``requested`` (``+key``/``-key`` from
    ``parse_to_map``, in ``HashMap`` order) applied to ``current``; the checks in 5.1.1's order."""
    init: dict[str, str] = {}
    add: dict[str, str] = {}
    update: dict[str, str] = {}
    delete: dict[str, str] = {}
    seen: set[str] = set()
    for key, value in requested.items():
        real = key[1:]
        if not real or "+" in real or "-" in real:
            raise AttributeProblem("kv string format wrong.")
        if real in seen:
            raise AttributeProblem(f"alter duplication key. key: {real}")
        seen.add(real)
        if create:
            if not key.startswith("+"):
                raise AttributeProblem(f"only add attribute is supported while creating topic. key: {real}")
            init[real] = value
        elif key.startswith("+"):
            (update if real in current else add)[real] = value
        elif key.startswith("-"):
            if real not in current:
                raise AttributeProblem(f"attempt to delete a nonexistent key: {real}")
            delete[real] = value
        else:
            raise AttributeProblem(f"wrong format key: {real}")
    for alter, first, deleting in ((init, True, False), (add, False, False), (update, False, False),
                                   (delete, False, True)):  # fmt: skip
        for key, value in hash_ordered(alter).items():
            attribute = TOPIC_ATTRIBUTES.get(key)
            if attribute is None:
                raise AttributeProblem(f"unsupported key: {key}")
            if not first and not attribute.changeable:
                raise AttributeProblem(f"attempt to update an unchangeable attribute. key: {key}")
            problem = None if deleting else attribute.problem(value)
            if problem:
                raise AttributeProblem(problem)
    final = {**current, **init, **add, **update}
    for key in delete:
        final.pop(key, None)
    return hash_ordered(final)


async def _registered(ctl: BrokerContext, topic: str, response: RemotingCommand) -> RemotingCommand:
    """``registerIncrementBrokerData``: the name servers know the topic before the answer goes, so a
    client that asks for its route right after is given it."""
    await ctl.register_all(only_topic=topic)
    return response


def delete_topic(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """``deleteTopic``: the config goes, then ``cleanUnusedTopic`` destroys the queues of every
    topic left without a config."""
    if ctl.config.is_slave:  # validateSlave
        return req.response(
            RS.SYSTEM_ERROR,
            "Can't modify topic or subscription group from slave broker, "
            "please execute it from master broker.",
        )
    h = req.header(hd.DeleteTopicRequestHeader)
    problem = topic_problem(ctl, h.topic)
    if problem:
        return req.response(RS.SYSTEM_ERROR, problem)
    if ctl.topics.table.pop(h.topic, None) is not None:
        ctl.writer.config.topics_version.bump(ctl.writer.clock())
        ctl.topics.on_change()
    clean_unused_topics(ctl)
    return req.response()


def all_topic_config(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    if not ctl.topics.table:
        return req.response(RS.SYSTEM_ERROR, "No topic in this broker")
    return req.response(body=jb.encode(ctl.topics.wrapper()))


def topic_config(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """GET_TOPIC_CONFIG (351, 5.x): the topic's ``TopicConfigAndQueueMapping`` (no static-topic
    mapping here); TOPIC_NOT_EXIST when the broker has no such topic."""
    h = req.header(hd.GetTopicConfigRequestHeader)
    config = ctl.topics.get(h.topic)
    if config is None:
        return req.response(RS.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {h.topic}")
    return req.response(body=jb.encode(jb.from_value(jb.TopicConfig, config)))


HANDLERS = {
    RC.UPDATE_AND_CREATE_TOPIC: update_and_create_topic,
    RC.GET_TOPIC_CONFIG: topic_config,
    RC.DELETE_TOPIC_IN_BROKER: delete_topic,
    RC.GET_ALL_TOPIC_CONFIG: all_topic_config,
}
