"""End-to-end: ``rmq serve`` as a subprocess, the real C++ client (PyPI ``rocketmq`` 0.4.4) producing and
consuming (DESIGN.md "broker end-to-end"; protocol.md D.3 for what that client sends).

The client runs in its own Python process per step (``CLIENT`` below), so a misbehaving native
library can only fail a step, never hang or crash pytest; every step has a timeout and the server
is always killed at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.serve import ServeProcess, write_conf

# The client side, run in a child process: one JSON document on stdout.
CLIENT = textwrap.dedent(
    r"""
    import json, sys, time, hashlib
    from rocketmq.client import Producer, PushConsumer, Message

    cmd = json.loads(sys.argv[1])
    ns = cmd["namesrv"]
    out = {}

    def message(spec):
        m = Message(spec["topic"])
        if spec.get("keys"): m.set_keys(spec["keys"])
        if spec.get("tags"): m.set_tags(spec["tags"])
        for k, v in spec.get("props", {}).items(): m.set_property(k, v)
        m.set_body(spec["body"])
        return m

    def produce(specs, group):
        p = Producer(group)
        p.set_namesrv_addr(ns)
        p.start()
        results = []
        try:
            for spec in specs:
                mode = spec.get("mode", "sync")
                if mode == "sync":
                    r = p.send_sync(message(spec))
                    results.append([int(r.status), r.msg_id, r.offset])
                elif mode == "oneway":
                    p.send_oneway(message(spec))
                    results.append(None)
                elif mode == "batch":  # the elements follow in "elements"
                    r = p.send_batch([message(e) for e in spec["elements"]])
                    results.append([int(r.status), "batch", r.offset])
                elif mode == "orderly":
                    r = p.send_orderly(message(spec), spec["arg"])
                    results.append([int(r.status), r.msg_id, r.offset])
        finally:
            p.shutdown()
        return results

    def consume(group, topic, expect, wait, then=None):
        got = []
        def cb(msg):
            got.append({
                "topic": msg.topic, "keys": msg.keys.decode(), "tags": msg.tags.decode(),
                "props": {k: (msg.get_property(k) or b"").decode() for k in ("p1", "p2")},
                "sha": hashlib.sha256(msg.body).hexdigest(), "len": len(msg.body),
                "queue": msg.queue_id, "offset": msg.queue_offset, "id": msg.id,
            })
        c = PushConsumer(group)
        c.set_namesrv_addr(ns)
        c.subscribe(topic, cb, cmd.get("expression", "*"))
        c.start()
        try:
            deadline = time.time() + wait
            while time.time() < deadline and (expect is None or len(got) < expect):
                time.sleep(0.1)
            before = list(got)
            after = None
            if then is not None:
                produce(then, "PG_LATE")
                deadline = time.time() + 20
                while time.time() < deadline and len(got) < len(before) + len(then):
                    time.sleep(0.1)
                after = got[len(before):]
            time.sleep(0.5)  # let the consumer commit what it consumed
        finally:
            c.shutdown()
        return {"got": before, "after": after}

    if cmd["op"] == "produce":
        out["results"] = produce(cmd["messages"], cmd.get("group", "PG1"))
    else:
        out = consume(cmd["group"], cmd["topic"], cmd.get("expect"), cmd["wait"], cmd.get("then"))
    sys.stdout.write("\nRESULT " + json.dumps(out) + "\n")
    sys.stdout.flush()
    """
)


def run_client(tmp: Path, cmd: dict, timeout: float = 40.0) -> dict:
    script = tmp / "client.py"
    script.write_text(CLIENT)
    proc = subprocess.run(
        [sys.executable, str(script), json.dumps(cmd)],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "HOME": str(tmp)},  # the C++ client logs under ~/logs
    )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    raise AssertionError(f"client failed ({proc.returncode}): {proc.stdout[-2000:]} {proc.stderr[-2000:]}")


def _sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.cpp
def test_cpp_client_produce_consume_restart(tmp_path: Path, rmq_proc) -> None:
    store = tmp_path / "store"
    conf = write_conf(tmp_path / "broker.conf")
    big = "B" * 6000  # over 4 KiB: the client compresses it (sysFlag bit 0)
    sync = [
        {"topic": "TopicE2E", "keys": f"key{i}", "tags": "TagA" if i % 2 == 0 else "TagB",
         "props": {"p1": f"v{i}", "p2": "x y"}, "body": (big if i == 0 else f"body-{i}")}
        for i in range(5)
    ]  # fmt: skip
    oneway = [{"topic": "TopicE2E", "keys": f"ow{i}", "tags": "TagO", "body": f"oneway-{i}",
               "mode": "oneway"} for i in range(3)]  # fmt: skip
    orderly = [{"topic": "TopicE2E", "keys": f"ord{i}", "tags": "TagR", "body": f"order-{i}",
                "mode": "orderly", "arg": 2} for i in range(4)]  # fmt: skip
    batch = [{"topic": "TopicE2E", "keys": f"bat{i}", "tags": "TagT", "body": f"batch-{i}"} for i in range(3)]
    everything = sync + oneway + orderly + batch
    to_send = sync + oneway + orderly + [{"mode": "batch", "elements": batch}]

    server = ServeProcess(store, conf)
    try:
        server.start()
        produced = run_client(tmp_path, {"op": "produce", "namesrv": server.namesrv, "messages": to_send})
        results = produced["results"]
        assert all(r[0] == 0 for r in results if r is not None), results
        assert len({r[1] for r in results if r is not None and r[1] != "batch"}) == 9  # UNIQ_KEYs differ

        consumed = run_client(
            tmp_path,
            {"op": "consume", "namesrv": server.namesrv, "group": "CG_E2E", "topic": "TopicE2E",
             "expect": len(everything), "wait": 25},
        )  # fmt: skip
        got = {m["keys"]: m for m in consumed["got"]}
        assert set(got) == {m["keys"] for m in everything}, sorted(got)
        for spec in everything:
            m = got[spec["keys"]]
            assert m["sha"] == _sha(spec["body"]) and m["len"] == len(spec["body"])
            assert m["tags"] == spec["tags"]
            assert m["props"]["p1"] == spec.get("props", {}).get("p1", "")
            assert m["props"]["p2"] == spec.get("props", {}).get("p2", "")
        # orderly: the selector put them all in queue arg % 4, in send order
        queues = {got[s["keys"]]["queue"] for s in orderly}
        assert queues == {2 % 4}
        offsets = [got[s["keys"]]["offset"] for s in orderly]
        assert offsets == sorted(offsets)
        assert server.stop() == 0
        assert not (store / "abort").exists()
        offsets_json = (store / "config" / "consumerOffset.json").read_text()
        assert "TopicE2E@CG_E2E" in offsets_json
        assert (store / "config" / "consumerOffset.json.bak").exists()

        # restart: the same group gets nothing old, then exactly the new message
        server = ServeProcess(store, conf)
        server.start()
        late = [{"topic": "TopicE2E", "keys": "late1", "tags": "TagL", "body": "late-body"}]
        again = run_client(
            tmp_path,
            {"op": "consume", "namesrv": server.namesrv, "group": "CG_E2E", "topic": "TopicE2E",
             "expect": None, "wait": 5, "then": late},
        )  # fmt: skip
        assert again["got"] == []
        assert [m["keys"] for m in again["after"]] == ["late1"]
        assert server.stop() == 0
    finally:
        server.kill()

    verify = rmq_proc("verify", str(store), "--config", str(conf))
    assert verify.returncode == 0, verify.stdout + verify.stderr
    dump = rmq_proc("dump-commitlog", str(store), "--config", str(conf), "--json")
    assert dump.returncode == 0, dump.stderr
    rows = json.loads(dump.stdout)
    records = rows if isinstance(rows, list) else rows.get("records", rows)
    keys = {
        r.get("keys") if isinstance(r.get("keys"), str) else " ".join(r.get("keys") or []) for r in records
    }
    for spec in everything + late:
        assert spec["keys"] in keys
