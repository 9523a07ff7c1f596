"""``rmq serve`` refuses a bad broker.conf with one line and exit code 2, before touching the store."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.cli import RMQ
from tests.support.serve import free_port, free_port_pair


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("messageDelayLevel=1s abc", "messageDelayLevel='1s abc' is not a list"),
        ("messageDelayLevel=", "messageDelayLevel='' is not a list"),
        ("messageDelayLevel=5x", "messageDelayLevel='5x' is not a list"),
        ("transactionCheckMax=many", "transactionCheckMax='many' is not valid"),
        ("transactionTimeOut=6s", "transactionTimeOut='6s' is not valid"),
        ("reviveQueueNum=eight", "reviveQueueNum='eight' is not valid"),  # POP's, read as given
        ("reviveQueueNum=0", "reviveQueueNum=0 is outside [1, 64]"),
        ("timerPrecisionMs=0", "timerPrecisionMs=0 is outside [10, 3600000]"),  # the timer's
    ],
)
def test_bad_broker_conf_is_a_usage_error(tmp_path: Path, line: str, message: str) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(line + "\n")
    store = tmp_path / "store"
    proc = subprocess.run(
        [*RMQ, "serve", str(store), "--config", str(conf), "--namesrv-port", str(free_port()),
         "--port", str(free_port_pair())],
        cwd=ROOT, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rmq: error: broker.conf: ") and message in lines[0]
    assert "Traceback" not in proc.stderr
    assert not store.exists()


def test_the_keys_of_pop_and_the_timer_are_known() -> None:
    """Read as given by their services, they are not named as keys rmq does not implement."""
    from rmqcli.broker.serve import unimplemented_keys

    given = {"reviveQueueNum": "4", "reviveInterval": "500", "popPollingSize": "16",
             "maxPopPollingSize": "64", "timerMaxDelaySec": "60", "timerPrecisionMs": "100",
             "timerWheelEnable": "true", "timerMaxPending": "10", "noSuchKey": "1"}  # fmt: skip
    assert unimplemented_keys(given) == ["noSuchKey"]
