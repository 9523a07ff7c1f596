"""rmq against the real 4.9.8 broker with its stock plain_acl.yml (skipped without Java 17 and
../shared/rocketmq-4.9.8): rmq's signatures are accepted, rmq serve and the real broker answer the
same frames alike, and the ACL admin commands work against the real broker."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from rmqcli.remoting import headers as hd
from rmqcli.remoting.acl import Credentials
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.support.acl import PREFIX, exchange, is_refusal, keys, send_request, signed, start_serve
from tests.support.components import require
from tests.support.oracle import KIT, kit_env, real_cluster

# --- rmq against the real 4.9.8 broker with its stock plain_acl.yml -------------------------------
STOCK_USER = Credentials("RocketMQ", "12345678")
STOCK_ADMIN = Credentials("rocketmq2", "12345678")


STOCK_ACL = KIT / "conf" / "plain_acl.yml"


def stock_copy(home: Path) -> Path:
    """``home/conf``: the kit's conf files, byte for byte. The brokers here read their ACL file
    from such a copy, never from the kit: 4.9.8 rewrites its ACL file on an update request (even
    from an account that is no admin), and file modes do not stop a process running as root."""
    shutil.copytree(KIT / "conf", home / "conf")
    acl_file = home / "conf" / "plain_acl.yml"
    assert acl_file.read_bytes() == STOCK_ACL.read_bytes()
    assert "accessKey: RocketMQ" in acl_file.read_text()
    return acl_file


@pytest.fixture(scope="module")
def real_broker(tmp_path_factory: pytest.TempPathFactory, rmq_proc) -> Iterator[tuple[str, str, Path]]:
    """The real NameServer and Broker (``aclEnable=true``, ``rocketmq.home.dir`` a copy of the kit's
    conf: the stock ``plain_acl.yml``); topicB and topicC created by the admin account. Yields the
    namesrv and broker addresses and the broker's ACL file."""
    require("java")
    tmp = tmp_path_factory.mktemp("real-acl")
    acl_file = stock_copy(tmp / "home")
    env = kit_env(tmp, JAVA_OPT_EXT=f"-Drocketmq.home.dir={tmp / 'home'}")  # after the launcher's: it wins
    settings = {"autoCreateTopicEnable": "false", "aclEnable": "true"}
    with real_cluster(tmp, "RealAclCluster", "real-acl", env=env, **settings) as real:
        for topic in ("topicB", "topicC"):
            made = rmq_proc(
                "updateTopic", "-b", real.broker, "-t", topic, "-r", "4", "-w", "4", *keys(STOCK_ADMIN)
            )
            assert made.returncode == 0, made.stdout + made.stderr
        yield real.namesrv, real.broker, acl_file


def real_refusal(answer: RemotingCommand, message: str) -> bool:
    """4.9.8's answer to a refused request: SYSTEM_ERROR with the exception and its stack frame."""
    return answer.code == RS.SYSTEM_ERROR and (answer.remark or "").startswith(
        f"{PREFIX}{message}, org.apache.rocketmq.acl.plain.PlainPermissionManager."
    )


@pytest.mark.java
def test_rmq_commands_sign_for_the_real_broker(real_broker: tuple[str, str, Path], rmq_proc) -> None:
    ns, broker, acl_file = real_broker
    sent = rmq_proc("sendMessage", "-n", ns, "-t", "topicB", "-p", "stock-body é中", "-k", "clé",
                    "-c", "tagB", "--json", *keys(STOCK_USER))  # fmt: skip
    assert sent.returncode == 0, sent.stderr
    assert "SEND_OK" in sent.stdout

    def refused(result: subprocess.CompletedProcess[str], message: str) -> bool:
        return result.returncode == 6 and f"SYSTEM_ERROR(1): {PREFIX}{message}, org.apache." in result.stderr

    wrong = rmq_proc(
        "sendMessage", "-n", ns, "-t", "topicB", "-p", "x", *keys(Credentials("RocketMQ", "87654321"))
    )
    assert refused(wrong, "Check signature failed for accessKey=RocketMQ"), wrong.stderr
    unsigned = rmq_proc("sendMessage", "-n", ns, "-t", "topicB", "-p", "x")
    assert refused(unsigned, "No accessKey is configured"), unsigned.stderr
    sub_only = rmq_proc("sendMessage", "-n", ns, "-t", "topicC", "-p", "x", *keys(STOCK_USER))
    assert refused(sub_only, "No default permission for topic:topicC"), sub_only.stderr
    not_admin = rmq_proc("updateTopic", "-b", broker, "-t", "topicNotMade", *keys(STOCK_USER))
    assert refused(not_admin, "Need admin permission for request code=17, but accessKey=RocketMQ is not")
    # pulls are signed too: groupB may SUB, groupA is DENY
    pulled = rmq_proc("consumeMessage", "-n", ns, "-t", "topicB", "-g", "groupB", "--json", *keys(STOCK_USER))
    assert pulled.returncode == 0, pulled.stderr
    bodies = [m["body"] for r in json.loads(pulled.stdout) if r["kind"] == "consumed" for m in r["messages"]]
    assert bodies == ["stock-body é中"], pulled.stdout
    denied = rmq_proc("consumeMessage", "-n", ns, "-t", "topicB", "-g", "groupA", "--json", *keys(STOCK_USER))
    errors = [r["error"] for r in json.loads(denied.stdout) if r["kind"] == "error"]
    assert errors and all(f"{PREFIX}No default permission for group:groupA, org.apache." in e for e in errors)
    # the ACL version request, read from the real broker
    versions = rmq_proc("clusterAclConfigVersion", "-b", broker, "--json", *keys(STOCK_ADMIN))
    assert versions.returncode == 0, versions.stderr
    assert json.loads(versions.stdout)["versions"][0]["aclFilePath"] == str(acl_file)
    assert acl_file.read_bytes() == STOCK_ACL.read_bytes()  # read, never written


def parity_cases() -> list[tuple[str, RemotingCommand, str | None]]:
    """(name, request as sent, None for accepted or the AclException message)."""

    def create(topic: str) -> RemotingCommand:
        header = hd.CreateTopicRequestHeader(topic=topic, default_topic="TBW102", read_queue_nums=4,
                                             write_queue_nums=4, perm=6, topic_filter_type="SINGLE_TAG",
                                             topic_sys_flag=0, order=False)  # fmt: skip
        return RemotingCommand.request(RC.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields())

    def pull(group: str) -> RemotingCommand:
        header = hd.PullMessageRequestHeader(
            consumer_group=group, topic="topicB", queue_id=0, queue_offset=0, max_msg_nums=1, sys_flag=0,
            commit_offset=0, suspend_timeout_millis=0, subscription="*", sub_version=0,
        )  # fmt: skip
        return RemotingCommand.request(RC.PULL_MESSAGE, header.to_ext_fields())

    props = "KEYS\x01clé\x02TAGS\x01tagé\x02"
    no_signature = signed(send_request("topicB"), STOCK_USER)
    del no_signature.ext_fields["Signature"]
    tampered = signed(send_request("topicB", b"parity-body"), STOCK_USER)
    tampered.body = b"parity-bodY"
    other_queue = signed(send_request("topicB"), STOCK_USER)
    other_queue.ext_fields["e"] = "1"
    user = f"accessKey={STOCK_USER.access_key}"
    no_perm = "No default permission for"
    return [
        ("create as admin", signed(create("topicParity"), STOCK_ADMIN), None),
        ("create as user", signed(create("topicParity"), STOCK_USER),
         f"Need admin permission for request code=17, but {user} is not"),
        ("send", signed(send_request("topicB", "né €".encode(), props), STOCK_USER), None),
        ("send, wrong secret", signed(send_request("topicB"), Credentials("RocketMQ", "87654321")),
         f"Check signature failed for {user}"),
        ("send, no keys", send_request("topicB"), "No accessKey is configured"),
        ("send, unknown key", signed(send_request("topicB"), Credentials("nobody01", "12345678")),
         "No acl config for nobody01"),
        ("send, no signature", no_signature, f"Check signature failed for {user}"),
        ("send, tampered body", tampered, f"Check signature failed for {user}"),
        ("send, tampered header", other_queue, f"Check signature failed for {user}"),
        ("send, SUB topic", signed(send_request("topicC"), STOCK_USER), f"{no_perm} topic:topicC"),
        ("send, DENY topic", signed(send_request("topicA"), STOCK_USER), f"{no_perm} topic:topicA"),
        ("pull, DENY group", signed(pull("groupA"), STOCK_USER), f"{no_perm} group:groupA"),
        ("pull", signed(pull("groupB"), STOCK_USER), None),
    ]  # fmt: skip


@pytest.mark.java
def test_rmq_serve_and_the_real_broker_agree_on_the_stock_file(
    real_broker: tuple[str, str, Path], tmp_path: Path, rmq_proc
) -> None:
    """The same requests to both, over the same stock plain_acl.yml: the same verdicts and texts
    (the real broker: SYSTEM_ERROR and a stack frame after the text; rmq serve: NO_PERMISSION)."""
    _, real, _ = real_broker
    acl_file = stock_copy(tmp_path / "home")
    server = start_serve(tmp_path / "store", acl_file)
    try:
        for topic in ("topicB", "topicC"):
            made = rmq_proc(
                "updateTopic", "-b", server.broker, "-t", topic, "-r", "4", "-w", "4", *keys(STOCK_ADMIN)
            )
            assert made.returncode == 0, made.stderr
        for (name, request, message), (_, twin, _) in zip(parity_cases(), parity_cases(), strict=True):
            ours, theirs = exchange(server.broker, request), exchange(real, twin)
            if message is None:  # past the ACL: the same answer (the pull: 24, no such consumer)
                assert ours.code == theirs.code, (name, ours.code, ours.remark, theirs.code, theirs.remark)
                assert ours.code == (RS.SUBSCRIPTION_NOT_EXIST if name == "pull" else RS.SUCCESS), name
            else:
                assert real_refusal(theirs, message), (name, theirs.code, theirs.remark)
                assert is_refusal(ours, message), (name, ours.code, ours.remark)
    finally:
        server.kill()
    assert acl_file.read_bytes() == STOCK_ACL.read_bytes()  # read, never written


@pytest.mark.java
def test_rmq_acl_commands_against_the_real_broker(real_broker: tuple[str, str, Path], rmq_proc) -> None:
    """updateAclConfig, clusterAclConfigVersion, updateGlobalWhiteAddr and deleteAclConfig as the
    real broker takes them (its copy of the stock file changes: this test comes last)."""
    ns, broker, acl_file = real_broker
    admin = keys(STOCK_ADMIN)
    made = rmq_proc("updateAclConfig", "-b", broker, "-a", "rmqMade01", "-s", "rmqSecret01",
                    "-t", "topicB=PUB,topicC=SUB", "-g", "groupM=SUB", "-i", "DENY", "-u", "SUB",
                    "-w", "127.0.0.9", "-m", "false", *admin)  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert made.stdout == f"create or update plain access config to {broker} success.\n"
    data = yaml.safe_load(acl_file.read_text())
    account = next(a for a in data["accounts"] if a["accessKey"] == "rmqMade01")
    assert account["secretKey"] == "rmqSecret01" and account["whiteRemoteAddress"] == "127.0.0.9"
    assert account["topicPerms"] == ["topicB=PUB", "topicC=SUB"] and account["groupPerms"] == ["groupM=SUB"]
    assert account["defaultTopicPerm"] == "DENY" and account["admin"] is False
    made_keys = keys(Credentials("rmqMade01", "rmqSecret01"))
    sent = rmq_proc("sendMessage", "-n", ns, "-t", "topicB", "-p", "by-a-new-account", *made_keys)
    assert sent.returncode == 0 and "SEND_OK" in sent.stdout, sent.stderr  # its secret, checked by Java
    white = rmq_proc("updateGlobalWhiteAddr", "-b", broker, "-g", "10.10.103.*,127.0.0.5", *admin)
    assert white.returncode == 0, white.stderr
    data = yaml.safe_load(acl_file.read_text())
    assert data["globalWhiteRemoteAddresses"] == ["10.10.103.*", "127.0.0.5"]
    versions = rmq_proc("clusterAclConfigVersion", "-b", broker, "--json", *admin)
    assert json.loads(versions.stdout)["versions"][0]["counter"] == data["dataVersion"][0]["counter"] == 2
    gone = rmq_proc("deleteAclConfig", "-b", broker, "-a", "rmqMade01", *admin)
    assert gone.returncode == 0 and "account's accesskey is:rmqMade01" in gone.stdout, gone.stderr
    again = rmq_proc("deleteAclConfig", "-b", broker, "-a", "rmqMade01", *admin)
    assert again.returncode == 6 and (
        "DELETE_ACL_CONFIG_FAILED(210): The accesskey[rmqMade01] corresponding to accessConfig has been "
        "deleted failed." in again.stderr
    ), again.stderr
    refused = rmq_proc("sendMessage", "-n", ns, "-t", "topicB", "-p", "x", *made_keys)
    assert refused.returncode == 6 and f"{PREFIX}No acl config for rmqMade01, org.apache." in refused.stderr
