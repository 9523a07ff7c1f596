"""``rmq serve`` with a second, independent client: ``ali-ons``, the pure-JavaScript RocketMQ client
(npm, JSON remoting headers with fastjson quirks of its own, protocol.md A.3). It sends, consumes
with a fresh group from the first offset, and answers ACTION_RETRY once (consumer send-back).

Needs ``node`` and ``npm install --prefix tests/js`` (``tests/js/package.json`` pins the version);
skipped otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from tests.support import JS, ROOT
from tests.support.cli import RMQ
from tests.support.serve import LEVELS, ServeProcess, write_conf

pytestmark = pytest.mark.js


def test_ali_ons_produces_consumes_and_retries(tmp_path: Path) -> None:
    conf = write_conf(tmp_path / "broker.conf", messageDelayLevel=LEVELS)
    count = 6
    with ServeProcess(tmp_path / "store", conf) as server:
        # ali-ons does not create topics through TBW102: create it as an operator would
        created = subprocess.run(
            [*RMQ, "updateTopic", "-b", server.broker, "-t", "TopicOns", "-r", "4", "-w", "4"],
            cwd=ROOT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
        proc = subprocess.run(
            ["node", str(JS / "ons_roundtrip.js"), server.namesrv, "TopicOns", "CG_ONS", str(count)],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
            env={**os.environ, "HOME": str(tmp_path)},
        )  # fmt: skip
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads(lines[0][len("RESULT ") :])
    sent, got = result["sent"], result["got"]
    assert [s["status"] for s in sent] == ["SEND_OK"] * count
    assert {s["queue"] for s in sent} == {0, 1, 2, 3}
    first = [g for g in got if g["times"] == 0]
    assert Counter(g["key"] for g in first) == Counter(f"ons{i}" for i in range(count))
    for g in first:
        i = int(g["key"][3:])
        assert g["body"] == f"ons-body-{i}-" + "é" * i
        assert g["tags"] == ("TagOdd" if i % 2 else "TagEven")
    again = [g for g in got if g["times"] == 1]
    assert [g["key"] for g in again] == ["ons2"] and again[0]["body"] == "ons-body-2-éé"
