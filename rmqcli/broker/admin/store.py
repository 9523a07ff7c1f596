"""Admin requests about the store's queues and files: ``AdminBrokerProcessor`` over ``DefaultMessageStore``
(protocol.md B.4).

GET_TOPIC_STATS_INFO (202), QUERY_CONSUME_QUEUE (321), GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305),
GET_ALL_DELAY_OFFSET (45), and the three clean-ups:

* DELETE_EXPIRED_COMMITLOG (329, ``executeDeleteFilesManually``): the next 20 clean-up rounds delete
  expired CommitLog files whatever the hour (``rmqcli.broker.services.retention``). A real broker only flags
  the request and deletes on its next round (every 10 s); this one runs the first round before
  answering.
* CLEAN_EXPIRED_CONSUMEQUEUE (306, ``cleanExpiredConsumerQueue``): queues (but SCHEDULE_TOPIC_XXXX's)
  whose every unit points below the CommitLog minimum are destroyed, their queue offsets forgotten.
* CLEAN_UNUSED_TOPIC (316, ``cleanUnusedTopic``): the queues of topics without a topic config are
  destroyed (DELETE_TOPIC_IN_BROKER uses the same clean-up).
"""

from __future__ import annotations

import logging
import shutil
from typing import TYPE_CHECKING

from formats.names import SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC
from rmqcli.broker.context import acknowledged
from rmqcli.broker.names import SYSTEM_TOPICS, config_system_topics
from rmqcli.errors import UnsafeNameError
from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.remoting.server.connection import Connection, Reply
from rmqcli.store.naming import topic_dir
from rmqcli.store.retention import last_unit_offset

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext
    from rmqcli.store.write.cq import ConsumeQueueWriter

log = logging.getLogger(__name__)

DELETE_FILES_BATCH_MAX = 10  # MappedFileQueue.DELETE_FILES_BATCH_MAX
MAX_EXT_ADDRESS = -(1 << 31) - 1  # ConsumeQueueExt.MAX_ADDRESS: tags codes at or below are ext addresses


# --- statistics and inspection -----------------------------------------------------------------
def topic_stats(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """``getTopicStatsInfo``: min/max offset and the last store time of every write queue."""
    from rmqcli.broker.admin.stats import message_store_time

    h = req.header(hd.GetTopicStatsInfoRequestHeader)
    config = ctl.topics.get(h.topic)
    if config is None:
        return req.response(RS.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
    table = jb.TopicStatsTable()
    for queue_id in range(int(config["writeQueueNums"])):
        mq = jb.MessageQueue(broker_name=ctl.config.broker_name, queue_id=queue_id, topic=h.topic)
        low = max(ctl.store.min_offset(h.topic, queue_id), 0)
        high = max(ctl.store.max_offset(h.topic, queue_id), 0)
        last = message_store_time(ctl, h.topic, queue_id, high - 1) if high > 0 else 0
        table.offset_table[mq] = jb.TopicOffset(last_update_timestamp=last, max_offset=high, min_offset=low)
    return req.response(body=jb.encode(table))


def query_consume_queue(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """``queryConsumeQueue``: up to ``count`` units from ``index`` to the end of its file, with the
    group's subscription when ``consumerGroup`` is given; an index outside the queue answers
    SUCCESS without a body and says so in the remark."""
    h = req.header(hd.QueryConsumeQueueRequestHeader)
    topic = h.topic or ""
    if ctl.store.queue(topic, h.queue_id) is None:
        return req.response(RS.SYSTEM_ERROR, f"{h.queue_id}@{topic} is not exist!")
    body = jb.QueryConsumeQueueResponseBody(
        max_queue_index=ctl.store.max_offset(topic, h.queue_id),
        min_queue_index=ctl.store.min_offset(topic, h.queue_id),
    )
    if h.consumer_group is not None:
        body.subscription_data = ctl.clients.subscription(h.consumer_group, topic)
        if body.subscription_data is None:
            body.filter_data = f"{h.consumer_group}@{topic} is not online!"
        else:
            body.filter_data = "null"  # no ConsumerFilterData for TAG subscriptions
    units = []
    if h.index >= body.min_queue_index:
        units = ctl.store.units(topic, h.queue_id, h.index, max(h.count, 0))
    if not units and (h.index < body.min_queue_index or h.index >= body.max_queue_index):
        return req.response(remark=f"Index {h.index} of {h.queue_id}@{topic} is not exist!")
    for unit in units:
        data = jb.ConsumeQueueData(
            physic_offset=unit.physical_offset, physic_size=unit.size, tags_code=unit.tags_code
        )
        if unit.tags_code <= MAX_EXT_ADDRESS:
            data.msg = f"Cq extend not exist!addr: {unit.tags_code}"
        body.queue_data.append(data)
    return req.response(body=jb.encode(body))


def system_topics(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """``TopicValidator.getSystemTopicSet``: the static set and what the broker added at start (its
    cluster and broker names, ``<cluster>_REPLY_TOPIC``, the trace topic), in a ``HashSet``'s order."""
    from formats.javahash import hashmap_order

    names = list(dict.fromkeys((*SYSTEM_TOPICS, *config_system_topics(ctl.config))))
    return req.response(body=jb.encode(jb.TopicList(topic_list=hashmap_order(names))))


def all_delay_offsets(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """``ScheduleMessageService.encode``: ``{"offsetTable":{level:offset}}`` (delayOffset.json)."""
    table = dict(sorted(ctl.writer.config.delay_offsets.items()))
    return req.response(body=jb.encode(jb.DelayOffsetSerializeWrapper(offset_table=table)))


# --- clean-ups ---------------------------------------------------------------------------------
def destroy_queues(ctl: BrokerContext, keys: list[tuple[str, int]]) -> None:
    """``ConsumeQueue.destroy`` + ``removeQueueFromTopicQueueTable``: files gone, the next message
    of the queue gets offset 0; empty topic directories go too. A topic that names no directory of
    its own under ``consumequeue/`` (``rmqcli.store.naming.topic_dir``) has no files to remove."""
    writer = ctl.writer
    topics = set()
    for key in keys:
        cq = writer.dispatcher.cqs.pop(key, None)
        if cq is not None:
            cq.close()
        writer.queue_offsets.pop(key, None)
        try:
            directory = topic_dir(writer.root, key[0])
        except UnsafeNameError as exc:
            log.warning("queue %d: %s; no files removed", key[1], exc)
            continue
        shutil.rmtree(directory / str(int(key[1])), ignore_errors=True)
        topics.add(directory)
    for directory in topics:
        if directory.is_dir() and not any(directory.iterdir()):
            directory.rmdir()


def clean_unused_topics(ctl: BrokerContext) -> list[str]:
    """``DefaultMessageStore.cleanUnusedTopic``: the queues of topics that have no config (but the
    schedule and transaction-op topics')."""
    keep = (SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC)
    keys = [k for k in ctl.writer.dispatcher.cqs if k[0] not in keep and ctl.topics.get(k[0]) is None]
    destroy_queues(ctl, keys)
    return sorted({k[0] for k in keys})


def commitlog_min_offset(ctl: BrokerContext) -> int:
    files = ctl.writer.commitlog.files
    return files[0].from_offset if files else 0


def _last_unit_offset(cq: ConsumeQueueWriter) -> int:
    """``ConsumeQueue.getLastOffset``-like: the CommitLog offset of the queue's last unit, -1 if none."""
    for f in reversed(cq.files.files):
        last = last_unit_offset(f.read, f.wrote)
        if last is not None:
            return last
    return -1


def clean_expired_queues(ctl: BrokerContext) -> list[tuple[str, int]]:
    low = commitlog_min_offset(ctl)
    keys = []
    for key, cq in ctl.writer.dispatcher.cqs.items():
        last = _last_unit_offset(cq)
        if key[0] != SCHEDULE_TOPIC and last != -1 and last < low:
            keys.append(key)
    destroy_queues(ctl, keys)
    return keys


async def delete_expired_now(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """DELETE_EXPIRED_COMMITLOG: ``executeDeleteFilesManually``, and the first of its rounds now."""
    ctl.retention.delete_manually()
    await ctl.retention.round()
    return req.response()


HANDLERS = {
    RC.GET_TOPIC_STATS_INFO: topic_stats,
    RC.QUERY_CONSUME_QUEUE: query_consume_queue,
    RC.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: system_topics,
    RC.GET_ALL_DELAY_OFFSET: all_delay_offsets,
    RC.DELETE_EXPIRED_COMMITLOG: delete_expired_now,
    RC.CLEAN_EXPIRED_CONSUMEQUEUE: acknowledged(clean_expired_queues),
    RC.CLEAN_UNUSED_TOPIC: acknowledged(clean_unused_topics),
}
