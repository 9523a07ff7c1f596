"""``rmq verify`` tells the truth (issue 14): not-a-store directories, file geometry, unfinished
changes, index coverage, deleted topics, custom delay levels and where recovery re-checks CRCs.

Every case damages a writable copy of a store written by a real 4.9.8 broker (or one written by
the fixtures generator) the way the issue describes, and runs the real command on it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from rmqcli.cli.main import invoke
from rmqcli.ops.verify import VerifyReport, verify_store
from rmqcli.store import Store
from tests.realfixtures import REAL_ROOT

BASIC = REAL_ROOT / "basic-1" / "store"
IPV6 = REAL_ROOT / "ipv6" / "store"
BASIC_CONF = REAL_ROOT / "basic-1" / "broker.conf"


def _copy(src: Path, dst: Path) -> Path:
    if not src.is_dir():
        pytest.skip("../shared/fixtures/real is absent")
    shutil.copytree(src, dst, copy_function=shutil.copyfile)
    for here, _dirs, files in os.walk(dst):
        os.chmod(here, 0o755)
        for name in files:
            os.chmod(os.path.join(here, name), 0o644)
    return dst


def _verify(path: Path, config: Path | None = None) -> VerifyReport:
    store = Store.open(path, config)
    try:
        return verify_store(store)
    finally:
        store.close()


def _kinds(report: VerifyReport) -> dict[tuple[str, str], int]:
    return {(k.kind, k.severity): k.count for k in report.kinds}


def _problems(report: VerifyReport, kind: str) -> list:
    return [p for p in report.problems if p.kind == kind]


# --- (a) a directory without a CommitLog is not a store --------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        ["verify"],
        ["stats"],
        ["recover"],
        ["rebuild"],
        ["backups"],
        ["dump-config"],
        ["dump-commitlog"],
    ],
)
def test_an_empty_directory_is_not_a_store(argv, tmp_path, capsys) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert invoke([*argv, str(empty)]) == 3
    err = capsys.readouterr().err
    assert f"{empty}: not a RocketMQ store (no commitlog/)" in err
    assert "Traceback" not in err
    assert list(empty.iterdir()) == []  # nothing was created in it


def test_a_store_and_its_config_directory_still_dump(tmp_path, capsys) -> None:
    store = _copy(BASIC, tmp_path / "store")
    assert invoke(["dump-config", str(store), "topics", "--json"]) == 0
    assert any(t["topicName"] == "TopicA" for t in json.loads(capsys.readouterr().out))
    assert invoke(["dump-config", str(store / "config"), "topics", "--json"]) == 0
    assert any(t["topicName"] == "TopicA" for t in json.loads(capsys.readouterr().out))
    assert invoke(["backups", str(store), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
