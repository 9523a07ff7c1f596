"""``rmq serve``'s gRPC endpoint beside the real Apache RocketMQ 5.1.1 proxy (local mode,
``../shared/rocketmq-5.1.1-proxy``): one scenario of the 5.x Python client (``grpc5_scenario.py``)
against each, and what the client observed compared step by step: routes, Settings replies, sends of
every message type, receive and ack, held empty receives, a group made after the sends, invalid
requests, change-invisible-duration and each receipt handle afterwards, FIFO order and redelivery,
delivery timestamps, transactions and the check-back; then the 5.x Node.js client's send, receive and
ack (``tests/js/grpc5_consume.js``, ``js`` marker). The two servers get the same broker settings
and the same topics and groups (made with ``rmq updateTopic`` / ``updateSubGroup``, the mqadmin
requests, against each broker).

The scenario normalizes only what must differ (ids, times, ports, revive queues and commit log
offsets in receipt handles). Where rmq deliberately answers otherwise, ``DELIBERATE`` names the
step and what each server says; anything else that differs fails the test. Measured seconds are
judged by bounds, the same for both.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import JS, ROOT
from tests.support.cli import run_rmq
from tests.support.components import require
from tests.support.proxy5 import real_proxy
from tests.support.serve import ServeProcess, wait_until, write_conf

PYTHON5 = ROOT / ".venv-rmq5" / "bin" / "python"
SCENARIO = Path(__file__).with_name("grpc5_scenario.py")

pytestmark = [pytest.mark.java, pytest.mark.proxy5, pytest.mark.client5]

# The same broker.conf lines for both: a transaction check within seconds (5.1.1's defaults: a
# half message is checked after 6 s, in rounds of 30 s). 5.1.1 writes the op messages of ended
# transactions in batches, 3 s apart by default (transactionOpBatchInterval; rmq writes each at
# once and ignores the key): a half message older than the timeout whose op is not written yet is
# checked although its client ended it.
BROKER = {
    "transactionTimeOut": "5000",
    "transactionCheckInterval": "1000",
    "transactionOpBatchInterval": "300",
}

TOPICS = [
    ("DiffN", ["-a", "+message.type=NORMAL"]),
    ("DiffF", ["-o", "true", "-a", "+message.type=FIFO"]),
    ("DiffD", ["-a", "+message.type=DELAY"]),
    ("DiffX", ["-a", "+message.type=TRANSACTION"]),
    ("DiffNode", ["-a", "+message.type=NORMAL"]),  # the Node.js client's
]
NODE_CLIENT = JS / "node_modules" / "rocketmq-client-nodejs" / "package.json"

# Steps where rmq deliberately answers otherwise: step -> (the proxy's observation, rmq's).
# A garbage receipt handle: the proxy's ReceiptHandle.decode throws (IllegalArgumentException /
# NumberFormatException), which it answers INTERNAL_SERVER_ERROR with the exception's text; rmq
# answers INVALID_RECEIPT_HANDLE (a client error the 5.x clients do not retry).
DELIBERATE: dict[str, tuple[Any, Any]] = {
    step: (
        {"error": "InternalErrorException", "code": 50001},
        {"error": "BadRequestException", "code": 40013},
    )
    for step in ("ack.garbage_handle", "ack.short_handle", "change.garbage_handle")
}
# The handle a change answers. The proxy's LocalMessageService builds it with the old handle's start
# offset (the pop batch's first offset) and ReceiptHandle.encode's commit log offset 0, then
# ConsumerProcessor appends the real one: 10 fields. The broker's new checkpoint starts at the
# message's own offset, so an ack with that handle names a checkpoint that does not exist and the
# message comes back after the changed invisible time (below). rmq's handle starts at the message's
# offset and has 9 fields: the ack clears the message.
DELIBERATE["change.changed.new_handle"] = (
    {"fields": 10, "start_is": "batch start"},
    {"fields": 9, "start_is": "offset"},
)
DELIBERATE["receive.normal.redelivered"] = (["changed", "changed_acked"], ["changed"])
# A handle acked in another group's or another topic's name: 5.1.1 takes any well-formed handle and
# answers OK without an effect there (its broker finds no checkpoint); rmq's handles are sealed
# with their group and topic (issue 41: a forged or foreign handle is refused before any work).
# (For another topic the proxy answered OK in one run and INTERNAL_SERVER_ERROR in another: {}
# takes either.)
DELIBERATE["ack.probe.other_group"] = ({"ok": True}, {"error": "BadRequestException", "code": 40013})
DELIBERATE["ack.probe.other_topic"] = ({}, {"error": "BadRequestException", "code": 40013})


def make_topics(namesrv: str, broker: str) -> None:
    """The topics and the orderly group, once the broker is in the name server (the proxy's broker
    registers a moment after the proxy said it started)."""
    wait_until(
        lambda: broker in run_rmq("clusterList", "-n", namesrv).stdout, 60, "the broker's registration"
    )
    for topic, flags in TOPICS:
        run_rmq("updateTopic", "-n", namesrv, "-b", broker, "-t", topic, *flags, check=True)
    run_rmq("updateSubGroup", "-n", namesrv, "-b", broker, "-g", "GDiffF", "-o", "true", check=True)


def scenario(endpoint: str, home: Path) -> dict[str, Any]:
    """Run the scenario against ``endpoint``; its JSON result (the client logs under ``home``)."""
    home.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [str(PYTHON5), str(SCENARIO), json.dumps({"endpoint": endpoint})],
        capture_output=True, text=True, timeout=240, env={**os.environ, "HOME": str(home)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    (home / "observed.json").write_text(json.dumps(result, indent=1, sort_keys=True))
    return result


def node_consume(endpoint: str, home: Path) -> dict | None:
    """The 5.x Node.js client's send of three messages, receive and ack, and one more receive
    (``tests/js/grpc5_consume.js``); None without node or the client."""
    if shutil.which("node") is None or not NODE_CLIENT.is_file():
        return None
    home.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["node", str(JS / "grpc5_consume.js"), endpoint, "DiffNode", "GDiffNode"],
        cwd=home, capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(home)},
    )  # fmt: skip
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads(lines[0][len("RESULT ") :])
    ids_match = result.pop("sent") == result.pop("ids")  # the client's own ids, new each run
    return {**result, "ids_are_the_sent_ids": ids_match}


def matches(observed: Any, expected: Any) -> bool:
    """``observed`` is ``expected``; for a dict: has every key of ``expected`` with its value."""
    if isinstance(expected, dict):
        return isinstance(observed, dict) and all(observed.get(k) == v for k, v in expected.items())
    return bool(observed == expected)


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict, dict]]:
    """The scenario against the real proxy and against rmq serve, both running at once."""
    tmp = tmp_path_factory.mktemp("proxydiff")
    results: dict[str, Any] = {}

    def against_proxy() -> None:
        try:
            with real_proxy(tmp / "proxy", broker_settings=BROKER) as proxy:
                make_topics(proxy.namesrv, proxy.broker)
                results["proxy"] = scenario(proxy.endpoint, tmp / "client-proxy")
                results["proxy"]["node"] = node_consume(proxy.endpoint, tmp / "node-proxy")
        except BaseException as exc:  # reported by the test
            results["proxy"] = exc

    def against_rmq() -> None:
        conf = write_conf(tmp / "broker.conf", **BROKER)
        try:
            with ServeProcess(tmp / "store", conf, extra=["-v"], grpc=True) as serve:
                make_topics(serve.namesrv, serve.broker)
                results["rmq"] = scenario(serve.grpc, tmp / "client-rmq")
                results["rmq"]["node"] = node_consume(serve.grpc, tmp / "node-rmq")
        except BaseException as exc:
            results["rmq"] = exc

    threads = [threading.Thread(target=against_proxy), threading.Thread(target=against_rmq)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name in ("proxy", "rmq"):
        if isinstance(results.get(name), BaseException):
            raise results[name]
    yield results["proxy"], results["rmq"]


def test_every_step_the_client_observes_is_the_same(observed: tuple[dict, dict]) -> None:
    proxy, rmq = observed[0]["steps"], observed[1]["steps"]
    assert list(rmq) == list(proxy)
    differences = []
    for step, seen in proxy.items():
        if step in DELIBERATE:
            want_proxy, want_rmq = DELIBERATE[step]
            assert matches(seen, want_proxy), (step, seen)
            assert matches(rmq[step], want_rmq), (step, rmq[step])
            continue
        if rmq[step] != seen:
            differences.append(f"{step}:\n  proxy: {json.dumps(seen)}\n  rmq:   {json.dumps(rmq[step])}")
    assert not differences, "\n".join(differences)


def test_the_scenario_saw_what_the_proxy_is_known_to_do(observed: tuple[dict, dict]) -> None:
    """The steps the comparison rests on, spelled out (the scenario did what it meant to)."""
    steps = observed[0]["steps"]
    assert steps["receive.invisible_too_small"]["code"] == 40011
    assert steps["send.fifo_to_normal"]["code"] == 40014
    assert steps["ack.changed.old_handle"] == {"ok": True}
    assert steps["ack.changed.changed_handle_after_redelivery"]["code"] == 40013
    assert steps["receive.changed.again"] == [[2, "1"]]  # from the pop retry topic
    assert steps["receive.fifo.before_ack"] == []
    assert steps["receive.fifo.redelivered"] == {
        "A": [["a0", 2], ["a1", 2], ["a2", 2]], "B": [["b0", 2], ["b1", 2], ["b2", 2]]
    }  # fmt: skip
    assert [m["body"] for m in steps["receive.transaction"]] == ["tx-commit", "tx-open"]
    assert [m["properties"]["__transactionId__"] for m in steps["transaction.checked"]] == ["tx-open"]
    assert steps["receive.final"] == {"F": [], "X": []}
    assert steps["ack.fifo.first_handles_after_redelivery"][0]["code"] == 40013


@pytest.mark.parametrize("server", [0, 1], ids=["proxy", "rmq"])
def test_times_are_within_the_same_bounds(observed: tuple[dict, dict], server: int) -> None:
    """Held receives last the long polling time (5 s); the delayed message comes within a second of
    its time; the FIFO messages come back after their 10 s; the check comes within the check
    interval's rounds."""
    timing = observed[server]["timing"]
    for name in ("empty.N", "empty.F", "empty.D", "empty.X", "fifo.before_ack"):
        assert 4.5 <= timing[name] <= 6.5, (name, timing[name])
    assert 0 <= timing["delay.late_ms"] <= 1500, timing["delay.late_ms"]
    assert 9.5 <= timing["fifo.redelivered_after"] <= 25, timing["fifo.redelivered_after"]
    assert timing["transaction.checked_after"] <= 15, timing["transaction.checked_after"]


@pytest.mark.js
def test_the_nodejs_client_sees_the_same(observed: tuple[dict, dict]) -> None:
    proxy, rmq = observed[0]["node"], observed[1]["node"]
    if proxy is None:
        require("js")
    assert proxy["received"] == ["node-0", "node-1", "node-2"] and proxy["ids_are_the_sent_ids"]
    assert rmq == proxy
