"""Heartbeat, Telemetry and NotifyClientTermination (the 5.1 proxy's ``ClientActivity``).

Telemetry is the client's long-lived stream. Each ``settings`` command it sends is checked (a
publishing client's topics as ``GrpcValidator.validateTopic``, a subscribing client's group as
``validateConsumerGroup``; settings with neither: the stream ends with INVALID_ARGUMENT "there is no
publishing or subscription data in settings"), kept by client id and answered with ``{status OK,
settings}`` merged by ``settings.SettingsStore`` (settings over its bounds: BAD_REQUEST). A refused
command ends the stream with INVALID_ARGUMENT for a 4xxxx code and INTERNAL otherwise
(``processTelemetryException``). The client's ``thread_stack_trace`` and ``verify_message_result``
answer the admin's requests the channel relayed (``channels``). While its stream is open a producer
is in the broker's client table (``channels``), so the transaction check can reach it; a consumer is
in its group there (``registerConsumer``: CONSUME_ACTIVELY for a simple consumer, CONSUME_PASSIVELY
for a push consumer, CLUSTERING, CONSUME_FROM_LAST_OFFSET, the subscriptions of its settings), so
the admin's consumerConnection and consumerStatus see it.

Heartbeat needs the client's settings (else UNRECOGNIZED_CLIENT_TYPE "cannot find client settings
for this client"); a consumer's group must be legal. NotifyClientTermination forgets the settings
(a client without any is answered OK: the 5.1 proxy fails on a null there).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

from rmqcli.broker.grpc import convert
from rmqcli.broker.grpc import status as st
from rmqcli.broker.grpc.channels import GrpcClientChannel
from rmqcli.broker.grpc.context import CallContext
from rmqcli.broker.grpc.route import check_group
from rmqcli.broker.grpc.settings import SettingsStore, SettingsTooLarge, check_size
from rmqcli.broker.state import ClientChannel, ConsumerGroupInfo, tags_code
from rmqcli.grpcserver import StatusCode
from rmqcli.remoting import json_body as jb

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext
    from rmqcli.broker.grpc.consumer import Consumer
    from rmqcli.broker.grpc.producer import Producer
    from rmqcli.remoting.server.connection import Connection

log = logging.getLogger(__name__)

PRODUCER, PUSH_CONSUMER, SIMPLE_CONSUMER = 1, 2, 3  # ClientType
CONSUMERS = (PUSH_CONSUMER, SIMPLE_CONSUMER)
MAX_STREAMS = 10_000
CLIENT_VERSION = 435  # MQVersion.CURRENT_VERSION of 5.1.1 (V5_1_1): what the proxy registers


class Clients:
    """The gRPC clients: their settings and open Telemetry streams, by client id."""

    def __init__(
        self,
        stubs: Any,
        settings: SettingsStore,
        ctl: BrokerContext,
        producer: Producer,
        consumer: Consumer | None = None,
    ):
        self.s = stubs
        self.settings = settings
        self.ctl = ctl
        self.producer = producer
        self.consumer = consumer
        self.streams: dict[str, GrpcClientChannel] = {}  # client id -> its Telemetry stream
        self._heard: set[str] = set()  # clients whose first heartbeat was logged

    # --- the broker's client table --------------------------------------------------------------
    def register_producer(self, ctx: CallContext, settings: Any) -> None:
        """``registerProducer`` for each published topic (group = topic), on this client's stream."""
        channel = self.streams.get(ctx.client_id)
        if channel is None or channel.closed:
            return
        for topic in settings.publishing.topics:
            members = self.ctl.clients.producers.setdefault(topic.name, {})
            members[ctx.client_id] = ClientChannel(
                ctx.client_id, cast("Connection", channel), ctx.language or "OTHER", CLIENT_VERSION
            )

    def register_consumer(self, ctx: CallContext, settings: Any, group: str) -> None:
        """``registerConsumer``: this client's stream in ``group`` with its subscriptions."""
        channel = self.streams.get(ctx.client_id)
        if channel is None or channel.closed or not group:
            return
        consumers = self.ctl.clients.consumers
        info = consumers.get(group)
        if info is None:
            if len(consumers) >= MAX_STREAMS:
                return
            info = consumers[group] = ConsumerGroupInfo(group)
        passive = settings.client_type == PUSH_CONSUMER
        info.consume_type = "CONSUME_PASSIVELY" if passive else "CONSUME_ACTIVELY"
        info.message_model = "CLUSTERING"
        info.consume_from_where = "CONSUME_FROM_LAST_OFFSET"
        old = info.channels.get(ctx.client_id)
        info.channels[ctx.client_id] = ClientChannel(
            ctx.client_id, cast("Connection", channel), ctx.language or "OTHER", CLIENT_VERSION
        )
        for entry in list(settings.subscription.subscriptions)[:1024]:
            sub = subscription_data(entry)
            known = info.subscriptions.get(sub.topic)
            if known is None or known.sub_string != sub.sub_string:
                info.subscriptions[sub.topic] = sub
        if old is None or old.connection is not channel:
            self.ctl.clients.notify(info.group, list(info.channels.values()))

    def unregister(self, client_id: str) -> None:
        channel = self.streams.get(client_id)
        if channel is not None:
            self.ctl.clients.drop(lambda ch: ch.connection is channel)
        if self.consumer is not None:
            self.consumer.client_gone(client_id)

    def type_name(self, client_type: int) -> str:
        try:
            return str(self.s.definition.ClientType.Name(client_type))
        except ValueError:
            return str(client_type)

    # --- Telemetry ------------------------------------------------------------------------------
    def settings_command(self, ctx: CallContext, command: Any) -> Any:
        """``processAndWriteClientSettings``: the answer to one ``settings`` command."""
        settings = command.settings
        try:
            check_size(settings)
        except SettingsTooLarge as exc:
            raise st.GrpcStatusError(st.BAD_REQUEST, str(exc)) from None
        which = settings.WhichOneof("pub_sub")
        if which == "publishing":
            for topic in settings.publishing.topics:
                convert.check_topic(topic.name)
        elif which == "subscription":
            check_group(settings.subscription.group.name)
        else:
            raise st.GrpcStatusError(
                st.BAD_REQUEST, "there is no publishing or subscription data in settings"
            )
        first = self.settings.raw(ctx.client_id) is None
        self.settings.update(ctx.client_id, settings)
        if which == "publishing":
            self.register_producer(ctx, settings)
        elif settings.client_type in CONSUMERS:
            self.register_consumer(ctx, settings, settings.subscription.group.name)
        if first:
            if which == "publishing":
                what = "publishing " + ", ".join(t.name for t in settings.publishing.topics)
            else:
                what = f"group {settings.subscription.group.name}"
            log.info(
                "gRPC client %s (%s, %s %s) from %s: %s",
                ctx.client_id,
                self.type_name(settings.client_type),
                ctx.language,
                ctx.client_version,
                ctx.remote_address,
                what,
            )
        return self.s.service.TelemetryCommand(
            status=st.make(self.s.definition, st.OK), settings=self.settings.get(ctx.client_id)
        )

    async def telemetry(self, ctx: CallContext, commands: AsyncIterator[Any], context: Any) -> None:
        """Read the client's commands until it half-closes, answering each ``settings``."""
        client_id = ctx.require_client_id()
        channel = GrpcClientChannel(self.s, ctx, context, self.producer)
        if len(self.streams) < MAX_STREAMS or client_id in self.streams:
            self.unregister(client_id)  # a stream opened again: the old one is done
            self.streams[client_id] = channel
        try:
            async for command in commands:
                which = command.WhichOneof("command")
                if which in ("thread_stack_trace", "verify_message_result"):
                    channel.answer(command)  # the answer to a relayed admin request
                    continue
                if which != "settings":
                    continue
                try:
                    reply = self.settings_command(ctx, command)
                except st.GrpcStatusError as exc:
                    code = StatusCode.INVALID_ARGUMENT
                    if not st.BAD_REQUEST <= exc.code < 50000:
                        code = StatusCode.INTERNAL
                    await context.abort(code, f"process client telemetryCommand failed. {exc.message}")
                    return
                await context.write(reply)
        finally:
            channel.close()
            if self.streams.get(client_id) is channel:
                self.unregister(client_id)
                del self.streams[client_id]

    # --- unary calls ----------------------------------------------------------------------------
    def heartbeat(self, ctx: CallContext, request: Any) -> Any:
        d, s = self.s.definition, self.s.service
        settings = self.settings.get(ctx.require_client_id())
        if settings is None:
            return s.HeartbeatResponse(
                status=st.make(d, st.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client")
            )
        if settings.client_type in CONSUMERS:
            check_group(request.group.name)
            self.register_consumer(ctx, settings, request.group.name)
        elif settings.client_type != PRODUCER:
            name = self.type_name(settings.client_type)
            return s.HeartbeatResponse(status=st.make(d, st.UNRECOGNIZED_CLIENT_TYPE, name))
        else:
            self.register_producer(ctx, settings)  # again: the client table expires silent clients
        if ctx.client_id not in self._heard:
            if len(self._heard) >= MAX_STREAMS:
                self._heard.clear()
            self._heard.add(ctx.client_id)
            log.info(
                "gRPC client %s: first heartbeat (%s)", ctx.client_id, self.type_name(settings.client_type)
            )
        return s.HeartbeatResponse(status=st.make(d, st.OK))

    def notify_termination(self, ctx: CallContext, request: Any) -> Any:
        d, s = self.s.definition, self.s.service
        settings = self.settings.remove(ctx.require_client_id())
        self._heard.discard(ctx.client_id)
        self.unregister(ctx.client_id)
        if settings is not None:
            if settings.client_type in CONSUMERS:
                check_group(request.group.name)
            elif settings.client_type != PRODUCER:
                name = self.type_name(settings.client_type)
                return s.NotifyClientTerminationResponse(status=st.make(d, st.UNRECOGNIZED_CLIENT_TYPE, name))
        kind = self.type_name(settings.client_type) if settings is not None else "no settings"
        log.info("gRPC client %s terminated (%s)", ctx.client_id, kind)
        return s.NotifyClientTerminationResponse(status=st.make(d, st.OK))


def subscription_data(entry: Any) -> jb.SubscriptionData:
    """``buildSubscriptionDataSet``: a gRPC ``SubscriptionEntry`` as the broker keeps it."""
    expression = entry.expression
    sql = expression.type == 2  # FilterType.SQL
    text = (expression.expression or "*").strip()[:4096] or "*"
    tags = [] if sql or text == "*" else [t.strip() for t in text.split("||") if t.strip()]
    return jb.SubscriptionData(
        topic=entry.topic.name,
        sub_string=text,
        expression_type="SQL92" if sql else "TAG",
        tags_set=tags,
        code_set=[tags_code(t) for t in tags],
        sub_version=int(time.time() * 1000),
    )
