"""Queue offsets and message lookups: ``AdminBrokerProcessor`` offset requests and ``QueryMessageProcessor``
(protocol.md B.3).

GET_MAX_OFFSET (30), GET_MIN_OFFSET (31), SEARCH_OFFSET_BY_TIMESTAMP (29), GET_EARLIEST_MSG_STORETIME
(32), QUERY_MESSAGE (12, by key or unique key through the index), VIEW_MESSAGE_BY_ID (33, by
commit-log offset). Message bodies are stored records, byte for byte (B.8).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from formats.indexfile import MAX_QUERY_RESULTS
from formats.javatext import parse_boolean
from rmqcli.remoting import headers as hd
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.remoting.server.connection import Connection, Reply

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext


def max_offset(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.GetMaxOffsetRequestHeader)
    return req.response(
        header=hd.GetMaxOffsetResponseHeader(offset=ctl.store.max_offset(h.topic, h.queue_id))
    )


def min_offset(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.GetMinOffsetRequestHeader)
    return req.response(
        header=hd.GetMinOffsetResponseHeader(offset=ctl.store.min_offset(h.topic, h.queue_id))
    )


def search_offset(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.SearchOffsetRequestHeader)
    offset = ctl.store.search_offset(h.topic, h.queue_id, h.timestamp)
    return req.response(header=hd.SearchOffsetResponseHeader(offset=offset))


def earliest_store_time(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.GetEarliestMsgStoretimeRequestHeader)
    ts = ctl.store.earliest_store_time(h.topic, h.queue_id)
    return req.response(header=hd.GetEarliestMsgStoretimeResponseHeader(timestamp=ts))


def query_message(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    """``QueryMessageProcessor.queryMessage``: a unique-key query asks for ``defaultQueryMaxNum``."""
    h = req.header(hd.QueryMessageRequestHeader)
    max_num = h.max_num
    if parse_boolean(req.ext_fields.get(hd.UNIQUE_KEY_QUERY)):
        max_num = ctl.config.default_query_max_num
    records = ctl.store.query(
        h.topic, h.key, min(max(max_num, 0), MAX_QUERY_RESULTS), h.begin_timestamp, h.end_timestamp
    )
    ts, phy = ctl.store.index_last_update
    header = hd.QueryMessageResponseHeader(index_last_update_timestamp=ts, index_last_update_phyoffset=phy)
    if not records:
        return req.response(
            RS.QUERY_NOT_FOUND, "can not find message, maybe time range not correct", header=header
        )
    return req.response(header=header, body=b"".join(records))


def view_message(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.ViewMessageRequestHeader)
    found = ctl.store.record_at(h.offset)
    if found is None:
        return req.response(RS.SYSTEM_ERROR, f"can not find message by the offset, {h.offset}")
    return req.response(body=found[1])


HANDLERS = {
    RC.GET_MAX_OFFSET: max_offset,
    RC.GET_MIN_OFFSET: min_offset,
    RC.SEARCH_OFFSET_BY_TIMESTAMP: search_offset,
    RC.GET_EARLIEST_MSG_STORETIME: earliest_store_time,
    RC.QUERY_MESSAGE: query_message,
    RC.VIEW_MESSAGE_BY_ID: view_message,
}
