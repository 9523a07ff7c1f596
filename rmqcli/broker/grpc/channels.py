"""A gRPC client's Telemetry stream as the broker's client table sees a connection (the 5.1 proxy's
``GrpcClientChannel``).

A producer is registered in ``ClientManager`` under the group of each topic it publishes (gRPC
producers have no group: the proxy uses the topic's name), with this channel in place of a remoting
connection, on its settings and on every heartbeat (so the 120 s expiry of silent clients applies),
and leaves with NotifyClientTermination or when its stream ends. What the broker sends a producer
oneway arrives here: CHECK_TRANSACTION_STATE (the transaction check service asking about a half
message left open) becomes ``recover_orphaned_transaction_command {message, transaction_id}`` on
the stream, and the half message's offsets are kept for the EndTransaction (source SERVER_CHECK)
that answers it. Other commands are not for gRPC clients: refused (False), as a closed channel.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from formats.records import RecordError, decode_record
from rmqcli.broker.grpc import convert
from rmqcli.broker.grpc.context import CallContext
from rmqcli.remoting import headers as hd
from rmqcli.remoting.codes import RequestCode as RC

if TYPE_CHECKING:
    from rmqcli.broker.grpc.producer import Producer

log = logging.getLogger(__name__)

MAX_PENDING_WRITES = 1024  # commands queued on one stream; more are refused


class GrpcClientChannel:
    """One client's Telemetry stream (``context``: grpc.aio's servicer context of the call)."""

    def __init__(self, stubs: Any, ctx: CallContext, context: Any, producer: Producer):
        self.s = stubs
        self.ctx = ctx
        self.context = context
        self.producer = producer
        self.closed = False
        self.peer = (ctx.remote_host or "0.0.0.0", ctx.remote_port)
        self.attributes: dict[str, Any] = {}
        self._writes: set[asyncio.Task[None]] = set()

    @property
    def address(self) -> str:
        return self.ctx.remote_address

    def close(self) -> None:
        self.closed = True

    def write(self, command: Any) -> bool:
        """Queue ``command`` on the stream (written in order by grpc.aio)."""
        if self.closed or len(self._writes) >= MAX_PENDING_WRITES:
            return False
        task = asyncio.get_running_loop().create_task(self._write(command))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)
        return True

    async def _write(self, command: Any) -> None:
        try:
            await self.context.write(command)
        except Exception as exc:  # the stream ended under it
            log.info("gRPC client %s: telemetry write failed: %s", self.ctx.client_id, exc)
            self.closed = True

    def send_oneway(self, code: int, header: dict[str, Any] | None = None, body: bytes = b"") -> bool:
        """A broker command for this client, as ``Connection.send_oneway``."""
        if self.closed or code != RC.CHECK_TRANSACTION_STATE:
            return False
        h = hd.CheckTransactionStateRequestHeader.from_ext_fields(
            {k: str(v) for k, v in (header or {}).items()}
        )
        try:
            record = decode_record(memoryview(body), 0, len(body))
        except (RecordError, ValueError, IndexError) as exc:
            log.warning("gRPC client %s: transaction check body does not decode: %s", self.ctx.client_id, exc)
            return False
        d = self.s.definition
        message = convert.message_of_record(d, record)
        transaction_id = h.transaction_id or message.system_properties.message_id
        self.producer.remember_check(
            record.topic, transaction_id, h.commit_log_offset, h.tran_state_table_offset
        )
        command = self.s.service.TelemetryCommand(
            recover_orphaned_transaction_command=self.s.service.RecoverOrphanedTransactionCommand(
                message=message, transaction_id=transaction_id
            )
        )
        return self.write(command)
