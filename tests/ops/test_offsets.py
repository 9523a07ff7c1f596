"""``rmq offsets STORE reset|set|merge``: committed offsets changed offline, under the usual rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmqcli.store.settings import StoreSettings
from rmqcli.store.write.messages import Message
from rmqcli.store.write.writer import StoreWriter
from tests.support.cli import invoke_rmq
from tests.support.stores import broker_lock, store_state

T0 = 1_800_000_000_000


def build(root: Path, offsets: dict[str, int]) -> None:
    """TopicO: 2 queues of 10 messages, stored one second apart (queue offset i at T0 + i s)."""
    now = [T0]
    writer = StoreWriter(root, StoreSettings(), clock=lambda: now[0])
    try:
        writer.config.set_topic("TopicO", 2, T0)
        for i in range(10):
            now[0] = T0 + i * 1000
            for q in (0, 1):
                writer.append(Message("TopicO", q, f"m{i}".encode()))
        for group, offset in offsets.items():
            for q in (0, 1):
                writer.config.set_consumer_offset("TopicO", group, q, offset)
    finally:
        writer.close()


def offsets(root: Path) -> dict[str, dict[str, int]]:
    rows = json.loads(invoke_rmq("lag", str(root), "--json").stdout)
    table: dict[str, dict[str, int]] = {}
    for row in rows:
        table.setdefault(row["group"], {})[str(row["queueId"])] = row["consumerOffset"]
    return table


def run(*args: str, code: int = 0) -> dict:
    result = invoke_rmq("offsets", *args, "--json")
    assert result.exit_code == code, result.output
    return json.loads(result.stdout) if code == 0 else {"error": result.stderr}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    build(root, {"G": 2})
    return root


def test_reset_to_a_time_picks_the_message_stored_then_and_is_applied_only_with_yes(store: Path) -> None:
    before = store_state(store)
    plan = run(str(store), "reset", "-g", "G", "-t", "TopicO", "--time", str(T0 + 6400))
    assert [(c["queueId"], c["old"], c["new"]) for c in plan["details"]["changes"]] == [(0, 2, 6), (1, 2, 6)]
    assert not plan["applied"] and store_state(store) == before
    done = run(str(store), "reset", "-g", "G", "-t", "TopicO", "--time", str(T0 + 6600), "--yes")
    assert done["applied"] and offsets(store)["G"] == {"0": 7, "1": 7}  # 6.6 s is closer to message 7
    assert invoke_rmq("restore-backup", str(store), Path(done["backup"]).name, "--yes").exit_code == 0
    assert store_state(store) == before


def test_reset_to_min_and_max_and_a_new_group(store: Path) -> None:
    run(str(store), "reset", "-g", "G", "-t", "TopicO", "--to-max", "--yes")
    assert offsets(store)["G"] == {"0": 10, "1": 10}
    run(str(store), "reset", "-g", "NEW", "-t", "TopicO", "--to-min", "--yes")
    assert offsets(store)["NEW"] == {"0": 0, "1": 0}


def test_set_one_queue_within_its_bounds(store: Path) -> None:
    run(str(store), "set", "-g", "G", "-t", "TopicO", "-q", "1", "9", "--yes")
    assert offsets(store)["G"] == {"0": 2, "1": 9}
    refused = run(str(store), "set", "-g", "G", "-t", "TopicO", "-q", "1", "11", code=2)
    assert refused["error"].strip() == "rmq: error: offset 11 is outside queue 1 of 'TopicO': 0 to 10"
    refused = run(str(store), "set", "-g", "G", "-t", "TopicO", "-q", "5", "1", code=2)
    assert "queue 5 is not a read queue of topic 'TopicO'" in refused["error"]


def test_merge_takes_the_larger_offset_per_queue(tmp_path: Path, store: Path) -> None:
    slave = tmp_path / "slave"
    build(slave, {"G": 5, "ONLY_SLAVE": 1})
    run(str(slave), "set", "-g", "G", "-t", "TopicO", "-q", "1", "1", "--yes")  # behind the master there
    merged = run(str(store), "merge", str(slave), "--yes")
    assert sorted((c["group"], c["queueId"], c["old"], c["new"]) for c in merged["details"]["changes"]) == [
        ("G", 0, 2, 5),
        ("ONLY_SLAVE", 0, None, 1),
        ("ONLY_SLAVE", 1, None, 1),
    ]
    assert offsets(store) == {"G": {"0": 5, "1": 2}, "ONLY_SLAVE": {"0": 1, "1": 1}}
    assert run(str(store), "merge", str(slave))["steps"] == []  # converged


def test_a_store_a_broker_holds_is_refused_and_bad_flags_are_usage_errors(store: Path) -> None:
    before = store_state(store)
    with broker_lock(store):
        result = invoke_rmq("offsets", str(store), "reset", "-g", "G", "-t", "TopicO", "--to-max", "--yes")
    assert result.exit_code != 0 and "lock" in result.output and store_state(store) == before
    both = invoke_rmq("offsets", str(store), "reset", "-g", "G", "-t", "TopicO", "--to-max", "--to-min")
    assert (
        both.exit_code == 2
        and both.stderr.strip() == "rmq: error: give exactly one of --time, --to-min and --to-max"
    )
    missing = invoke_rmq("offsets", str(store), "reset", "-g", "G", "-t", "Nope", "--to-max")
    assert missing.exit_code == 2 and "topic 'Nope' is not in config/topics.json" in missing.stderr
