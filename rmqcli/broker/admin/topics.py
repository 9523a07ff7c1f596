"""Topic requests of ``AdminBrokerProcessor`` (PROTOCOL.md B.4): UPDATE_AND_CREATE_TOPIC (17,
answered once the name servers have the topic, as 4.9.8 re-registers before it answers),
DELETE_TOPIC_IN_BROKER (215) and GET_ALL_TOPIC_CONFIG (21)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmqcli.broker.admin.store import clean_unused_topics
from rmqcli.broker.connection import Connection, Reply
from rmqcli.broker.names import config_system_topics, is_system_topic, validate_topic
from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS

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
    ctl.topics.put(
        h.topic,
        h.read_queue_nums,
        h.write_queue_nums,
        h.perm,
        order=h.order,
        topic_sys_flag=h.topic_sys_flag or 0,
        topic_filter_type=h.topic_filter_type,
        notify=False,  # persisted here, and registered alone below (no full re-registration)
    )
    ctl.store.persist_topics()
    return _registered(ctl, h.topic, req.response())


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


HANDLERS = {
    RC.UPDATE_AND_CREATE_TOPIC: update_and_create_topic,
    RC.DELETE_TOPIC_IN_BROKER: delete_topic,
    RC.GET_ALL_TOPIC_CONFIG: all_topic_config,
}
