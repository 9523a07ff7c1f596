"""Issue 41: with ``aclEnable=true`` a master's HA port admits only its group's members (the hosts
the name servers list under its broker name), ``globalWhiteRemoteAddresses`` and rmq's own
``rmqHaAllowedAddresses``. A raw socket from another loopback address sending an 8-byte offset of 0
is closed without a byte; an rmq slave signing with ``rmqBrokerAccessKey`` (an admin account)
registers, copies the master's tables and replicates its CommitLog."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator

import pytest
import yaml

from rmqcli.remoting import headers as hd
from rmqcli.remoting.acl import Credentials
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.support.acl import exchange, signed, start_serve
from tests.support.serve import ServeProcess, wait_until, write_conf

ADMIN = Credentials("haAdmin0001", "haAdminSecret01")
ACL = {"accounts": [{"accessKey": ADMIN.access_key, "secretKey": ADMIN.secret_key, "admin": True}]}
ALLOWED = "127.0.0.3"  # rmqHaAllowedAddresses of the master
STRANGER = "127.0.0.2"  # neither a member nor listed


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeProcess, ServeProcess]]:
    tmp = tmp_path_factory.mktemp("ha-allow")
    acl_file = tmp / "plain_acl.yml"
    acl_file.write_text(yaml.safe_dump(ACL))
    (tmp / "master").mkdir()
    master = start_serve(tmp / "master" / "store", acl_file, rmqHaAllowedAddresses=ALLOWED)
    (tmp / "slave").mkdir()
    conf = write_conf(
        tmp / "slave" / "broker.conf", aclEnable="true", brokerRole="SLAVE", brokerId="1",
        rmqBrokerAccessKey=ADMIN.access_key, rmqBrokerSecretKey=ADMIN.secret_key,
    )  # fmt: skip
    extra = ["--acl", str(acl_file), "--no-namesrv", "--namesrv", master.namesrv]
    slave = ServeProcess(tmp / "slave" / "store", conf, extra)
    try:
        slave.start()
        yield master, slave
    finally:
        for server in (slave, master):
            if server.proc is not None:
                server.stop()


def ha_answer(master: ServeProcess, source: str, timeout: float = 8.0) -> bytes:
    """What the master's HA port sends a raw socket from ``source`` asking for offset 0."""
    with socket.socket() as sock:
        sock.settimeout(timeout)
        sock.bind((source, 0))
        sock.connect(("127.0.0.1", master.port + 1))
        sock.sendall(struct.pack(">q", 0))
        got = b""
        deadline = time.monotonic() + timeout
        while len(got) < 12 and time.monotonic() < deadline:
            try:
                data = sock.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not data:
                break
            got += data
        return got


def send(master: ServeProcess, n: int) -> None:
    for i in range(n):
        header = hd.SendMessageRequestHeaderV2(
            a="PG_HA", b="HaTopic", c="TBW102", d=1, e=0, f=0, g=int(time.time() * 1000), h=0, i=""
        )
        request = RemotingCommand.request(RC.SEND_MESSAGE_V2, header.to_ext_fields(), b"ha-%d" % i)
        assert exchange(master.broker, signed(request, ADMIN)).code == RS.SUCCESS


def max_offset(server: ServeProcess) -> int:
    request = RemotingCommand.request(RC.GET_MAX_OFFSET, {"topic": "HaTopic", "queueId": 0})
    answer = exchange(server.broker, signed(request, ADMIN))
    return int(answer.ext_fields["offset"]) if answer.code == RS.SUCCESS else -1


def test_a_stranger_gets_no_byte_of_the_commitlog(group: tuple[ServeProcess, ServeProcess]) -> None:
    master, _ = group
    send(master, 3)
    assert ha_answer(master, STRANGER) == b""
    assert "HA: refused 1 connection(s), the last from 127.0.0.2" in master.output()
    pushed = ha_answer(master, ALLOWED)  # rmqHaAllowedAddresses: a 12-byte header and the log
    assert len(pushed) >= 12 and struct.unpack(">q", pushed[:8])[0] == 0


def test_the_groups_slave_syncs_and_replicates_under_acl(group: tuple[ServeProcess, ServeProcess]) -> None:
    master, slave = group
    send(master, 5)
    wait_until(lambda: max_offset(slave) == max_offset(master) >= 5, 20, "the slave replicates")

    def synced() -> bool:  # GET_ALL_TOPIC_CONFIG is an admin's: the slave signed it
        answer = exchange(slave.broker, signed(RemotingCommand.request(RC.GET_ALL_TOPIC_CONFIG), ADMIN))
        return answer.code == RS.SUCCESS and b'"HaTopic"' in (answer.body or b"")

    wait_until(synced, 20, "the slave copies the master's topics")
    config = exchange(slave.broker, signed(RemotingCommand.request(RC.GET_BROKER_CONFIG), ADMIN))
    assert b"rmqBrokerSecretKey=******" in (config.body or b"")  # the secret is not shown
    assert ADMIN.secret_key.encode() not in (config.body or b"")
    assert "slave sync of" not in slave.output()  # no part of the copy was refused
