"""``rmq serve`` over a generated small store, as the mqadmin end-to-end tests use it (``Served``),
and their helpers."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from fixtures.generate import GenerateSummary, SentMessage, generate
from rmqcli.cli.main import app
from tests.support.cli import invoke_rmq
from tests.support.serve import ServeProcess

CLUSTER = "DefaultCluster"
BROKER = "broker-a"
CONF = {
    "brokerName": BROKER,
    "brokerClusterName": CLUSTER,
    "mappedFileSizeCommitLog": "65536",  # the small preset's sizes
    "mappedFileSizeConsumeQueue": "600",
    "maxHashSlotNum": "64",
    "maxIndexNum": "256",
    "flushConsumerOffsetInterval": "1000",
}
CQ_UNITS_PER_FILE = 30  # 600-byte consume-queue files


@dataclass
class Served:
    server: ServeProcess
    summary: GenerateSummary
    root: Path
    store: Path  # root / "store"
    ns: str  # the embedded name server's address
    broker: str  # the broker's address

    def rmq(self, *args: str, code: int = 0) -> str:
        """One command through the CLI with ``-n``; the exit code must be ``code``; its stdout, or
        its stderr when it failed."""
        result = invoke_rmq(args[0], "-n", self.ns, *args[1:])
        assert result.exit_code == code, (args, result.exit_code, result.stdout, result.stderr)
        return result.stdout if code == 0 else result.stderr

    def json(self, *args: str) -> Any:
        return json.loads(self.rmq(*args, "--json"))

    def config(self, name: str) -> dict[str, Any]:
        from rmqcli.store.configfiles import load_config

        return load_config(self.store / "config", name).data


def start(root: Path, edit: Callable[[Path], None] | None = None) -> Served:
    summary = generate(root / "store", "small")
    if edit is not None:
        edit(root / "store")
    conf = root / "broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in CONF.items()))
    # the clean-up measures a drilled 10 % disk: a full test disk cannot make it delete files
    usage = root / "disk-usage"
    usage.write_text("0.10")
    server = ServeProcess(root / "store", conf, ["--disk-usage-from", str(usage)]).start()
    return Served(server, summary, root, root / "store", server.namesrv, server.broker)


def wait_for(check: Callable[[], Any], what: str, timeout: float = 15.0) -> Any:
    """Poll ``check`` until it returns something truthy (registration and offset flushes are async)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def dispatched(summary: GenerateSummary, topic: str) -> dict[int, list[SentMessage]]:
    """The generator's records of ``topic`` per queue, in queue order (the store's facts)."""
    out: dict[int, list[SentMessage]] = {}
    for m in summary.sent:
        if m.topic == topic and m.dispatched:
            out.setdefault(m.queue_id, []).append(m)
    for records in out.values():
        records.sort(key=lambda m: m.queue_offset)
    return out


def uniq(m: SentMessage) -> str:
    """What a client calls the message id: ``UNIQ_KEY``, else the offset id."""
    return m.properties.get("UNIQ_KEY") or m.msg_id


def route(s: Served, topic: str) -> dict[str, Any] | None:
    result = CliRunner().invoke(app, ["topicRoute", "-n", s.ns, "-t", topic, "--json"])
    return json.loads(result.stdout) if result.exit_code == 0 else None


def queue_perm(s: Served, topic: str) -> int | None:
    r = route(s, topic)
    return r["queueDatas"][0]["perm"] if r else None
