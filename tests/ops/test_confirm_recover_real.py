"""``rmq recover --yes`` on damaged controller-mode stores against the real RocketMQ 5.1.1 broker
started on the same damage (``../shared/rocketmq-5.1.1``).

How the two are made comparable: the real broker is started in controller mode
(``enableControllerMode=true``) with a ``controllerAddr`` and a NameServer nobody listens on. It
loads and recovers its store as any 5.1.1 broker does (``DefaultMessageStore.load``/``recover``,
``CommitLog.recoverNormally``/``recoverAbnormally`` bounded by ``getConfirmOffset``), then waits as
a SLAVE for a controller that never answers: no election, no ``changeToMaster`` (which would
re-dispatch everything and move the confirm offset to the end), no HA client to truncate it. What
it leaves after SIGTERM is what its recovery made of the damage.

The stores come from the controller-mode pair of ``tests.ops.test_confirm_real`` (its fixture and
damage helpers are reused). For each damage: the consume-queue units (so each queue's max offset),
the CommitLog's end, confirmPhyOffset, the epoch file, and the messages a consumer is served per
queue (``rmq stats``: the units up to the confirm bound) are the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from formats import epoch as efmt
from tests.ops.test_confirm_real import (
    TOPIC,
    Made,
    _copy,
    _damaged,
    _json,
    _per_queue,
    _real_start,
    _units,
    made,  # noqa: F401  (the module fixture: the stores of the controller-mode pair)
)
from tests.support.cli import run_rmq

pytestmark = [pytest.mark.java, pytest.mark.java5, pytest.mark.real]

KINDS = ["abnormal", "confirm-back", "confirm-past", "grafted", "epoch-crc"]


def _make(made: Made, kind: str, into: Path) -> Path:  # noqa: F811
    """``_damaged``'s kinds, and ``epoch-crc``: the final master with the crc line of its
    epochFileCheckpoint and of its ``.bak`` flipped (5.1.1's ``CheckpointFile.read`` then fails on
    both and the broker goes on with no epochs)."""
    if kind != "epoch-crc":
        return _damaged(made, kind, into)
    store = _copy(made.master, into)
    for name in (efmt.EPOCH_FILE, efmt.EPOCH_FILE + efmt.BAK_SUFFIX):
        path = store / name
        if path.exists():
            lines = path.read_text().split("\n")
            lines[1] = str(int(lines[1]) ^ 1)
            path.write_text("\n".join(lines))
    return store


def _facts(store: Path) -> dict:
    """What the tests compare: per-queue unit counts (max offsets), the CommitLog's end,
    confirmPhyOffset, the epoch file's bytes, the messages served per queue."""
    stats = _json("stats", str(store))
    confirm = stats.get("confirm") or {}
    epoch = store / efmt.EPOCH_FILE
    return {
        "cq": {q: len(u) for q, u in _units(store).items()},
        "end": stats["commitlog"]["maxOffset"] + confirm.get("unconfirmedBytes", 0),
        "confirm": _json("dump-checkpoint", str(store))["confirmPhyOffset"],
        "epoch": epoch.read_bytes() if epoch.exists() else None,
        "served": _per_queue(stats),
    }


@pytest.mark.parametrize("kind", KINDS)
def test_recover_leaves_the_facts_the_real_broker_leaves(made: Made, tmp_path: Path, kind: str):  # noqa: F811
    ours, theirs = _make(made, kind, tmp_path / "rmq"), _make(made, kind, tmp_path / "broker")
    proc = run_rmq("recover", str(ours), "--yes", timeout=300)
    assert proc.returncode == 0, proc.stderr
    log = _real_start(theirs, tmp_path / "run")
    assert "recover physics file end" in log, log[-3000:]
    if kind == "epoch-crc":
        assert "Error happen when init epoch entries from epochFile" in log
    got, want = _facts(ours), _facts(theirs)
    print(kind, {k: v for k, v in want.items() if k != "epoch"})
    assert got == want
    if kind == "abnormal":  # the confirmed records only are served
        assert sum(n for q, n in got["served"].items()) == sum(made.elected.values())
        assert {q: n for q, n in got["cq"].items() if q.startswith(f"{TOPIC}/")} == {
            f"{TOPIC}/{q}": n for q, n in made.elected.items() if n
        }
