"""``rmqcli.durable``: the one primitive that replaces a whole file (exports, the ACL file, the
broker's ``config/*.json`` with their ``.bak``), and what a light caller imports with it."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from rmqcli.durable import fsync_dir, replace_file


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def umasked(requested: int) -> int:
    """The mode ``open`` gives a new file asking for ``requested`` (the umask read from /proc)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Umask:"):
            return requested & ~int(line.split()[1], 8)
    pytest.skip("no Umask in /proc/self/status")


def test_a_plain_replacement_is_private_and_leaves_nothing_beside(tmp_path: Path) -> None:
    path = tmp_path / "export.json"
    replace_file(path, b"one")
    assert path.read_bytes() == b"one" and mode(path) == 0o600
    path.chmod(0o644)
    replace_file(path, b"two")
    assert path.read_bytes() == b"two" and mode(path) == 0o600  # mkstemp's, not the old file's
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export.json"]


def test_keep_mode_keeps_the_replaced_files_mode(tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    replace_file(path, b"a: 1\n", keep_mode=True)
    assert mode(path) == 0o600  # nothing to keep
    path.chmod(0o640)
    replace_file(path, b"a: 2\n", keep_mode=True)
    assert path.read_bytes() == b"a: 2\n" and mode(path) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain_acl.yml"]


def test_backup_keeps_the_previous_content_as_the_broker_does(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    replace_file(path, b"{1}", backup=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["topics.json"]  # nothing to keep yet
    assert mode(path) == umasked(0o666)  # as open() (and the JVM) make a file
    replace_file(path, b"{2}", backup=True)
    replace_file(path, b"{3}", backup=True)
    assert path.read_bytes() == b"{3}"
    assert (tmp_path / "topics.json.bak").read_bytes() == b"{2}"
    assert mode(tmp_path / "topics.json.bak") == umasked(0o666)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["topics.json", "topics.json.bak"]


@pytest.mark.parametrize("backup", [False, True])
def test_a_failed_rename_leaves_the_old_file_and_nothing_beside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backup: bool
) -> None:
    path = tmp_path / "f.json"
    replace_file(path, b"old", backup=backup)

    def refuse(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError):
        replace_file(path, b"new", backup=backup)
    monkeypatch.undo()
    assert path.read_bytes() == b"old"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_fsync_dir_of_a_missing_directory(tmp_path: Path) -> None:
    fsync_dir(tmp_path / "gone")  # skipped
    with pytest.raises(FileNotFoundError):
        fsync_dir(tmp_path / "gone", missing_ok=False)


def test_light_callers_do_not_import_the_store() -> None:
    """The admin's export and the broker's ACL file take the primitive without the store's modules."""
    code = (
        "import json, sys\n"
        "import rmqcli.durable, rmqcli.admin.export\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('rmqcli.store'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []
