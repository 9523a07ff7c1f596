"""``dump-cq`` and ``dump-index`` lookups on a real 4.9.8 store: "not found" (exit 3, one line) for a
queue, topic or key that is not there, an empty range that is no error, and ``dump-index --max``
reading past the broker's 64 entries and saying so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import invoke_rmq, one_line_error
from tests.support.realfixtures import REAL_ROOT

REAL_BASIC = REAL_ROOT / "basic-1" / "store"
needs_basic = pytest.mark.real


@needs_basic
@pytest.mark.parametrize(
    ("topic", "queue", "says"),
    [
        ("TopicA", "9", "consume queue TopicA:9 not found (topic TopicA has queues 0-3)"),
        (
            "NoSuch",
            "0",
            "topic NoSuch not found (no consume queue of it, and no entry in config/topics.json)",
        ),
        (
            "SELF_TEST_TOPIC",
            "0",
            "consume queue SELF_TEST_TOPIC:0 not found (topic SELF_TEST_TOPIC is in config/topics.json, "
            "readQueueNums 1, but has no consume queue on disk)",
        ),
    ],
    ids=["queue", "topic", "configured-only"],
)
def test_dump_cq_of_a_missing_queue_is_not_found(topic: str, queue: str, says: str, rmq) -> None:
    result = rmq("dump-cq", str(REAL_BASIC), "-t", topic, "-q", queue)
    assert result.exit_code == 3 and result.stdout == ""
    assert one_line_error(result.stderr) == f"rmq: error: {REAL_BASIC}: {says}\n"


@needs_basic
def test_dump_cq_range_that_selects_nothing_is_not_an_error(rmq) -> None:
    result = rmq("dump-cq", str(REAL_BASIC), "-t", "TopicA", "-q", "0", "--from", "999999", "--json")
    assert (result.exit_code, result.stdout.strip(), result.stderr) == (0, "[]", "")


@needs_basic
def test_dump_index_key_not_found_exits_3_after_its_output(rmq) -> None:
    result = rmq("dump-index", str(REAL_BASIC), "-t", "TopicB", "-k", "hot-key", "--json")
    assert result.exit_code == 3
    query = json.loads(result.stdout)["query"]
    assert (query["count"], query["matched"]) == (0, 0)
    assert (
        one_line_error(result.stderr)
        == f"rmq: error: {REAL_BASIC}: key hot-key of topic TopicB not found in the index\n"
    )


# --- dump-index --max past the broker's 64 -------------------------------------------------------
def records_with_key(store: Path, topic: str, key: str) -> list[int]:
    """Physical offsets of the records carrying ``key``, from a full CommitLog scan, newest first."""
    out = invoke_rmq("dump-commitlog", str(store), "--output", "jsonl", check=True).stdout
    rows = [json.loads(line) for line in out.splitlines()]
    found = [r["physicalOffset"] for r in rows if r["topic"] == topic and key in (r.get("keys") or [])]
    return sorted(found, reverse=True)


@needs_basic
def test_dump_index_max_reads_past_the_brokers_64_and_says_so(rmq) -> None:
    every = records_with_key(REAL_BASIC, "TopicA", "hot-key")
    assert len(every) == 114  # more than the broker's maxMsgsNumBatch

    def hot_key(cap: str) -> tuple[dict, str]:
        result = rmq("dump-index", str(REAL_BASIC), "-t", "TopicA", "-k", "hot-key", "--max", cap, "--json")
        assert result.exit_code == 0
        return json.loads(result.stdout)["query"], result.stderr

    query, err = hot_key("500")
    assert (query["count"], query["matched"], query["more"], query["brokerCount"]) == (114, 114, False, 64)
    assert sorted(query["phyOffsets"], reverse=True) == every
    assert err == (
        "rmq: warning: a broker's queryMessage returns only the newest 64 of these entries "
        "(maxMsgsNumBatch); the rest are read here from the hash chains\n"
    )
    # the default (the broker's 64) and a smaller --max say that more entries exist
    for cap in ("64", "10"):
        query, err = hot_key(cap)
        assert query["count"] == int(cap) and query["more"] is True
        assert query["phyOffsets"] == every[: int(cap)]  # the newest first, as the broker walks
        assert err == (
            f"rmq: warning: --max {cap} reached: more index entries carry the hash of TopicA#hot-key "
            "(raise --max)\n"
        )
    # exactly all of them: nothing more to say
    query, err = hot_key("114")
    assert query["more"] is False and "--max" not in err
