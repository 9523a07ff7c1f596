"""Issue 41: with ``aclEnable=true`` the embedded NameServer of ``rmq serve`` takes REGISTER_BROKER
and UNREGISTER_BROKER only from an admin account's signature, its own broker's, or a
``globalWhiteRemoteAddresses`` address (how an unsigned Java broker is let in). Raw frames over a
socket: a forged registration or unregistration is refused with 16 and the routes stay; the signed
and the white-listed ones are taken. (4.9.8's NameServer takes them all.)"""

from __future__ import annotations

import socket
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.acl import Credentials
from rmqcli.remoting.codec import FrameDecoder, RemotingCommand, decode, encode
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.support.acl import exchange, is_refusal, serve_acl, signed
from tests.support.serve import ServeProcess

ADMIN = Credentials("nsAdmin0001", "nsAdminSecret01")
LIMITED = Credentials("nsUser00001", "nsUserSecret001")
WHITE = "127.0.0.9"  # a Java broker's host, listed globally
ACL = {
    "globalWhiteRemoteAddresses": [WHITE],
    "accounts": [
        {"accessKey": ADMIN.access_key, "secretKey": ADMIN.secret_key, "admin": True},
        {"accessKey": LIMITED.access_key, "secretKey": LIMITED.secret_key, "admin": False,
         "defaultTopicPerm": "PUB|SUB", "defaultGroupPerm": "PUB|SUB"},
    ],
}  # fmt: skip


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    with serve_acl(tmp_path_factory.mktemp("namesrv-acl"), ACL) as serve:
        yield serve


def register(name: str, addr: str, topic: str) -> RemotingCommand:
    table = {topic: jb.TopicConfig(topic_name=topic, read_queue_nums=1, write_queue_nums=1, perm=6)}
    body = jb.encode(jb.RegisterBrokerBody(topic_config_serialize_wrapper=jb.TopicConfigSerializeWrapper(
        topic_config_table=table)))  # fmt: skip
    header = hd.RegisterBrokerRequestHeader(
        broker_name=name, broker_addr=addr, cluster_name="DefaultCluster", ha_server_addr=addr,
        broker_id=0, compressed=False, body_crc32=zlib.crc32(body) & 0x7FFFFFFF,
    )  # fmt: skip
    return RemotingCommand.request(RC.REGISTER_BROKER, header.to_ext_fields(), body)


def unregister(name: str, addr: str) -> RemotingCommand:
    header = hd.UnRegisterBrokerRequestHeader(
        broker_name=name, broker_addr=addr, cluster_name="DefaultCluster", broker_id=0
    )
    return RemotingCommand.request(RC.UNREGISTER_BROKER, header.to_ext_fields())


def route(server: ServeProcess, topic: str) -> dict[int, str] | None:
    """broker-a's addresses in ``topic``'s route (None: no route)."""
    answer = exchange(server.namesrv, RemotingCommand.request(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
    if answer.code != RS.SUCCESS:
        return None
    data = jb.decode(jb.TopicRouteData, answer.body or b"")
    return {k: v for d in data.broker_datas for k, v in d.broker_addrs.items()}


def test_forged_registrations_are_refused_and_routes_stay(server: ServeProcess) -> None:
    real = {0: server.broker}
    assert route(server, "broker-a") == real  # its own broker's registration was taken
    forged = register("broker-a", "127.0.0.1:1", "broker-a")
    assert is_refusal(exchange(server.namesrv, forged), "No accessKey is configured")
    by_user = signed(register("broker-a", "127.0.0.1:1", "broker-a"), LIMITED)
    assert is_refusal(
        exchange(server.namesrv, by_user),
        f"Need admin permission for request code=103, but accessKey={LIMITED.access_key} is not",
    )
    assert is_refusal(
        exchange(server.namesrv, unregister("broker-a", server.broker)), "No accessKey is configured"
    )
    by_user = signed(unregister("broker-a", server.broker), LIMITED)
    assert exchange(server.namesrv, by_user).code == RS.NO_PERMISSION
    assert route(server, "broker-a") == real


@contextmanager
def held(addr: str, source: str = "127.0.0.1") -> Iterator[Callable[[RemotingCommand], RemotingCommand]]:
    """A connection kept open (a broker's registration lasts as long as its channel): ask on it."""
    host, _, port = addr.rpartition(":")
    with socket.socket() as sock:
        sock.settimeout(10)
        sock.bind((source, 0))
        sock.connect((host, int(port)))
        decoder = FrameDecoder()

        def ask(request: RemotingCommand) -> RemotingCommand:
            request.opaque = 7
            sock.sendall(encode(request))
            while True:
                data = sock.recv(65536)
                assert data, f"{addr} closed the connection"
                for frame in decoder.feed(data):
                    answer = decode(frame)
                    if answer.is_response and answer.opaque == 7:
                        return answer

        yield ask


def test_signed_and_white_listed_registrations_are_taken(server: ServeProcess) -> None:
    with held(server.namesrv) as ask:
        assert ask(signed(register("broker-x", "127.0.0.1:2", "TopicX"), ADMIN)).code == RS.SUCCESS
        assert route(server, "TopicX") == {0: "127.0.0.1:2"}
    with held(server.namesrv, WHITE) as ask:
        java = register("broker-j", "127.0.0.9:3", "TopicJ")  # unsigned, as a 4.9.8 broker sends it
        assert ask(java).code == RS.SUCCESS
        assert route(server, "TopicJ") == {0: "127.0.0.9:3"}
        assert ask(unregister("broker-j", "127.0.0.9:3")).code == RS.SUCCESS
        assert route(server, "TopicJ") is None
