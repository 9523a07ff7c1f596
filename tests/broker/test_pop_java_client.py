"""The real RocketMQ 5.1.1 Java push consumer consuming by POP from ``rmq serve``: SET_MESSAGE_REQUEST_MODE
switches (topic, group) to POP, the client (``clientRebalance=false``) gets its queues from
QUERY_ASSIGNMENT, pops, acks, and changes the invisible time of a message it fails once; the
broker revives it (reconsumeTimes 1). Run as a single-file Java program over the kit's jars.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.support import popwire as w
from tests.support.oracle5 import KIT5
from tests.support.serve import ServeProcess, write_conf

pytestmark = [pytest.mark.java, pytest.mark.java5]

PROGRAM = Path(__file__).parent / "java5" / "PopPushConsumer.java"


def test_the_5_1_1_push_consumer_pops_acks_and_gets_a_failed_message_again(tmp_path: Path) -> None:
    keys = [f"k{i}" for i in range(6)]
    with ServeProcess(tmp_path / "store", write_conf(tmp_path / "broker.conf")) as server:
        a = server.broker
        assert w.create_topic(a, "TopicJ", 4).code == RS.SUCCESS
        mode = {"topic": "TopicJ", "consumerGroup": "GJ", "mode": "POP", "popShareQueueNum": 0}
        assert w.call(a, RC.SET_MESSAGE_REQUEST_MODE, None, json.dumps(mode).encode()).code == RS.SUCCESS
        retry_mode = {**mode, "topic": "%RETRY%GJ"}
        refused = w.call(a, RC.SET_MESSAGE_REQUEST_MODE, None, json.dumps(retry_mode).encode())
        assert refused.code == RS.NO_PERMISSION
        home = tmp_path / "home"
        home.mkdir()
        run = subprocess.run(
            ["java", "-Xmx256m", f"-Duser.home={home}", "-cp", f"{KIT5 / 'lib'}/*", str(PROGRAM),
             server.namesrv, "TopicJ", "GJ", str(len(keys)), "k2", "45"],
            capture_output=True, text=True, timeout=120, cwd=tmp_path, env={**os.environ, "HOME": str(home)},
        )  # fmt: skip
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        offsets = sum(max(w.query_offset(a, "GJ", "TopicJ", q), 0) for q in range(4))
        saved = json.loads((server.store / "config" / "messageRequestMode.json").read_text())
    got = [line.split(" ") for line in run.stdout.splitlines() if line.startswith("GOT ")]
    first = Counter(key for _, key, times, _ in got if times == "0")
    assert first == Counter(keys)  # each once, by POP (the client built POP_CK from the answer)
    assert all(has_ck == "true" for *_, has_ck in got)
    assert [key for _, key, times, _ in got if times != "0"] == ["k2"]  # the failed one, revived
    assert offsets == len(keys)
    assert saved["messageRequestModeMap"]["TopicJ"]["GJ"]["mode"] == "POP"
