"""The NameServer's request and response headers (PROTOCOL.md B.2): KV config, broker
registration, routes, write permission, topics of a cluster."""

from __future__ import annotations

from rmqcli.remoting.headers.base import CommandHeader, header, opt, req


@header
class PutKVConfigRequestHeader(CommandHeader):
    namespace: str = req()
    key: str = req()
    value: str = req()


@header
class GetKVConfigRequestHeader(CommandHeader):
    namespace: str = req()
    key: str = req()


@header
class GetKVConfigResponseHeader(CommandHeader):
    value: str | None = opt()


@header
class DeleteKVConfigRequestHeader(CommandHeader):
    namespace: str = req()
    key: str = req()


@header
class GetKVListByNamespaceRequestHeader(CommandHeader):
    namespace: str = req()


@header
class RegisterBrokerRequestHeader(CommandHeader):
    broker_name: str = req()
    broker_addr: str = req()
    cluster_name: str = req()
    ha_server_addr: str = req()
    broker_id: int = req("long")
    heartbeat_timeout_millis: int | None = opt("long")  # 5.x
    enable_acting_master: bool | None = opt("bool")  # 5.x
    compressed: bool = opt("bool", default=False)
    body_crc32: int = opt("int", default=0)


@header
class RegisterBrokerResponseHeader(CommandHeader):
    ha_server_addr: str | None = opt()
    master_addr: str | None = opt()


@header
class UnRegisterBrokerRequestHeader(CommandHeader):
    broker_name: str = req()
    broker_addr: str = req()
    cluster_name: str = req()
    broker_id: int = req("long")


@header
class GetRouteInfoRequestHeader(CommandHeader):
    topic: str = req()
    accept_standard_json_only: bool | None = opt("bool")


@header
class WipeWritePermOfBrokerRequestHeader(CommandHeader):
    broker_name: str = req()


@header
class WipeWritePermOfBrokerResponseHeader(CommandHeader):
    wipe_topic_count: int = req("int")


@header
class AddWritePermOfBrokerRequestHeader(CommandHeader):
    broker_name: str = req()


@header
class AddWritePermOfBrokerResponseHeader(CommandHeader):
    add_topic_count: int = req("int")


@header
class DeleteTopicFromNamesrvRequestHeader(CommandHeader):
    topic: str = req()
    cluster_name: str | None = opt()


@header
class RegisterTopicRequestHeader(CommandHeader):  # 5.x
    topic: str = req()


@header
class GetTopicsByClusterRequestHeader(CommandHeader):
    cluster: str = req()


@header
class QueryDataVersionRequestHeader(CommandHeader):
    broker_name: str = req()
    broker_addr: str = req()
    cluster_name: str = req()
    broker_id: int = req("long")


@header
class QueryDataVersionResponseHeader(CommandHeader):
    changed: bool = req("bool")
