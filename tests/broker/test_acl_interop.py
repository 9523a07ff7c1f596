"""The plain ACL with real clients and the real broker (issue 13; DESIGN.md "Real components").

Against ``rmq serve`` with ``aclEnable=true``, three real clients sign with their own code:

* the C++ client (PyPI ``rocketmq`` 0.4.4, ``set_session_credentials``), in child processes; its
  send errors say only "No route info" after its retries, so the code-16 answers are read from
  the client's own log (``~/logs/rocketmq-cpp/<pid>_rocketmq-cpp.log.0``);
* ali-ons (``tests/js/ons_acl.js``: ``accessKeyId``/``accessKeySecret``);
* the real mqadmin of ``../shared/rocketmq-4.9.8`` with a ``tools.yml`` under a
  ``rocketmq.home.dir`` of our own (``JAVA_OPT_EXT``: a later ``-D`` wins over the launcher's).

Each is accepted with the right keys and refused with NO_PERMISSION (16) and 4.9.8's
``AclException`` text for a wrong secret; the C++ client and ali-ons also without keys (the C++
client then still sends an empty ``AccessKey``: "No acl config for ", as 4.9.8 answers it too) and
for a topic they may only SUB; mqadmin also for a topic created by an account that is no admin. A
tampered body and a missing ``Signature`` field are built at the frame level, as is a connection
from 127.0.0.2 (a source address the real clients cannot choose). As 4.9.8, an address in an account's white
list passes without a valid signature (and without permission checks); an address in the global
white list passes without any keys.

Against the real 4.9.8 broker with ``aclEnable=true`` and its stock ``conf/plain_acl.yml`` (a
byte-for-byte copy of the kit's under a ``rocketmq.home.dir`` of our own, see ``stock_copy``:
``RocketMQ``/``12345678`` is no admin, ``topicB=PUB|SUB``, ``topicC=SUB``,
``groupA=DENY``; ``rocketmq2``/``12345678`` is admin, and its white list ``192.168.1.*`` only lets
it in unsigned from there, so from 127.0.0.1 a signed request of it is checked and passes), ``rmq``
signs its admin commands, sends, pulls and ACL commands (updateAclConfig, updateGlobalWhiteAddr,
clusterAclConfigVersion, deleteAclConfig): the real broker accepts them, so our signatures are
Java's byte for byte. The real broker refuses with SYSTEM_ERROR (1), not 16: 4.9.8's ACL hook throws
and the remoting layer answers ``RemotingHelper.exceptionSimpleDesc``, the same ``AclException``
text followed by ", " and the throwing stack frame. ``rmq serve`` over the same stock file gives
the same verdict and text for the same requests.

Skipped without the C++ client, node and ali-ons, or Java 17 and the kit, each for its part.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from rmqcli.remoting.acl import Credentials
from rmqcli.remoting.codes import ResponseCode as RS
from tests.support import JS
from tests.support.acl import (
    ACL,
    ADMIN,
    PREFIX,
    TOPICS,
    USER,
    WRONG_ADMIN,
    exchange,
    is_refusal,
    keyed,
    keys,
    send_request,
    signed,
    start_serve,
)
from tests.support.cli import run_rmq
from tests.support.oracle import KIT
from tests.support.serve import ServeProcess


@pytest.fixture(scope="module")
def acl_serve(tmp_path_factory: pytest.TempPathFactory, rmq_proc) -> Iterator[tuple[ServeProcess, Path]]:
    """One ``rmq serve`` with ``ACL`` for the client tests; the topics created by the admin account."""
    tmp = tmp_path_factory.mktemp("acl-serve")
    acl_file = tmp / "plain_acl.yml"
    acl_file.write_text(yaml.safe_dump(ACL, sort_keys=False))
    server = start_serve(tmp / "store", acl_file)
    try:
        for topic in TOPICS:
            made = rmq_proc(
                "updateTopic", "-b", server.broker, "-t", topic, "-r", "4", "-w", "4", *keys(ADMIN)
            )
            assert made.returncode == 0, made.stderr
        yield server, acl_file
    finally:
        server.kill()


def stored(server: ServeProcess, topic: str) -> int:
    """Messages the broker holds for ``topic``: the sum of its queues' max offsets (topicStatus,
    signed by the admin account)."""
    status = run_rmq("topicStatus", "-n", server.namesrv, "-t", topic, "--json", *keys(ADMIN))
    assert status.returncode == 0, status.stderr
    return sum(row["maxOffset"] for row in json.loads(status.stdout))


# --- frames over a socket whose source address we choose ----------------------------------------


def test_frames_unsigned_tampered_and_without_pub_permission(acl_serve: tuple[ServeProcess, Path]) -> None:
    server, _ = acl_serve
    before = stored(server, "TopicFrame")
    ok = exchange(server.broker, signed(send_request("TopicFrame"), USER))
    assert ok.code == RS.SUCCESS, ok.remark
    no_keys = exchange(server.broker, send_request("TopicFrame"))
    assert is_refusal(no_keys, "No accessKey is configured"), no_keys.remark
    no_signature = signed(send_request("TopicFrame"), USER)
    del no_signature.ext_fields["Signature"]
    answer = exchange(server.broker, no_signature)
    assert is_refusal(answer, f"Check signature failed for accessKey={USER.access_key}"), answer.remark
    tampered = signed(send_request("TopicFrame", b"frame-body"), USER)
    tampered.body = b"frame-bodY"  # one byte changed after signing
    answer = exchange(server.broker, tampered)
    assert is_refusal(answer, f"Check signature failed for accessKey={USER.access_key}"), answer.remark
    sub_only = exchange(server.broker, signed(send_request("TopicSubOnly"), USER))
    assert is_refusal(sub_only, "No default permission for topic:TopicSubOnly"), sub_only.remark
    assert stored(server, "TopicFrame") == before + 1  # only the signed one


def test_an_account_white_list_by_source_address(acl_serve: tuple[ServeProcess, Path]) -> None:
    server, _ = acl_serve
    # aclWhite01 is white-listed at 127.0.0.1: in without a signature (and without permission checks)
    assert exchange(server.broker, keyed(send_request("TopicFrame"), "aclWhite01")).code == RS.SUCCESS
    bogus = Credentials("aclWhite01", "not-its-secret")
    assert exchange(server.broker, signed(send_request("TopicFrame"), bogus)).code == RS.SUCCESS
    # from 127.0.0.2 the signature is checked, then the permissions (defaultTopicPerm DENY)
    away = exchange(server.broker, keyed(send_request("TopicFrame"), "aclWhite01"), source="127.0.0.2")
    assert is_refusal(away, "Check signature failed for accessKey=aclWhite01"), away.remark
    away = exchange(server.broker, signed(send_request("TopicFrame"), bogus), source="127.0.0.2")
    assert is_refusal(away, "Check signature failed for accessKey=aclWhite01"), away.remark
    real = Credentials("aclWhite01", "whiteSecret01")
    away = exchange(server.broker, signed(send_request("TopicFrame"), real), source="127.0.0.2")
    assert is_refusal(away, "No default permission for topic:TopicFrame"), away.remark
    # aclAway001 the other way round
    home = exchange(server.broker, keyed(send_request("TopicFrame"), "aclAway001"), source="127.0.0.2")
    assert home.code == RS.SUCCESS, home.remark
    here = exchange(server.broker, keyed(send_request("TopicFrame"), "aclAway001"))
    assert is_refusal(here, "Check signature failed for accessKey=aclAway001"), here.remark


def test_the_global_white_list_by_source_address(tmp_path: Path) -> None:
    acl = {"globalWhiteRemoteAddresses": ["127.0.0.1"], "accounts": ACL["accounts"]}
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(yaml.safe_dump(acl, sort_keys=False))
    server = start_serve(tmp_path / "store", acl_file, autoCreateTopicEnable="true")
    try:
        unsigned = exchange(server.broker, send_request("TopicGlobal"))
        assert unsigned.code == RS.SUCCESS, unsigned.remark  # no keys at all
        away = exchange(server.broker, send_request("TopicGlobal"), source="127.0.0.2")
        assert is_refusal(away, "No accessKey is configured"), away.remark
        away = exchange(
            server.broker, keyed(send_request("TopicGlobal"), USER.access_key), source="127.0.0.2"
        )
        assert is_refusal(away, f"Check signature failed for accessKey={USER.access_key}"), away.remark
        admin = exchange(server.broker, signed(send_request("TopicGlobal"), ADMIN), source="127.0.0.2")
        assert admin.code == RS.SUCCESS, admin.remark
    finally:
        server.kill()


# --- the C++ client ------------------------------------------------------------------------------
CPP = textwrap.dedent(
    r"""
    import json, os, sys, time
    from rocketmq.client import Producer, PushConsumer, Message

    cmd = json.loads(sys.argv[1])
    out = {"pid": os.getpid()}

    def credentials(client):
        if cmd.get("access_key") is not None:
            client.set_session_credentials(cmd["access_key"], cmd["secret_key"], "ALIYUN")

    if cmd["op"] == "produce":
        p = Producer(cmd["group"])
        p.set_namesrv_addr(cmd["namesrv"])
        credentials(p)
        p.start()
        results = []
        try:
            for key in cmd["keys"]:
                m = Message(cmd["topic"])
                m.set_keys(key)
                m.set_tags("TagAcl")
                m.set_body("body-" + key)
                try:
                    r = p.send_sync(m)
                    results.append({"key": key, "status": int(r.status), "id": r.msg_id})
                except Exception as exc:
                    results.append({"key": key, "error": type(exc).__name__, "text": str(exc)})
        finally:
            p.shutdown()
        out["results"] = results
    else:
        got = []
        c = PushConsumer(cmd["group"])
        c.set_namesrv_addr(cmd["namesrv"])
        credentials(c)
        def on_message(msg):
            got.append({"key": msg.keys.decode(), "body": msg.body.decode()})

        c.subscribe(cmd["topic"], on_message)
        c.start()
        deadline = time.time() + cmd["wait"]
        while time.time() < deadline and len(got) < cmd["expect"]:
            time.sleep(0.1)
        time.sleep(0.3)
        c.shutdown()
        out["got"] = got
    sys.stdout.write("\nRESULT " + json.dumps(out) + "\n")
    sys.stdout.flush()
    """
)


class CppRun:
    """One C++ client process; ``result()`` is its RESULT document plus its log's text."""

    def __init__(self, tmp: Path, cmd: dict, credentials: Credentials | None):
        script = tmp / "cpp_acl.py"
        if not script.exists():
            script.write_text(CPP)
        self.home = tmp / "cpp-home"
        self.home.mkdir(exist_ok=True)
        if credentials is not None:
            cmd = {**cmd, "access_key": credentials.access_key, "secret_key": credentials.secret_key}
        self.proc = subprocess.Popen(
            [sys.executable, str(script), json.dumps(cmd)],
            cwd=tmp,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "HOME": str(self.home)},  # the client logs under ~/logs
        )

    def result(self, timeout: float = 60) -> dict:
        try:
            output, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            output, _ = self.proc.communicate()
            raise AssertionError(f"the C++ client timed out: {output[-2000:]}") from None
        lines = [line for line in output.splitlines() if line.startswith("RESULT ")]
        assert lines, f"the C++ client failed ({self.proc.returncode}): {output[-2000:]}"
        result = json.loads(lines[-1][len("RESULT ") :])
        logs = sorted((self.home / "logs" / "rocketmq-cpp").glob(f"{result['pid']}_*"))
        result["log"] = "".join(path.read_text(errors="replace") for path in logs)
        return result


def cpp(tmp: Path, cmd: dict, credentials: Credentials | None) -> dict:
    return CppRun(tmp, cmd, credentials).result()


def refused_in_log(log: str, message: str) -> bool:
    """The C++ client logs an error answer as ``remark:<remark>, error code:16`` (sends) or
    ``<remark>,error:16`` (other requests)."""
    return f"{PREFIX}{message}, error code:16" in log or f"{PREFIX}{message},error:16" in log


@pytest.mark.cpp
def test_cpp_client_with_session_credentials(acl_serve: tuple[ServeProcess, Path], tmp_path: Path) -> None:
    server, _ = acl_serve
    ns = server.namesrv

    def produce(credentials: Credentials | None, topic: str, keys: list[str]) -> dict:
        return cpp(tmp_path, {"op": "produce", "namesrv": ns, "group": "PG_CPP_ACL", "topic": topic,
                              "keys": keys}, credentials)  # fmt: skip

    good = produce(USER, "TopicCpp", ["cpp0", "cpp1", "cpp2"])
    assert [r.get("status") for r in good["results"]] == [0, 0, 0], good["results"]

    wrong = produce(Credentials(USER.access_key, "wrong-secret"), "TopicCpp", ["cppWrong"])
    assert "error" in wrong["results"][0], wrong["results"]
    assert refused_in_log(wrong["log"], f"Check signature failed for accessKey={USER.access_key}"), wrong[
        "log"
    ]

    # without set_session_credentials the client still sends an empty AccessKey (4.9.8 answers the same)
    unsigned = produce(None, "TopicCpp", ["cppUnsigned"])
    assert "error" in unsigned["results"][0], unsigned["results"]
    assert refused_in_log(unsigned["log"], "No acl config for "), unsigned["log"]

    sub_only = produce(USER, "TopicSubOnly", ["cppSubOnly"])
    assert "error" in sub_only["results"][0], sub_only["results"]
    assert refused_in_log(sub_only["log"], "No default permission for topic:TopicSubOnly"), sub_only["log"]

    # white list: aclWhite01 is white-listed at 127.0.0.1, so even a wrong secret is let in;
    # aclAway001 is white-listed at 127.0.0.2 only, so from here its signature counts
    white = produce(Credentials("aclWhite01", "wrong-secret"), "TopicCpp", ["cppWhite"])
    assert [r.get("status") for r in white["results"]] == [0], white["results"]
    away = produce(Credentials("aclAway001", "wrong-secret"), "TopicCpp", ["cppAway"])
    assert "error" in away["results"][0], away["results"]
    assert refused_in_log(away["log"], "Check signature failed for accessKey=aclAway001"), away["log"]

    assert stored(server, "TopicCpp") == 4  # cpp0-2 and cppWhite: nothing refused was stored
    assert stored(server, "TopicSubOnly") == 0

    # consumers: a group the account may SUB gets everything; a DENY group is refused
    allowed = CppRun(tmp_path, {"op": "consume", "namesrv": ns, "group": "CG_CPP_ACL", "topic": "TopicCpp",
                                "expect": 4, "wait": 30}, USER)  # fmt: skip
    denied = CppRun(tmp_path, {"op": "consume", "namesrv": ns, "group": "CG_DENIED", "topic": "TopicCpp",
                               "expect": 1, "wait": 6}, USER)  # fmt: skip
    got, refused = allowed.result(), denied.result()
    assert sorted(m["key"] for m in got["got"]) == ["cpp0", "cpp1", "cpp2", "cppWhite"], got["got"]
    assert all(m["body"] == "body-" + m["key"] for m in got["got"])
    assert refused["got"] == []
    assert refused_in_log(refused["log"], "No default permission for group:CG_DENIED"), refused["log"][-3000:]


# --- ali-ons -------------------------------------------------------------------------------------
def ons(tmp: Path, ns: str, topic: str, credentials: Credentials | None, count: int, mode: str) -> dict:
    ak, sk = (credentials.access_key, credentials.secret_key) if credentials else ("", "")
    proc = subprocess.run(
        ["node", str(JS / "ons_acl.js"), ns, topic, "CG_ONS_ACL", ak, sk, str(count), mode],
        cwd=tmp, capture_output=True, text=True, timeout=90, env={**os.environ, "HOME": str(tmp)},
    )  # fmt: skip
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(lines[0][len("RESULT ") :])


def ons_refused(result: dict, message: str) -> bool:
    """Every send failed, and the broker's answers were 16 with ``message``."""
    return (
        all("error" in s for s in result["sent"])
        and bool(result["answers"])
        and all(a["code"] == RS.NO_PERMISSION and a["message"] == PREFIX + message for a in result["answers"])
    )


@pytest.mark.js
def test_ali_ons_with_access_keys(acl_serve: tuple[ServeProcess, Path], tmp_path: Path) -> None:
    server, _ = acl_serve
    ns = server.namesrv
    good = ons(tmp_path, ns, "TopicOns", USER, 3, "roundtrip")
    assert [s.get("status") for s in good["sent"]] == ["SEND_OK"] * 3, good
    assert sorted(g["key"] for g in good["got"]) == ["onsacl0", "onsacl1", "onsacl2"], good["got"]
    assert all(g["body"] == "ons-acl-" + g["key"][len("onsacl") :] for g in good["got"])

    wrong = ons(tmp_path, ns, "TopicOns", Credentials(USER.access_key, "wrong-secret"), 1, "send")
    assert ons_refused(wrong, f"Check signature failed for accessKey={USER.access_key}"), wrong
    unsigned = ons(tmp_path, ns, "TopicOns", None, 1, "send")
    assert ons_refused(unsigned, "No accessKey is configured"), unsigned
    sub_only = ons(tmp_path, ns, "TopicSubOnly", USER, 1, "send")
    assert ons_refused(sub_only, "No default permission for topic:TopicSubOnly"), sub_only
    assert stored(server, "TopicOns") == 3
    assert stored(server, "TopicSubOnly") == 0


# --- the real mqadmin against rmq serve ----------------------------------------------------------
def mqadmin_home(tmp: Path, credentials: Credentials | None) -> Path:
    """A ``rocketmq.home.dir`` whose ``conf/tools.yml`` holds the keys (none: no tools.yml)."""
    home = (
        tmp / f"mqadmin-{credentials.access_key}-{credentials.secret_key}" if credentials else tmp / "mqadmin"
    )
    (home / "conf").mkdir(parents=True, exist_ok=True)
    shutil.copy(KIT / "conf" / "logback_tools.xml", home / "conf")
    if credentials is not None:
        (home / "conf" / "tools.yml").write_text(
            f"accessKey: {credentials.access_key}\nsecretKey: {credentials.secret_key}\n"
        )
    return home


def mqadmin(tmp: Path, runs: list[tuple[Credentials | None, list[str]]]) -> list[str]:
    """Run mqadmin commands one after another; their outputs (it exits 0 even when a command fails).
    One JVM at a time: mqadmin gives a request 5 s including its connect, which four JVMs starting at
    once on a loaded 2-core machine used up before the first byte was sent."""
    outputs = []
    for credentials, args in runs:
        home = mqadmin_home(tmp, credentials)
        env = {
            **os.environ,
            "JAVA_OPT_EXT": f"-Drocketmq.home.dir={home}",
            "ORACLE_STATE_DIR": str(tmp / "state"),
        }
        proc = subprocess.Popen(
            [str(KIT / "bin" / "mqadmin"), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=tmp,
        )
        try:
            outputs.append(proc.communicate(timeout=120)[0])
        except subprocess.TimeoutExpired:
            proc.kill()
            outputs.append(proc.communicate()[0] + "\n(timed out)")
    return outputs


@pytest.mark.java
def test_real_mqadmin_signs_with_its_tools_yml(
    acl_serve: tuple[ServeProcess, Path], tmp_path: Path, rmq_proc
) -> None:
    server, acl_file = acl_serve
    ns, broker = server.namesrv, server.broker
    created, wrong, as_user, updated = mqadmin(
        tmp_path,
        [
            (ADMIN, ["updateTopic", "-n", ns, "-b", broker, "-t", "TopicMqAdmin"]),
            (WRONG_ADMIN, ["updateTopic", "-n", ns, "-b", broker, "-t", "TopicMqWrong"]),
            (USER, ["updateTopic", "-n", ns, "-b", broker, "-t", "TopicMqUser"]),
            (ADMIN, ["updateAclConfig", "-n", ns, "-b", broker, "-a", "mqadminMade1", "-s", "madeSecret01",
                     "-t", "TopicMade=PUB", "-i", "DENY", "-u", "SUB", "-w", "127.0.0.3"]),
        ],
    )  # fmt: skip
    assert f"create topic to {broker} success." in created, created
    assert (
        "CODE: 16" in wrong and f"{PREFIX}Check signature failed for accessKey={ADMIN.access_key}" in wrong
    ), wrong
    need_admin = f"Need admin permission for request code=17, but accessKey={USER.access_key} is not"
    assert "CODE: 16" in as_user and PREFIX + need_admin in as_user, as_user
    topics = rmq_proc("topicList", "-n", ns).stdout.split()
    assert "TopicMqAdmin" in topics and "TopicMqWrong" not in topics and "TopicMqUser" not in topics
    # updateAclConfig changed the file; the new account is in force at once
    assert f"create or update plain access config to {broker} success." in updated, updated
    data = yaml.safe_load(acl_file.read_text())
    made = next(a for a in data["accounts"] if a["accessKey"] == "mqadminMade1")
    assert made["secretKey"] == "madeSecret01" and made["topicPerms"] == ["TopicMade=PUB"]
    assert made["whiteRemoteAddress"] == "127.0.0.3" and made["defaultTopicPerm"] == "DENY"
    answer = exchange(broker, signed(send_request("TopicMade"), Credentials("mqadminMade1", "madeSecret01")))
    assert answer.code == RS.SUCCESS, answer.remark  # autoCreateTopicEnable: made from TBW102
    send = ["sendMessage", "-n", ns, "-t", "TopicJava", "-p", "java-body", "-k", "javaKey"]
    versions, sent = mqadmin(
        tmp_path, [(ADMIN, ["clusterAclConfigVersion", "-n", ns, "-c", "DefaultCluster"]), (USER, send)]
    )
    assert "get cluster's plain access config version success." in versions, versions
    row = next(line.split() for line in versions.splitlines() if broker in line)
    assert row[:5] == [
        "DefaultCluster",
        "broker-a",
        broker,
        str(acl_file),
        str(data["dataVersion"][0]["counter"]),
    ]
    # the Java producer signs its sends; a failure that is no ACL answer (seen once, with other
    # JVMs starting on a loaded machine) is tried once more alone: a refusal says CODE: 16 each time
    if "SEND_OK" not in sent and "CODE: 16" not in sent:
        (sent,) = mqadmin(tmp_path, [(USER, send)])
    assert "SEND_OK" in sent, sent
    assert stored(server, "TopicJava") == 1
