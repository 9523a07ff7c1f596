"""``write_config`` is durable: new file and ``.bak`` fsynced, the directory fsynced after the rename."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rmqcli.store.configfiles import TOPICS, load_config, write_config


def test_write_config_fsyncs_the_bak_and_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config"
    write_config(config, TOPICS, {"topicConfigTable": {"A": {"topicName": "A"}}})
    events: list[tuple[str, tuple[int, int]]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        st = os.fstat(fd)
        events.append(("fsync", (st.st_dev, st.st_ino)))
        real_fsync(fd)

    def replace(src: str | os.PathLike, dst: str | os.PathLike) -> None:
        real_replace(src, dst)
        events.append(("replace", (0, 0)))

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    path = write_config(config, TOPICS, {"topicConfigTable": {}})
    monkeypatch.undo()

    def ident(p: Path) -> tuple[int, int]:
        st = p.stat()
        return st.st_dev, st.st_ino

    synced = [key for what, key in events if what == "fsync"]
    renamed = events.index(("replace", (0, 0)))
    assert ident(path) in [key for what, key in events[:renamed] if what == "fsync"]  # new file, before
    assert ident(path.with_name(TOPICS + ".bak")) in synced  # the previous content
    assert ("fsync", ident(config)) in events[renamed:]  # the rename itself
    assert load_config(config, TOPICS).data == {"topicConfigTable": {}}
    assert '"A"' in path.with_name(TOPICS + ".bak").read_text()
