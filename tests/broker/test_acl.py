"""The plain ACL of ``rmq serve`` (4.9.8's ``PlainAccessValidator``) and the signing of ``rmq``'s
admin commands, over real sockets against a real ``rmq serve`` with ``aclEnable=true``.

Interop with the C++ client, ali-ons, the real mqadmin and the real 4.9.8 broker is in
``test_acl_interop.py``; this file checks the rules themselves: signatures over the sorted ext
fields and the body, white lists, permissions, the admin codes, the ACL requests 50-54 and their
atomic file writes, and reloading the file when it changes.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from rmqcli.broker.acl.addresses import AclConfigError, compile_pattern
from rmqcli.broker.acl.permissions import DENY, PUB, SUB, check_permission, parse_perm
from rmqcli.remoting import headers as hd
from rmqcli.remoting.acl import Credentials, calc_signature, sign, signed_content
from rmqcli.remoting.client import RemotingClient
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.support.serve import ServeProcess, wait_until, write_conf

ACL = {
    "globalWhiteRemoteAddresses": ["10.10.103.*", "192.168.0.*"],
    "accounts": [
        {
            "accessKey": "RocketMQ",
            "secretKey": 12345678,  # a number in YAML, as in the stock file: read as its text
            "whiteRemoteAddress": None,
            "admin": False,
            "defaultTopicPerm": "DENY",
            "defaultGroupPerm": "SUB",
            "topicPerms": ["topicA=DENY", "topicB=PUB|SUB", "topicC=SUB"],
            "groupPerms": ["groupA=DENY", "groupB=PUB|SUB", "groupC=SUB"],
        },
        {"accessKey": "rocketmq2", "secretKey": "12345678", "admin": True},
    ],
}
USER = Credentials("RocketMQ", "12345678")
ADMIN = Credentials("rocketmq2", "12345678")


# --- rules, without a server ------------------------------------------------------------------
def test_signature_is_hmac_sha1_of_sorted_values_then_body() -> None:
    fields = {"b": "topicB", "a": "PG", "AccessKey": "ak", "Signature": "old", "_UNIQUE_KEY_QUERY": "true"}
    # keys sort as Java's TreeMap (upper case before lower case); Signature and the flag are left out
    assert signed_content(fields, b"BODY") == b"akPGtopicBBODY"
    # RFC 2202 test case 2 for HMAC-SHA1, in Base64
    assert calc_signature(b"what do ya want for nothing?", "Jefe") == "7/zfauXrL6LSdBbV8YTfnCWafHk="
    request = RemotingCommand.request(RC.SEND_MESSAGE_V2, {"b": "topicB", "a": "PG"}, b"x")
    sign(request, Credentials("RocketMQ", "12345678", "tok"))
    assert request.ext_fields["AccessKey"] == "RocketMQ" and request.ext_fields["SecurityToken"] == "tok"
    expected = calc_signature(b"RocketMQtokPGtopicBx", "12345678")
    assert request.ext_fields["Signature"] == expected


@pytest.mark.parametrize(
    ("pattern", "address", "matches"),
    [
        ("10.10.103.*", "10.10.103.7", True),
        ("10.10.103.*", "10.10.104.7", False),
        ("192.168.*.*", "192.168.200.1", True),
        ("192.168.1.1-200", "192.168.1.200", True),
        ("192.168.1.1-200", "192.168.1.201", False),
        ("127.0.0.{1,2}", "127.0.0.2", True),
        ("127.0.0.{1,2}", "127.0.0.3", False),
        ("127.0.0.1,127.0.0.5", "127.0.0.5", True),
        ("*", "8.8.8.8", True),
        ("", "127.0.0.1", False),
        ("::1", "0:0:0:0:0:0:0:1", True),
        ("fe80:0:0:0:0:0:0:*", "fe80::5", True),
        ("fe80:0:0:0:0:0:0:*", "127.0.0.1", False),
    ],
)
def test_white_list_patterns(pattern: str, address: str, matches: bool) -> None:
    assert compile_pattern(pattern)(address) is matches


@pytest.mark.parametrize("pattern", ["192.168.1", "host.example", "1.2.3.300-400", "1.*.3.4", "1.2.3.{x}"])
def test_bad_white_list_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(AclConfigError):
        compile_pattern(pattern)


def test_permissions() -> None:
    assert parse_perm("PUB|SUB") == parse_perm("SUB|PUB") == PUB | SUB
    assert parse_perm("nonsense") == parse_perm(None) == DENY
    assert check_permission(PUB, PUB | SUB) and not check_permission(PUB, SUB)
    assert not check_permission(SUB, DENY | SUB)


# --- a live rmq serve with aclEnable=true -----------------------------------------------------
@pytest.fixture(scope="module")
def acl_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeProcess, Path]]:
    tmp = tmp_path_factory.mktemp("acl")
    acl_file = tmp / "plain_acl.yml"
    acl_file.write_text(yaml.safe_dump(ACL, sort_keys=False))
    conf = write_conf(tmp / "broker.conf", aclEnable="true", autoCreateTopicEnable="true")
    proc = ServeProcess(tmp / "store", conf, extra=["--acl", str(acl_file)])
    os.environ["RMQ_ACL_WATCH_SECONDS"] = "0.2"
    try:
        proc.start()
    finally:
        del os.environ["RMQ_ACL_WATCH_SECONDS"]
    try:
        yield proc, acl_file
    finally:
        proc.kill()


def call(addr: str, request: RemotingCommand, credentials: Credentials | None = None) -> RemotingCommand:
    async def go() -> RemotingCommand:
        async with RemotingClient(credentials=credentials) as client:
            return await client.invoke(addr, request, 10.0)

    return asyncio.run(go())


def send_request(topic: str, body: bytes = b"hello", group: str = "PG_ACL") -> RemotingCommand:
    header = hd.SendMessageRequestHeaderV2(
        a=group, b=topic, c="TBW102", d=4, e=0, f=0, g=int(time.time() * 1000), h=0, i=""
    )
    return RemotingCommand.request(RC.SEND_MESSAGE_V2, header.to_ext_fields(), body)


def refused(response: RemotingCommand, message: str) -> bool:
    return response.code == RS.NO_PERMISSION and response.remark == (
        "org.apache.rocketmq.acl.common.AclException: " + message
    )


def test_sends_are_signed_checked_and_permitted(acl_server: tuple[ServeProcess, Path]) -> None:
    server, _ = acl_server
    ok = call(server.broker, send_request("topicB"), USER)
    assert ok.code == RS.SUCCESS, ok.remark
    assert refused(call(server.broker, send_request("topicB")), "No accessKey is configured")
    wrong = Credentials("RocketMQ", "87654321")
    assert refused(
        call(server.broker, send_request("topicB"), wrong), "Check signature failed for accessKey=RocketMQ"
    )
    stranger = Credentials("nobody-at-all", "12345678")
    assert refused(call(server.broker, send_request("topicB"), stranger), "No acl config for nobody-at-all")
    # SUB only, DENY, and the default (DENY) for a topic the account does not list
    assert refused(
        call(server.broker, send_request("topicC"), USER), "No default permission for topic:topicC"
    )
    assert refused(
        call(server.broker, send_request("topicA"), USER), "No default permission for topic:topicA"
    )
    assert refused(
        call(server.broker, send_request("topicZ"), USER), "No default permission for topic:topicZ"
    )


def test_tampered_or_unsigned_requests_are_refused(acl_server: tuple[ServeProcess, Path]) -> None:
    server, _ = acl_server
    tampered = send_request("topicB", b"original")
    sign(tampered, USER)
    tampered.body = b"Original"
    unsigned = send_request("topicB")
    sign(unsigned, USER)
    del unsigned.ext_fields["Signature"]
    header_changed = send_request("topicB")
    sign(header_changed, USER)
    header_changed.ext_fields["e"] = "1"  # another queue than the one signed
    for request in (tampered, unsigned, header_changed):
        response = call(server.broker, request)  # sent as built: the client adds no keys
        assert refused(response, "Check signature failed for accessKey=RocketMQ"), response.remark


def test_admin_codes_need_an_admin_account(acl_server: tuple[ServeProcess, Path]) -> None:
    server, _ = acl_server
    create = RemotingCommand.request(
        RC.UPDATE_AND_CREATE_TOPIC,
        {"topic": "AclAdminTopic", "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4,
         "perm": 6, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False},
    )  # fmt: skip
    response = call(server.broker, create, USER)
    assert refused(response, "Need admin permission for request code=17, but accessKey=RocketMQ is not")
    assert call(server.broker, create, ADMIN).code == RS.SUCCESS
    # rmq's stricter set: deleting CommitLog files is for admins too (4.9.8 lets any account do it)
    delete = RemotingCommand.request(RC.DELETE_EXPIRED_COMMITLOG)
    assert refused(
        call(server.broker, delete, USER),
        "Need admin permission for request code=329, but accessKey=RocketMQ is not",
    )


def test_rmq_admin_commands_sign_from_flags_environment_and_tools_yml(
    acl_server: tuple[ServeProcess, Path], tmp_path: Path, rmq_proc
) -> None:
    server, _ = acl_server
    base = ["updateTopic", "-n", server.namesrv, "-b", server.broker]
    unsigned = rmq_proc(*base, "-t", "Signed1")
    assert unsigned.returncode == 6 and "No accessKey is configured" in unsigned.stderr
    by_flags = rmq_proc(*base, "-t", "Signed1", "--access-key", "rocketmq2", "--secret-key", "12345678")
    assert by_flags.returncode == 0, by_flags.stderr
    by_env = rmq_proc(
        *base, "-t", "Signed2", env={"RMQ_ACCESS_KEY": "rocketmq2", "RMQ_SECRET_KEY": "12345678"}
    )
    assert by_env.returncode == 0, by_env.stderr
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "tools.yml").write_text("accessKey: rocketmq2\nsecretKey: 12345678\n")
    by_tools = rmq_proc(*base, "-t", "Signed3", env={"ROCKETMQ_HOME": str(tmp_path)})
    assert by_tools.returncode == 0, by_tools.stderr
    half = rmq_proc(*base, "-t", "Signed4", "--access-key", "rocketmq2")
    assert half.returncode == 2 and "secret key" in half.stderr
    topics = rmq_proc("topicList", "-n", server.namesrv).stdout.split()
    assert {"Signed1", "Signed2", "Signed3"} <= set(topics) and "Signed4" not in topics


def test_acl_commands_update_the_file_atomically(acl_server: tuple[ServeProcess, Path], rmq_proc) -> None:
    server, acl_file = acl_server
    keys = ["--access-key", "rocketmq2", "--secret-key", "12345678"]
    before = yaml.safe_load(acl_file.read_text())
    made = rmq_proc("updateAclConfig", "-b", server.broker, "-a", "writer01", "-s", "writer-secret",
                    "-t", "topicW=PUB", "-i", "DENY", *keys)  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert made.stdout == f"create or update plain access config to {server.broker} success.\n"
    after = yaml.safe_load(acl_file.read_text())
    account = next(a for a in after["accounts"] if a["accessKey"] == "writer01")
    assert account["topicPerms"] == ["topicW=PUB"] and account["defaultTopicPerm"] == "DENY"
    counter = after["dataVersion"][0]["counter"]
    assert counter == (before.get("dataVersion") or [{"counter": 0}])[0]["counter"] + 1
    assert not [p for p in acl_file.parent.iterdir() if p.name.startswith(".plain_acl.yml.")]  # no temp left
    writer = Credentials("writer01", "writer-secret")
    assert call(server.broker, send_request("topicW"), writer).code == RS.SUCCESS  # in force at once
    # a bad permission is refused and leaves the file alone
    text = acl_file.read_text()
    bad = rmq_proc(
        "updateAclConfig", "-b", server.broker, "-a", "writer01", "-s", "writer-secret", "-t", "x=PUBX", *keys
    )
    assert bad.returncode == 6 and "UPDATE_AND_CREATE_ACL_CONFIG_FAILED(209)" in bad.stderr
    assert acl_file.read_text() == text
    versions = rmq_proc("clusterAclConfigVersion", "-b", server.broker, "--json", *keys)
    rows = json.loads(versions.stdout)["versions"]
    assert rows[0]["aclFilePath"] == str(acl_file) and rows[0]["counter"] == counter
    gone = rmq_proc("deleteAclConfig", "-b", server.broker, "-a", "writer01", *keys)
    assert gone.returncode == 0 and "account's accesskey is:writer01" in gone.stdout
    assert refused(call(server.broker, send_request("topicW"), writer), "No acl config for writer01")
    again = rmq_proc("deleteAclConfig", "-b", server.broker, "-a", "writer01", *keys)
    assert again.returncode == 6 and "DELETE_ACL_CONFIG_FAILED(210)" in again.stderr
    # the ACL requests are admin-only in rmq
    as_user = rmq_proc("deleteAclConfig", "-b", server.broker, "-a", "rocketmq2", "--access-key", "RocketMQ",
                       "--secret-key", "12345678")  # fmt: skip
    assert as_user.returncode == 6 and "Need admin permission for request code=51" in as_user.stderr


def test_global_white_list_and_reload_on_change(acl_server: tuple[ServeProcess, Path], rmq_proc) -> None:
    server, acl_file = acl_server
    keys = ["--access-key", "rocketmq2", "--secret-key", "12345678"]
    assert refused(call(server.broker, send_request("topicZ")), "No accessKey is configured")
    try:
        white = rmq_proc("updateGlobalWhiteAddr", "-b", server.broker, "-g", "127.0.0.1", *keys)
        assert white.returncode == 0, white.stderr
        assert call(server.broker, send_request("topicZ")).code == RS.SUCCESS  # unsigned, white-listed
    finally:
        rmq_proc("updateGlobalWhiteAddr", "-b", server.broker, "-g", "10.10.103.*", *keys)
    assert refused(call(server.broker, send_request("topicZ")), "No accessKey is configured")
    # an edit by hand is picked up by the watcher (0.2 s here, 5 s by default as 4.9.8)
    data = yaml.safe_load(acl_file.read_text())
    data["accounts"].append(
        {"accessKey": "handmade", "secretKey": "handmade-secret", "defaultTopicPerm": "PUB"}
    )
    acl_file.write_text(yaml.safe_dump(data, sort_keys=False))
    handmade = Credentials("handmade", "handmade-secret")
    wait_until(
        lambda: call(server.broker, send_request("topicH"), handmade).code == RS.SUCCESS,
        30,
        "the edited ACL file reloaded",
    )
    # a broken edit is reported and the previous configuration stays in force
    acl_file.write_text("accounts: [unclosed\n")
    wait_until(lambda: "ACL files not reloaded" in server.output(), 30, "the broken edit reported")
    assert call(server.broker, send_request("topicH"), handmade).code == RS.SUCCESS
    acl_file.write_text(yaml.safe_dump(data, sort_keys=False))


def test_acl_enable_without_a_file_is_a_usage_error(tmp_path: Path, rmq_proc) -> None:
    conf = write_conf(tmp_path / "broker.conf", aclEnable="true")
    result = rmq_proc("serve", str(tmp_path / "store"), "--config", str(conf), "--port", "1", "--no-namesrv")
    assert result.returncode == 2 and "aclEnable=true but no ACL file" in result.stderr
    bad = tmp_path / "bad.yml"
    bad.write_text("accounts:\n  - accessKey: short\n    secretKey: s\n")
    result = rmq_proc(
        "serve", str(tmp_path / "store"), "--config", str(conf), "--acl", str(bad), "--no-namesrv"
    )
    assert result.returncode == 2 and "cannot be null and length should longer than 6" in result.stderr


def test_namesrv_writes_need_an_admin_account(acl_server: tuple[ServeProcess, Path], rmq_proc) -> None:
    server, _ = acl_server
    kv = [
        "updateKvConfig",
        "-n",
        server.namesrv,
        "-s",
        "ORDER_TOPIC_CONFIG",
        "-k",
        "AclKv",
        "-v",
        "broker-a:4",
    ]
    unsigned = rmq_proc(*kv)
    assert unsigned.returncode == 6 and "NO_PERMISSION(16)" in unsigned.stderr, unsigned.stderr
    user = rmq_proc(*kv, "--access-key", "RocketMQ", "--secret-key", "12345678")
    assert user.returncode == 6 and "Need admin permission for request code=100" in user.stderr
    admin = rmq_proc(*kv, "--access-key", "rocketmq2", "--secret-key", "12345678")
    assert admin.returncode == 0, admin.stderr
    wipe = rmq_proc("wipeWritePerm", "-n", server.namesrv, "-b", "broker-a")
    assert wipe.returncode != 0 and "No accessKey is configured" in (wipe.stdout + wipe.stderr)
    assert rmq_proc("topicList", "-n", server.namesrv).returncode == 0  # reads and registrations stay open


def test_acl_files_found_under_rocketmq_home(tmp_path: Path, rmq_proc) -> None:
    """Without --acl, as 4.9.8: $ROCKETMQ_HOME/conf/plain_acl.yml plus every .yml of conf/acl/,
    an access key belonging to the first file that defines it; clusterAclConfigVersion lists each."""
    home = tmp_path / "home"
    (home / "conf" / "acl").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(yaml.safe_dump(ACL, sort_keys=False))
    extra = {
        "accounts": [{"accessKey": "team-extra", "secretKey": "extra-secret", "defaultTopicPerm": "PUB"}]
    }
    (home / "conf" / "acl" / "team.yml").write_text(yaml.safe_dump(extra))
    conf = write_conf(tmp_path / "broker.conf", aclEnable="true")
    server = ServeProcess(tmp_path / "store", conf)
    os.environ["ROCKETMQ_HOME"] = str(home)
    try:
        server.start()
    finally:
        del os.environ["ROCKETMQ_HOME"]
    try:
        assert call(server.broker, send_request("topicB"), USER).code == RS.SUCCESS
        assert (
            call(server.broker, send_request("TeamTopic"), Credentials("team-extra", "extra-secret")).code
            == 0
        )
        versions = rmq_proc("clusterAclConfigVersion", "-b", server.broker, "--json",
                            "--access-key", "rocketmq2", "--secret-key", "12345678")  # fmt: skip
        paths = {row["aclFilePath"] for row in json.loads(versions.stdout)["versions"]}
        assert paths == {str(home / "conf" / "plain_acl.yml"), str(home / "conf" / "acl" / "team.yml")}
    finally:
        server.kill()


def pop_request(topic: str, group: str) -> RemotingCommand:
    header = hd.PopMessageRequestHeader(
        consumer_group=group, topic=topic, queue_id=-1, max_msg_nums=1, invisible_time=10_000,
        poll_time=0, born_time=int(time.time() * 1000), init_mode=0,
    )  # fmt: skip
    return RemotingCommand.request(RC.POP_MESSAGE, header.to_ext_fields())


def test_pop_needs_sub_on_the_topic_and_the_group(acl_server: tuple[ServeProcess, Path]) -> None:
    """rmq's own: 5.1.1 checks only the signature of the POP family; rmq asks what a pull asks."""
    server, _ = acl_server
    assert refused(
        call(server.broker, pop_request("topicZ", "groupC"), USER), "No default permission for topic:topicZ"
    )
    assert refused(
        call(server.broker, pop_request("topicC", "groupA"), USER), "No default permission for group:groupA"
    )
    assert refused(call(server.broker, pop_request("topicC", "groupC")), "No accessKey is configured")
    allowed = call(server.broker, pop_request("topicC", "groupC"), USER)
    assert allowed.code != RS.NO_PERMISSION, allowed.remark
    ack = RemotingCommand.request(
        RC.ACK_MESSAGE,
        hd.AckMessageRequestHeader(
            consumer_group="groupA", topic="topicC", queue_id=0, extra_info="0 0 0 0 0 b 0 0", offset=0
        ).to_ext_fields(),
    )
    assert refused(call(server.broker, ack, USER), "No default permission for group:groupA")


def test_setting_a_group_to_pop_needs_an_admin_account(acl_server: tuple[ServeProcess, Path]) -> None:
    """SET_MESSAGE_REQUEST_MODE (5.x ``mqadmin setConsumeMode``) changes how a group consumes: rmq
    keeps it for admin accounts, as its other additions."""
    server, _ = acl_server
    request = RemotingCommand.request(
        RC.SET_MESSAGE_REQUEST_MODE,
        body=b'{"topic":"topicC","consumerGroup":"groupC","mode":"POP","popShareQueueNum":0}',
    )
    assert refused(
        call(server.broker, request, USER),
        "Need admin permission for request code=401, but accessKey=RocketMQ is not",
    )
    assert call(server.broker, request, ADMIN).code != RS.NO_PERMISSION
