"""The plain ACL setup the ACL interop tests share: accounts, the ``plain_acl.yml`` they serve,
``rmq serve`` with it, and raw frames over a socket whose source address the test chooses."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from rmqcli.remoting import headers as hd
from rmqcli.remoting.acl import Credentials, sign
from rmqcli.remoting.codec import FrameDecoder, RemotingCommand, decode, encode
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.support.serve import ServeProcess, write_conf

PREFIX = "org.apache.rocketmq.acl.common.AclException: "


ADMIN = Credentials("aclAdmin01", "adminSecret01")


USER = Credentials("aclUser001", "userSecret001")


WRONG_ADMIN = Credentials(ADMIN.access_key, "wrong-secret")


ACL = {
    "globalWhiteRemoteAddresses": ["10.10.103.*"],
    "accounts": [
        {"accessKey": ADMIN.access_key, "secretKey": ADMIN.secret_key, "admin": True},
        {
            "accessKey": USER.access_key,
            "secretKey": USER.secret_key,
            "admin": False,
            "defaultTopicPerm": "DENY",
            "defaultGroupPerm": "SUB",
            "topicPerms": [
                "TopicCpp=PUB|SUB", "TopicOns=PUB|SUB", "TopicJava=PUB|SUB", "TopicFrame=PUB|SUB",
                "TopicSubOnly=SUB",
            ],
            "groupPerms": ["CG_DENIED=DENY"],
        },
        # white-listed at the address every real client here comes from: no valid signature needed
        {"accessKey": "aclWhite01", "secretKey": "whiteSecret01", "whiteRemoteAddress": "127.0.0.1",
         "defaultTopicPerm": "DENY"},
        # white-listed elsewhere: from 127.0.0.1 its signature is checked
        {"accessKey": "aclAway001", "secretKey": "awaySecret01", "whiteRemoteAddress": "127.0.0.2",
         "defaultTopicPerm": "PUB"},
    ],
}  # fmt: skip


TOPICS = ("TopicCpp", "TopicOns", "TopicJava", "TopicFrame", "TopicSubOnly")


def keys(credentials: Credentials) -> list[str]:
    return ["--access-key", credentials.access_key, "--secret-key", credentials.secret_key]


def start_serve(store: Path, acl_file: Path, **conf: str) -> ServeProcess:
    """``rmq serve --acl`` with aclEnable=true; the ACL files are watched every 0.2 s."""
    conf_file = write_conf(store.parent / "broker.conf", aclEnable="true", **conf)
    server = ServeProcess(store, conf_file, extra=["--acl", str(acl_file)])
    previous = os.environ.get("RMQ_ACL_WATCH_SECONDS")
    os.environ["RMQ_ACL_WATCH_SECONDS"] = "0.2"  # the child inherits it
    try:
        return server.start()
    finally:
        if previous is None:
            del os.environ["RMQ_ACL_WATCH_SECONDS"]
        else:
            os.environ["RMQ_ACL_WATCH_SECONDS"] = previous


@contextmanager
def serve_acl(tmp: Path, acl: dict) -> Iterator[ServeProcess]:
    """``start_serve`` over ``tmp/store`` with ``acl`` written as ``tmp/plain_acl.yml``; stopped after."""
    acl_file = tmp / "plain_acl.yml"
    acl_file.write_text(yaml.safe_dump(acl))
    server = start_serve(tmp / "store", acl_file)
    try:
        yield server
    finally:
        server.stop()


def exchange(
    addr: str, request: RemotingCommand, source: str = "127.0.0.1", timeout: float = 10
) -> RemotingCommand:
    """Send ``request`` as built (nothing added) from ``source`` and return the answer."""
    host, _, port = addr.rpartition(":")
    request.opaque = 42
    with socket.socket() as sock:
        sock.settimeout(timeout)
        sock.bind((source, 0))
        sock.connect((host, int(port)))
        sock.sendall(encode(request))
        decoder = FrameDecoder()
        while True:
            data = sock.recv(65536)
            assert data, f"{addr} closed the connection"
            for frame in decoder.feed(data):
                answer = decode(frame)
                if answer.opaque == 42 and answer.is_response:
                    return answer


def send_request(topic: str, body: bytes = b"frame-body", props: str = "") -> RemotingCommand:
    header = hd.SendMessageRequestHeaderV2(
        a="PG_FRAME", b=topic, c="TBW102", d=4, e=0, f=0, g=int(time.time() * 1000), h=0, i=props
    )
    return RemotingCommand.request(RC.SEND_MESSAGE_V2, header.to_ext_fields(), body)


def signed(request: RemotingCommand, credentials: Credentials) -> RemotingCommand:
    sign(request, credentials)
    return request


def keyed(request: RemotingCommand, access_key: str) -> RemotingCommand:
    """An ``AccessKey`` without a ``Signature``."""
    request.ext_fields["AccessKey"] = access_key
    return request


def is_refusal(answer: RemotingCommand, message: str) -> bool:
    return answer.code == RS.NO_PERMISSION and answer.remark == PREFIX + message
