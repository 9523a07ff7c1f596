"""The remoting handlers of the POP family (200050-200055): headers in, the in-process calls of
``pop``, ``ack``, ``peek`` and ``notify``, headers and bodies out (research notes issue21 §3)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

from rmqcli.broker.pop import assignment, notify
from rmqcli.broker.pop.ack import AckRequest, ChangeInvisibleRequest, ack_message, change_invisible_time
from rmqcli.broker.pop.peek import peek_message
from rmqcli.broker.pop.pop import PopError, PopRequest, PopResult, now_ms, pop_message
from rmqcli.remoting import headers as hd
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.server.connection import Connection, Reply

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext

BORN_TIME = "bornTime"
# the remark of ``RemotingCommand.createResponseCommand(Class)``, kept by the 5.1.1 processors
# that later only set the code (change invisible time, notification, polling info)
NOT_SET = "not set any response code"


def _born_time(req: RemotingCommand) -> None:
    """``addExtFieldIfNotExist(BORN_TIME, now)``, and now for ``"0"`` too."""
    if req.ext_fields.get(BORN_TIME) in (None, "0"):
        req.ext_fields[BORN_TIME] = str(now_ms())


def pop_response(req: RemotingCommand, res: PopResult) -> RemotingCommand:
    header = hd.PopMessageResponseHeader(
        pop_time=res.pop_time,
        invisible_time=res.invisible_time,
        revive_qid=res.revive_qid,
        rest_num=res.rest_num,
        start_offset_info=res.start_offset_info,
        msg_offset_info=res.msg_offset_info,
        order_count_info=res.order_count_info,
    )
    return req.response(res.code, res.remark, header=header, body=res.body)


def pop(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply | Awaitable[Reply]:
    _born_time(req)
    h = req.header(hd.PopMessageRequestHeader)
    request = PopRequest(
        group=h.consumer_group,
        topic=h.topic,
        queue_id=h.queue_id,
        max_msg_nums=h.max_msg_nums,
        invisible_time=h.invisible_time,
        poll_time=h.poll_time,
        born_time=h.born_time,
        init_mode=h.init_mode,
        exp_type=h.exp_type,
        exp=h.exp,
        order=bool(h.order),
        attempt_id=h.attempt_id,
    )
    return _pop(ctl, req, request)


async def _pop(ctl: BrokerContext, req: RemotingCommand, request: PopRequest) -> Reply:
    try:
        return pop_response(req, await pop_message(ctl, request))
    except PopError as exc:
        return exc.answer(req)


def ack(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.AckMessageRequestHeader)
    try:
        ack_message(ctl, AckRequest(h.consumer_group, h.topic, h.queue_id, h.extra_info, h.offset))
    except PopError as exc:
        return exc.answer(req)
    return req.response()


def change_invisible(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.ChangeInvisibleTimeRequestHeader)
    request = ChangeInvisibleRequest(
        h.consumer_group, h.topic, h.queue_id, h.extra_info, h.offset, h.invisible_time
    )
    try:
        res = change_invisible_time(ctl, request)
    except PopError as exc:
        return exc.answer(req)
    header = hd.ChangeInvisibleTimeResponseHeader(
        pop_time=res.pop_time, invisible_time=res.invisible_time, revive_qid=res.revive_qid
    )
    return req.response(remark=NOT_SET, header=header)


def peek(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.PeekMessageRequestHeader)
    try:
        res = peek_message(ctl, h.consumer_group, h.topic, h.queue_id, h.max_msg_nums)
    except PopError as exc:
        return exc.answer(req)
    header = hd.PopMessageResponseHeader(pop_time=0, invisible_time=0, revive_qid=0, rest_num=res.rest_num)
    return req.response(res.code, res.remark, header=header, body=b"".join(res.records))


def notification(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply | Awaitable[Reply]:
    _born_time(req)
    h = req.header(hd.NotificationRequestHeader)
    return _notification(ctl, req, h)


async def _notification(ctl: BrokerContext, req: RemotingCommand, h: hd.NotificationRequestHeader) -> Reply:
    try:
        has = await notify.notification(ctl, h.consumer_group, h.topic, h.queue_id, h.poll_time, h.born_time)
    except PopError as exc:
        return exc.answer(req)
    return req.response(remark=NOT_SET, header=hd.NotificationResponseHeader(has_msg=has))


def polling_info(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    h = req.header(hd.PollingInfoRequestHeader)
    try:
        num = notify.polling_num(ctl, h.consumer_group, h.topic, h.queue_id)
    except PopError as exc:
        return exc.answer(req)
    return req.response(remark=NOT_SET, header=hd.PollingInfoResponseHeader(polling_num=num))


HANDLERS = {
    **assignment.HANDLERS,
    RC.POP_MESSAGE: pop,
    RC.ACK_MESSAGE: ack,
    RC.PEEK_MESSAGE: peek,
    RC.CHANGE_MESSAGE_INVISIBLETIME: change_invisible,
    RC.NOTIFICATION: notification,
    RC.POLLING_INFO: polling_info,
}
