"""The gRPC endpoint of ``rmq serve``: ``apache.rocketmq.v2.MessagingService`` on rmq's own gRPC
server (``rmqcli.grpcserver``), in the broker's event loop (the 5.x proxy in "local" mode: proxy
and broker in one process, calls go to the broker's processors directly).

Served: QueryRoute, QueryAssignment, SendMessage, EndTransaction, Heartbeat, Telemetry (settings),
NotifyClientTermination, and the consumer's ReceiveMessage (a stream: status, messages, then
``delivery_timestamp``), AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue
over the broker's POP (``consumer``); the other methods answer UNIMPLEMENTED.

With ``aclEnable=true`` every request message is first checked against the broker's plain ACL
(``auth``: a refusal ends the call with gRPC PERMISSION_DENIED, as 5.1.1's proxy). Every call
needs ``x-mq-client-id`` (CLIENT_ID_REQUIRED); failures are answered in the response's
``status``, never as gRPC errors (except a refused Telemetry command and an ACL refusal, as the
proxy). A request may be at most ``MAX_MESSAGE_BYTES`` (a Telemetry command 1 MiB, whose excess the
server skips unbuffered); one that does not decode is answered BAD_REQUEST and logged at most once
a minute per client address and method (``decoding``). The listener does not share its port, so a
port in use is an error, as for the remoting listeners; with a certificate and key it speaks TLS
only (ALPN h2).
"""

from __future__ import annotations

import errno
import inspect
import logging
import os
import socket
import ssl
import time
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rmqcli.broker.acl.ownership import StoreNames
from rmqcli.broker.grpc import client as clients
from rmqcli.broker.grpc import context as cc
from rmqcli.broker.grpc import route
from rmqcli.broker.grpc import status as st
from rmqcli.broker.grpc import transaction as tx
from rmqcli.broker.grpc.auth import GrpcAcl
from rmqcli.broker.grpc.consumer import Consumer
from rmqcli.broker.grpc.decoding import BadRequests, Undecodable, servicer_handlers
from rmqcli.broker.grpc.options import GrpcOptions
from rmqcli.broker.grpc.producer import Producer
from rmqcli.broker.grpc.settings import SettingsStore
from rmqcli.broker.grpc.stubs import Stubs, load
from rmqcli.errors import NetworkError, UsageError
from rmqcli.grpcserver import StatusCode
from rmqcli.memory import map_large_blocks

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # a request (a 4 MiB body and its properties fit many times)
STOP_GRACE_SECONDS = 1.0


def tls_context(options: GrpcOptions) -> ssl.SSLContext:
    """The TLS context of ``--grpc-cert``/``--grpc-key`` (PEM): a file that is missing or not PEM
    is a ``UsageError`` naming it."""
    from rmqcli.grpcserver import server_ssl_context

    assert options.cert is not None and options.key is not None
    try:
        chain, key = options.cert.read_bytes(), options.key.read_bytes()
    except OSError as exc:
        raise UsageError(f"{exc.filename}: {exc.strerror}") from None
    for path, data, marker in ((options.cert, chain, b"CERTIFICATE"), (options.key, key, b"PRIVATE KEY")):
        if b"-----BEGIN " not in data or marker not in data:
            raise UsageError(f"{path}: not a PEM file with a {marker.decode().lower()}")
    try:
        return server_ssl_context(str(options.cert), str(options.key))
    except ssl.SSLError as exc:
        raise UsageError(f"{options.cert}, {options.key}: {exc.reason or exc}") from None


def bind_problem(host: str, port: int) -> str:
    """Why grpc could not bind ``host:port``: tried again with a plain socket for the errno."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        return str(exc.strerror or exc).lower()
    for family, kind, proto, _, address in infos:
        try:
            with socket.socket(family, kind, proto) as probe:
                probe.bind(address)
        except OSError as exc:
            return os.strerror(exc.errno).lower() if exc.errno else str(exc)
    return os.strerror(errno.EADDRNOTAVAIL).lower()


def endpoint_host(options: GrpcOptions, broker_ip: str) -> str:
    """The host advertised in routes: the listen address, the broker's address for a wildcard."""
    return broker_ip if options.host in ("", "0.0.0.0", "::", "*") else options.host


class _Calls:
    """What the servicer's methods share over the broker ``ctl``: the producer, consumer and client
    calls, the ACL, the log of bad requests, and ``work``, what each unary method does with the
    call's context and its request."""

    def __init__(self, s: Stubs, ctl: BrokerContext, endpoint: route.Endpoint):
        self.d = s.definition
        self.svc = s.service
        producer = Producer(s, ctl)
        settings = SettingsStore(self.d, lambda group: ctl.writer.config.groups.get(group))
        self.consumer = Consumer(s, ctl, settings)
        self.known = clients.Clients(s, settings, ctl, producer, self.consumer)
        self.acl = GrpcAcl(ctl.acl, StoreNames(ctl.writer)) if ctl.acl is not None else None
        self.bad = BadRequests()
        self.work: dict[str, Callable[[cc.CallContext, Any], Any]] = {
            "QueryRoute": lambda ctx, request: route.query_route(s, ctl, endpoint, request),
            "QueryAssignment": lambda ctx, request: route.query_assignment(s, ctl, endpoint, request),
            "SendMessage": producer.send_message,
            "EndTransaction": lambda ctx, request: tx.end_transaction(s, producer, ctx, request),
            "Heartbeat": self.known.heartbeat,
            "NotifyClientTermination": self.known.notify_termination,
            "AckMessage": self.consumer.ack,
            "ChangeInvisibleDuration": self.consumer.change_invisible,
            "ForwardMessageToDeadLetterQueue": self.consumer.forward,
        }

    def undecodable(self, context: Any, request: Undecodable) -> Any:
        """The status of a request that did not decode (logged, limited per client)."""
        ctx = cc.from_call(context.invocation_metadata(), context.peer())
        where = ctx.remote_host or context.peer() or "?"
        self.bad.note(
            where, ctx.client_id, f"undecodable {request.method}", f"{request.size} bytes: {request.reason}"
        )
        return st.make(self.d, st.BAD_REQUEST, f"the request does not decode: {request.reason}")

    async def telemetry(self, request_iterator: Any, context: Any) -> None:
        ctx = cc.from_call(context.invocation_metadata(), context.peer())
        if not ctx.client_id.strip():
            await context.abort(StatusCode.INVALID_ARGUMENT, "client id cannot be empty")
            return

        async def decoded() -> Any:
            async for command in request_iterator:
                if isinstance(command, Undecodable):
                    status = self.undecodable(context, command)
                    text = f"process client telemetryCommand failed. {status.message}"
                    await context.abort(StatusCode.INVALID_ARGUMENT, text)
                yield command

        acl = self.acl
        commands = decoded() if acl is None else acl.checked(context, decoded(), "Telemetry")
        await self.known.telemetry(ctx, commands, context)

    async def receive(self, request: Any, context: Any) -> Any:
        svc = self.svc
        if isinstance(request, Undecodable):
            yield svc.ReceiveMessageResponse(status=self.undecodable(context, request))
            return
        if self.acl is not None:
            await self.acl.check(context, request, "ReceiveMessage")
        sent_status = False
        try:
            ctx = cc.from_call(context.invocation_metadata(), context.peer())
            remaining = context.time_remaining()
            remaining_ms = None if remaining is None else remaining * 1000
            async for response in self.consumer.receive(ctx, request, remaining_ms):
                sent_status = True
                yield response
        except Exception as exc:  # the proxy's writeAndComplete(throwable)
            if not sent_status:
                yield svc.ReceiveMessageResponse(status=st.of_exception(self.d, exc, "ReceiveMessage"))
        now = svc.ReceiveMessageResponse()
        now.delivery_timestamp.FromMilliseconds(int(time.time() * 1000))
        yield now


def _unary_method(calls: _Calls, name: str) -> Callable[[Any, Any], Any]:
    """The unary method ``name`` (a coroutine function: the server awaits its result): its ``work``
    answered, a failure in the response's status. One coroutine per call: what a call needs of
    ``calls`` is looked up once here."""
    response = getattr(calls.svc, f"{name}Response")
    work = calls.work[name]
    is_coroutine = inspect.iscoroutinefunction(work)
    acl = calls.acl
    definition = calls.d
    from_call = cc.from_call
    isawaitable = inspect.isawaitable

    async def method(request: Any, context: Any) -> Any:
        if isinstance(request, Undecodable):
            return response(status=calls.undecodable(context, request))
        if acl is not None:  # before anything else, as the proxy's interceptor
            await acl.check(context, request, name)
        try:
            ctx = from_call(context.invocation_metadata(), context.peer())
            ctx.require_client_id()
            if is_coroutine:
                return await work(ctx, request)
            result = work(ctx, request)
            if type(result) is not response and isawaitable(result):  # no ABC check for an answer
                result = await result
            return result
        except Exception as exc:  # answered in the status, as the proxy's writeResponse
            return response(status=st.of_exception(definition, exc, name))

    method.__name__ = method.__qualname__ = name
    return method


def make_servicer(s: Stubs, ctl: BrokerContext, endpoint: route.Endpoint) -> Any:
    """The served methods over the broker ``ctl``: the unary methods of ``_Calls.work``, Telemetry
    (a coroutine over the command stream) and ReceiveMessage (an async generator)."""
    calls = _Calls(s, ctl, endpoint)
    servicer = types.SimpleNamespace(Telemetry=calls.telemetry, ReceiveMessage=calls.receive)
    for name in calls.work:
        setattr(servicer, name, _unary_method(calls, name))
    return servicer


class GrpcEndpoint:
    """The running gRPC server; ``stop()`` ends it (open streams get ``STOP_GRACE_SECONDS``)."""

    def __init__(self, server: Any, options: GrpcOptions, port: int):
        self.server = server
        self.options = options
        self.port = port

    def describe(self) -> str:
        host = self.options.host
        where = f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"
        return f"gRPC{' (TLS)' if self.options.tls else ''} on {where}"

    async def stop(self) -> None:
        await self.server.stop(STOP_GRACE_SECONDS)


async def start(ctl: BrokerContext, options: GrpcOptions) -> GrpcEndpoint:
    """Generate/load the stubs, bind and start; a port that cannot be bound is a ``NetworkError``
    naming it (exit 5), a bad certificate or key a ``UsageError``."""
    from rmqcli.grpcserver import Server

    s = load()
    map_large_blocks()  # buffers of 1 MiB and more go back to the system when freed
    context = tls_context(options) if options.tls else None
    host = options.host
    address = f"[{host}]:{options.port}" if ":" in host else f"{host}:{options.port}"
    endpoint = route.Endpoint(endpoint_host(options, ctl.config.broker_ip1), options.port)
    server = Server(servicer_handlers(s, make_servicer(s, ctl, endpoint)), MAX_MESSAGE_BYTES)
    try:
        port = await server.start(host, options.port, context)
    except OSError as exc:
        reason = os.strerror(exc.errno).lower() if exc.errno else bind_problem(host, options.port)
        raise NetworkError(f"gRPC: cannot listen on {address}: {reason}") from None
    return GrpcEndpoint(server, options, port)
