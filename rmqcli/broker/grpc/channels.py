"""A gRPC client's Telemetry stream as the broker's client table sees a connection (the 5.1 proxy's
``GrpcClientChannel``).

A producer is registered in ``ClientManager`` under the group of each topic it publishes (gRPC
producers have no group: the proxy uses the topic's name), with this channel in place of a remoting
connection, on its settings and on every heartbeat (so the 120 s expiry of silent clients applies),
and leaves with NotifyClientTermination or when its stream ends. What the broker sends a producer
oneway arrives here: CHECK_TRANSACTION_STATE (the transaction check service asking about a half
message left open) becomes ``recover_orphaned_transaction_command {message, transaction_id}`` on
the stream, and the half message's offsets are kept for the EndTransaction (source SERVER_CHECK)
that answers it.

The admin's requests relayed to a consumer (``AdminBrokerProcessor.callConsumer``) arrive as
remoting requests written to this channel and are adapted as the proxy's ``GrpcClientChannel``
does: GET_CONSUMER_RUNNING_INFO with ``jstackEnable`` becomes ``print_thread_stack_trace_command
{nonce}`` (without it nothing is sent and the admin's call times out, as with the proxy);
CONSUME_MESSAGE_DIRECTLY becomes ``verify_message_command {nonce, message}``. The client's
``thread_stack_trace`` / ``verify_message_result`` with that nonce is answered to the admin
(``ClientActivity.reportThreadStackTrace`` / ``reportVerifyMessageResult``): a ConsumerRunningInfo
with ``jstack``; VERIFY_FIFO_MESSAGE_UNSUPPORTED -> NO_PERMISSION "forbidden to verify message",
another failure -> SYSTEM_ERROR "verify message failed"; a ConsumeMessageDirectlyResult
(CR_SUCCESS for OK, CR_LATER for FAILED_TO_CONSUME_MESSAGE, CR_RETURN_NULL for MESSAGE_CORRUPTED,
remark "from gRPC client"). Other commands are not for gRPC clients: refused (False), as a closed
channel.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from formats.records import RecordError, decode_record
from rmqcli.broker.grpc import convert
from rmqcli.broker.grpc.context import CallContext
from rmqcli.remoting import headers as hd
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS

if TYPE_CHECKING:
    from rmqcli.broker.grpc.producer import Producer

log = logging.getLogger(__name__)

MAX_PENDING_WRITES = 1024  # commands queued on one stream; more are refused
MAX_NONCES = 1024  # admin requests waiting for the client's answer
OK, MESSAGE_CORRUPTED, FAILED_TO_CONSUME_MESSAGE = 20000, 40016, 60000  # Code
VERIFY_FIFO_MESSAGE_UNSUPPORTED = 50502
CONSUME_RESULTS = {
    OK: "CR_SUCCESS",
    FAILED_TO_CONSUME_MESSAGE: "CR_LATER",
    MESSAGE_CORRUPTED: "CR_RETURN_NULL",
}
_nonces = itertools.count(1)


class ResponseSink:
    """What the admin's relay reads of ``connection.server``: the callbacks for responses."""

    def __init__(self) -> None:
        self.response_callbacks: list = []


class GrpcClientChannel:
    """One client's Telemetry stream (``context``: the call's ``rmqcli.grpcserver.Call``)."""

    def __init__(self, stubs: Any, ctx: CallContext, context: Any, producer: Producer):
        self.s = stubs
        self.ctx = ctx
        self.context = context
        self.producer = producer
        self.closed = False
        self.peer = (ctx.remote_host or "0.0.0.0", ctx.remote_port)
        self.attributes: dict[str, Any] = {}
        self._writes: set[asyncio.Task[None]] = set()
        self.server = ResponseSink()
        self._asked: OrderedDict[str, RemotingCommand] = OrderedDict()  # nonce -> admin request

    @property
    def address(self) -> str:
        return self.ctx.remote_address

    def close(self) -> None:
        self.closed = True

    def write(self, command: Any) -> bool:
        """Queue ``command`` on the stream (written in order by the server); a remoting request
        (the admin's, relayed) is adapted first."""
        if self.closed or len(self._writes) >= MAX_PENDING_WRITES:
            return False
        if isinstance(command, RemotingCommand):
            return self._relay(command)
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

    # --- the admin's requests relayed to the client -------------------------------------------
    def _relay(self, request: RemotingCommand) -> bool:
        s = self.s.service
        nonce = f"{self.ctx.client_id[:64]}-{next(_nonces)}"
        if request.code == RC.GET_CONSUMER_RUNNING_INFO:
            if str(request.ext_fields.get("jstackEnable", "")).lower() != "true":
                return True  # the proxy sends nothing: the admin's call times out
            command = s.TelemetryCommand(
                print_thread_stack_trace_command=s.PrintThreadStackTraceCommand(nonce=nonce)
            )
        elif request.code == RC.CONSUME_MESSAGE_DIRECTLY:
            body = request.body or b""
            try:
                record = decode_record(memoryview(body), 0, len(body))
            except (RecordError, ValueError, IndexError):
                return False
            message = convert.message_of_record(self.s.definition, record)
            command = s.TelemetryCommand(
                verify_message_command=s.VerifyMessageCommand(nonce=nonce, message=message)
            )
        else:
            return False
        self._asked[nonce] = request
        while len(self._asked) > MAX_NONCES:
            self._asked.popitem(last=False)
        return self.write(command)

    def answer(self, command: Any) -> None:
        """The client's ``thread_stack_trace`` or ``verify_message_result``: the relayed request's
        response, handed to the admin's waiting call."""
        which = command.WhichOneof("command")
        part = getattr(command, which)
        request = self._asked.pop(part.nonce, None)
        if request is None:
            return
        code = command.status.code
        if which == "thread_stack_trace":
            if code == OK:
                info = {"jstack": part.thread_stack_trace, "mqTable": {}, "properties": {},
                        "statusTable": {}, "subscriptionSet": []}  # fmt: skip
                response = request.response(body=json.dumps(info).encode())
            elif code == VERIFY_FIFO_MESSAGE_UNSUPPORTED:
                response = request.response(RS.NO_PERMISSION, "forbidden to verify message")
            else:
                response = request.response(RS.SYSTEM_ERROR, "verify message failed")
        else:
            result = {"autoCommit": True, "consumeResult": CONSUME_RESULTS.get(code), "order": False,
                      "remark": "from gRPC client", "spentTimeMills": 0}  # fmt: skip
            response = request.response(body=json.dumps(result).encode())
        for callback in list(self.server.response_callbacks):
            callback(response, self)
