"""OFFSET_MOVED_EVENT: what a master writes when it answers a pull with PULL_OFFSET_MOVED
(4.9.8 ``PullMessageProcessor.generateOffsetMovedEvent``): one message in topic
OFFSET_MOVED_EVENT, queue 0, tags and keys the consumer group, body the ``OffsetMovedEvent``
(consumer group, message queue, offset asked for, offset the broker corrected it to). Monitors
(mqadmin's ``startMonitoring``) consume it as reports of deleted messages a group skipped.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from formats import fastjson
from formats.commitlog import PROPERTY_DELAY, PROPERTY_KEYS, PROPERTY_TAGS
from formats.names import OFFSET_MOVED_EVENT
from rmqcli.remoting import headers as hd
from rmqcli.store.write.messages import InnerMessage

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext

log = logging.getLogger(__name__)


def event_body(broker_name: str, header: hd.PullMessageRequestHeader, new_offset: int) -> bytes:
    """``OffsetMovedEvent.encode()``: fastjson, bean fields in alphabetical order."""
    event = {
        "consumerGroup": header.consumer_group,
        "messageQueue": {"brokerName": broker_name, "queueId": header.queue_id, "topic": header.topic},
        "offsetNew": new_offset,
        "offsetRequest": header.queue_offset,
    }
    return fastjson.dumps(event).encode()


def report_offset_moved(ctl: BrokerContext, header: hd.PullMessageRequestHeader, new_offset: int) -> None:
    """Store the event, on a master only (a slave without ``offsetCheckInSlave`` writes none)."""
    if ctl.config.is_slave or ctl.store.disk_full:  # a full disk takes no put (putMessage refuses it)
        return
    group = header.consumer_group
    host = ctl.writer.store_host
    properties = {PROPERTY_TAGS: group, PROPERTY_DELAY: "0", PROPERTY_KEYS: group}
    inner = InnerMessage(
        OFFSET_MOVED_EVENT,
        0,
        event_body(ctl.config.broker_name, header, new_offset),
        properties,
        None,
        born_timestamp=int(time.time() * 1000),
        born_host=host,
        store_host=host,
    )
    try:
        ctl.store.put_inner(inner)
    except Exception:  # as 4.9.8: the pull is answered whatever became of the event
        log.warning(
            "OFFSET_MOVED_EVENT of %s %s:%d not stored", group, header.topic, header.queue_id, exc_info=True
        )
