"""``rmq updateTopic -a`` against the real 4.9.8 broker, which takes the request and ignores the
attributes: rmq says so on stderr (and in ``--json``) instead of dropping them silently; a 5.x
broker (``rmq serve``) keeps them and gets no warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.admin.runner import run
from tests.support.oracle import real_cluster
from tests.support.serve import ServeProcess, write_conf

pytestmark = pytest.mark.java

WARNING = (
    "does not support topic attributes (a RocketMQ 4.x broker): -a +message.type=FIFO was not applied there"
)


def test_attributes_a_4x_broker_ignores_are_reported(tmp_path: Path) -> None:
    home = tmp_path / "real"
    home.mkdir()
    with real_cluster(home) as real:
        done = run(
            "updateTopic", "-n", real.namesrv, "-b", real.broker, "-t", "T4", "-a", "+message.type=FIFO"
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"create topic to {real.broker} success.\n")
        assert done.stderr == f"rmq: warning: {real.broker} {WARNING}\n"
        done = run(
            "updateTopic",
            "-n",
            real.namesrv,
            "-b",
            real.broker,
            "-t",
            "T4",
            "-a",
            "+message.type=FIFO",
            "--json",
        )
        assert json.loads(done.stdout)["warnings"] == [f"{real.broker} {WARNING}"]
        done = run("updateTopic", "-n", real.namesrv, "-b", real.broker, "-t", "T5")  # no -a: nothing to say
        assert done.returncode == 0 and done.stderr == ""
    with ServeProcess(tmp_path / "rmq", write_conf(tmp_path / "rmq.conf")) as served:
        done = run(
            "updateTopic", "-n", served.namesrv, "-b", served.broker, "-t", "T4", "-a", "+message.type=FIFO"
        )
        assert done.returncode == 0 and done.stderr == ""
