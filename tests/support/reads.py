"""Counting the files a piece of code reads, for the tests that say a file is read once."""

from __future__ import annotations

from pathlib import Path

import pytest


def counted_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The paths ``Path.read_text`` is called on from now until ``monkeypatch.undo()``, in order."""
    reads: list[Path] = []
    read_text = Path.read_text

    def counted(self: Path, *args: object, **kwargs: object) -> str:
        reads.append(self)
        return read_text(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", counted)
    return reads
