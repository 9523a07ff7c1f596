"""Bad config and index files give one-line errors with exit 4, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqcli.ops.recover import apply_recover, stage_recover
from rmqcli.store import Store


@pytest.fixture
def store_dir(tmp_path) -> Path:
    from fixtures.generate import generate

    root = tmp_path / "store"
    generate(root, "small", seed=12)
    return root


def test_offsets_file_with_non_numeric_queue_ids(store_dir, rmq_proc):
    path = store_dir / "config" / "consumerOffset.json"
    path.write_text('{"offsetTable":{"TopicA@G":{"x":5}}}')
    (store_dir / "config" / "consumerOffset.json.bak").unlink(missing_ok=True)
    dump = rmq_proc("dump-config", str(store_dir), "offsets")
    assert dump.returncode == 4 and "Traceback" not in dump.stderr
    assert str(path) in dump.stderr and len(dump.stderr.strip().splitlines()) == 1
    verify = rmq_proc("verify", str(store_dir), "--json")
    assert verify.returncode == 4 and "config-unreadable" in verify.stdout


def test_index_file_of_the_wrong_size(store_dir, rmq_proc):
    index = sorted((store_dir / "index").iterdir())[-1]
    index.write_bytes(index.read_bytes()[:-100])
    proc = rmq_proc("dump-index", str(store_dir))
    assert proc.returncode == 4 and "Traceback" not in proc.stderr
    assert str(index) in proc.stderr
    conf = store_dir.parent / "broker.conf"
    conf.write_text("maxHashSlotNum=64\nmaxIndexNum=200\n")  # a geometry that does not fit the files
    proc = rmq_proc("dump-index", str(store_dir), "--config", str(conf))
    assert proc.returncode == 4 and "Traceback" not in proc.stderr


def test_consume_queue_files_after_the_valid_end_are_deleted(store_dir):
    """ConsumeQueue.recover + truncateDirtyFiles: a file after a partly filled one is removed."""
    queue = max((store_dir / "consumequeue").glob("*/*"), key=lambda q: len(list(q.iterdir())))
    files = sorted(queue.iterdir())
    size = files[-1].stat().st_size
    stray = queue / f"{int(files[-1].name) + size:020d}"
    stray.write_bytes(files[0].read_bytes())  # stale units after the queue's end
    result = stage_recover(Store.open(store_dir), mode="normal")
    assert any(s.path == "consumequeue" for s in result.plan.steps)
    apply_recover(store_dir, result)
    assert not stray.exists()
    assert sorted(queue.iterdir()) == files


@pytest.mark.parametrize("levels", ["1x 2s", "s 5s", "1.5s", ""])
def test_bad_delay_levels_in_broker_conf_are_a_usage_error(store_dir, levels, rmq_proc):
    """``ScheduleMessageService.parseDelayLevel`` fails on them and the broker does not start."""
    conf = store_dir.parent / "broker.conf"
    conf.write_text(f"messageDelayLevel={levels}\n")
    for command in ("verify", "rebuild", "dump-commitlog"):
        proc = rmq_proc(command, str(store_dir), "--config", str(conf))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, (command, proc.stderr)
        assert "messageDelayLevel" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
