"""Plans: what a store-changing command would do (``--dry-run``) or did, and how steps name paths."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class PlanStep:
    """One thing a command would do to a store."""

    # "delete" | "discard" (no backup) | "truncate" | "replace" | "create" | "replace-dir"
    # | "delete-dir" | "restore"
    action: str
    path: str  # relative to the store root, or absolute in a CommitLog directory outside it (Plan.roots)
    detail: str  # one line for humans
    bytes_removed: int = 0  # bytes of the store the step removes or replaces (all backed up first)


@dataclass
class Plan:
    """What a store-changing command would do (``--dry-run``) or did (``--yes``)."""

    command: str
    store: Path
    steps: list[PlanStep] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    roots: list[Path] = field(default_factory=list)  # directories outside the store the steps may name
    backup: Path | None = None  # set once applied, where the change kept its backup
    skipped: list[dict[str, Any]] = field(default_factory=list)  # records left out (``ops.unsafe_topics``)
    details: dict[str, Any] = field(default_factory=dict)  # the command's own findings, in JSON as is

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "store": str(self.store),
            "steps": [
                {"action": s.action, "path": s.path, "detail": s.detail, "bytesRemoved": s.bytes_removed}
                for s in self.steps
            ],
            "notes": list(self.notes),
            "skipped": list(self.skipped),
            "bytesRemoved": sum(s.bytes_removed for s in self.steps),
            **({"details": self.details} if self.details else {}),
        }

    @property
    def empty(self) -> bool:
        return not self.steps


def plan_path(store_root: Path, path: Path) -> str:
    """How a plan step names ``path``: relative to the store when inside it, else absolute."""
    absolute = Path(os.path.abspath(path))
    try:
        return absolute.relative_to(os.path.abspath(store_root)).as_posix()
    except ValueError:
        return absolute.as_posix()


def outside_roots(store_root: Path, dirs: Iterable[Path]) -> list[Path]:
    """The directories of ``dirs`` (e.g. ``Store.commitlog_dirs``) that are not inside the store."""
    base = Path(os.path.abspath(store_root))
    out = []
    for d in dirs:
        absolute = Path(os.path.abspath(d))
        if absolute != base and base not in absolute.parents and absolute not in out:
            out.append(absolute)
    return out
