"""GET_TIMER_CHECK_POINT (60) and GET_TIMER_METRICS (61) of RocketMQ 5.1.1's
``AdminBrokerProcessor``: what a slave copies of its master's timer (``rmqcli.broker.timer.sync``).
A broker without ``timerWheelEnable`` answers SYSTEM_ERROR with 5.1.1's remark."""

from __future__ import annotations

from typing import TYPE_CHECKING

from formats import fastjson
from formats import timer as tfmt
from rmqcli.broker.timer.service import timer_service
from rmqcli.broker.timer.sync import encode_checkpoint, metrics_document, now_ms
from rmqcli.errors import CorruptDataError
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.store.timer import TimerCheckpoint, read_timer_checkpoint

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext
    from rmqcli.remoting.server.connection import Connection


def timer_checkpoint(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> RemotingCommand:
    """``TimerCheckpoint.encode`` of the checkpoint in force: the timer service's last flush, else
    the store's ``config/timercheck`` (a slave's: what it synced), else a new one."""
    if not ctl.config.timer.wheel_enable:
        return req.response(RS.SYSTEM_ERROR, "The checkpoint is null")
    files = timer_service(ctl).files
    checkpoint = files.writer.checkpoint if files is not None and files.writer is not None else None
    if checkpoint is None:
        checkpoint = read_timer_checkpoint(ctl.writer.root / tfmt.CHECKPOINT_FILE)
    if checkpoint is None:
        checkpoint = TimerCheckpoint(timestamp=now_ms())
    return req.response(body=encode_checkpoint(checkpoint))


def timer_metrics(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> RemotingCommand:
    """``TimerMetrics.encode``: the persisted metrics (flushed every second by the timer service)."""
    if not ctl.config.timer.wheel_enable:
        return req.response(RS.SYSTEM_ERROR, "The timer message store is null")
    try:
        doc = metrics_document(ctl.writer.root)
    except CorruptDataError as exc:
        return req.response(RS.SYSTEM_ERROR, str(exc))
    return req.response(body=fastjson.dumps(doc).encode())


HANDLERS = {
    RC.GET_TIMER_CHECK_POINT: timer_checkpoint,
    RC.GET_TIMER_METRICS: timer_metrics,
}
