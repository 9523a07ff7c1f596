"""``rmq serve`` refuses a bad broker.conf with one line and exit code 2, before touching the store."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.cli import RMQ
from tests.support.serve import free_port


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("messageDelayLevel=1s abc", "messageDelayLevel='1s abc' is not a list"),
        ("messageDelayLevel=", "messageDelayLevel='' is not a list"),
        ("messageDelayLevel=5x", "messageDelayLevel='5x' is not a list"),
        ("transactionCheckMax=many", "transactionCheckMax='many' is not valid"),
        ("transactionTimeOut=6s", "transactionTimeOut='6s' is not valid"),
    ],
)
def test_bad_broker_conf_is_a_usage_error(tmp_path: Path, line: str, message: str) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(line + "\n")
    store = tmp_path / "store"
    proc = subprocess.run(
        [*RMQ, "serve", str(store), "--config", str(conf), "--namesrv-port", str(free_port()),
         "--port", str(free_port())],
        cwd=ROOT, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rmq: error: broker.conf: ") and message in lines[0]
    assert "Traceback" not in proc.stderr
    assert not store.exists()
