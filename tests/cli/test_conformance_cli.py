"""`rmq` dumps agree with what Apache RocketMQ's own classes decoded from the same real stores."""

from __future__ import annotations

import json
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rmqcli.cli.main import app
from tests.support import REAL_ROOT
from tests.support.cli import RMQ


def _variants() -> list[tuple[Path, str, dict]]:
    found = []
    for expected in sorted(REAL_ROOT.glob("*/expected.json")):
        data = json.loads(expected.read_text(encoding="utf-8"))
        for name, variant in data["variants"].items():
            found.append((expected.parent, name, variant))
    return found


VARIANTS = _variants()
pytestmark = pytest.mark.real
IDS = [f"{d.name}/{v}" for d, v, _ in VARIANTS]


@pytest.fixture(params=VARIANTS, ids=IDS, scope="module")
def variant(request: pytest.FixtureRequest) -> tuple[Path, dict]:
    directory, _, info = request.param
    return directory, info


def _store(variant: tuple[Path, dict]) -> Path:
    directory, info = variant
    return directory / info["store_dir"]


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _cli_json(args: list[str], code: int = 0) -> object:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def _dump_records(store: Path, raw: bool) -> list[dict]:
    args = [*RMQ, "dump-commitlog", str(store), "--output", "jsonl", "--body", "sha256", "--properties"]
    proc = subprocess.run(args + (["--raw"] if raw else []), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_dump_commitlog_matches_records(variant: tuple[Path, dict]) -> None:
    directory, info = variant
    expected = _jsonl(directory / info["records_jsonl"])
    got = _dump_records(_store(variant), raw=True)
    assert len(got) == len(expected)
    for exp, row in zip(expected, got, strict=True):
        common = set(exp) & set(row)
        assert len(common) >= 30
        diffs = {k: (exp[k], row[k]) for k in common if exp[k] != row[k]}
        assert not diffs, f"record at {exp['position']}: {diffs}"
        assert row["bodySha256"] == exp["body_sha256"]


def test_dump_commitlog_decompresses(variant: tuple[Path, dict]) -> None:
    directory, info = variant
    expected = _jsonl(directory / info["records_jsonl"])
    got = _dump_records(_store(variant), raw=False)
    for exp, row in zip(expected, got, strict=True):
        assert row["bodySha256"] == exp.get("body_sha256_decompressed", exp["body_sha256"])
        if "decompressedLength" in exp:
            assert row["decompressedLength"] == exp["decompressedLength"]


def test_dump_cq_matches_units(variant: tuple[Path, dict]) -> None:
    directory, info = variant
    by_queue: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for unit in _jsonl(directory / info["cq_jsonl"]):
        by_queue[(unit["topic"], unit["queueId"])].append(unit)
    assert by_queue
    store = str(_store(variant))
    for (topic, qid), units in by_queue.items():
        rows = _cli_json(["dump-cq", store, "--topic", topic, "--queue", str(qid), "--json"])
        assert isinstance(rows, list)
        got = [(r["queueOffset"], r["commitLogOffset"], r["size"], r["tagsCode"], r["filler"]) for r in rows]
        want = [(u["cqOffset"], u["phyOffset"], u["size"], u["tagsCode"], u["fillPreBlank"]) for u in units]
        assert got == want, f"{topic}:{qid}"


def test_dump_index_queries(variant: tuple[Path, dict]) -> None:
    facts = variant[1]["facts"]["index"]
    store = str(_store(variant))
    for q in facts["queries"]:
        # a key no record carries is "not found" (exit 3), with the lookup still printed
        args = ["dump-index", store, "--topic", q["topic"], "--key", q["key"], "--json"]
        doc = _cli_json(args, code=3 if q["count"] == 0 else 0)
        assert isinstance(doc, dict)
        query = doc["query"]
        assert query["phyOffsets"] == q["phyOffsets"], q["indexKey"]
        assert query["count"] == q["count"]
        assert query["keyHash"] == q["keyHash"]
        assert len(doc["hits"]) == q["count"]
        assert 0 <= query["matched"] <= query["count"]


def test_dump_index_headers(variant: tuple[Path, dict]) -> None:
    facts = variant[1]["facts"]["index"]
    doc = _cli_json(["dump-index", str(_store(variant)), "--headers-only", "--json"])
    assert isinstance(doc, dict)
    fields = [
        "beginTimestamp",
        "endTimestamp",
        "beginPhyOffset",
        "endPhyOffset",
        "hashSlotCount",
        "indexCount",
    ]
    got = [{"name": f["file"], **{k: f[k] for k in fields}} for f in doc["files"]]
    want = [{"name": f["name"], **{k: f[k] for k in fields}} for f in facts["files"]]
    assert got == want


def test_dump_checkpoint(variant: tuple[Path, dict]) -> None:
    facts = variant[1]["facts"]["checkpoint"]
    proc = subprocess.run(
        [*RMQ, "dump-checkpoint", str(_store(variant)), "--json"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    for name in ("physicMsgTimestamp", "logicsMsgTimestamp", "indexMsgTimestamp"):
        assert doc[name] == facts[name]
    assert doc["minTimestamp"] == facts["minTimestamp(getMinTimestamp)"]
    assert doc["minTimestampIndex"] == facts["minTimestampIndex(getMinTimestampIndex)"]


def test_stats(variant: tuple[Path, dict]) -> None:
    facts = variant[1]["facts"]
    view = facts["store_view"]
    proc = subprocess.run([*RMQ, "stats", str(_store(variant)), "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["commitlog"]["minOffset"] == view["minPhyOffset"]
    assert doc["commitlog"]["maxOffset"] == view["maxPhyOffset"]
    assert doc["commitlog"]["records"] == facts["commitlog"]["recordCount"]
    per_topic = {t["topic"]: t["messages"] for t in doc["topics"] if t["messages"]}
    assert per_topic == facts["commitlog"]["recordsPerTopic"]
    queues = {(q["topic"], q["queueId"]): q for q in doc["queues"]}
    for topic, by_qid in view["consumeQueues"].items():
        for qid, bounds in by_qid.items():
            q = queues[(topic, int(qid))]
            assert (q["cqMinOffset"], q["cqMaxOffset"]) == (bounds["minOffset"], bounds["maxOffset"]), (
                topic,
                qid,
            )
