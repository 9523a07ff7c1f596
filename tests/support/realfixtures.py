"""Stores written by a real Apache RocketMQ broker, from ``../shared/fixtures/real`` when present."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pytest

from tests.support import REAL_ROOT


@dataclass(frozen=True)
class Variant:
    scenario: Path
    name: str
    info: dict

    @property
    def id(self) -> str:
        return f"{self.scenario.name}/{self.name}"

    @property
    def store(self) -> Path:
        return self.scenario / self.info["store_dir"]

    @property
    def facts(self) -> dict:
        return self.info["facts"]

    @cached_property
    def records(self) -> list[dict]:
        with open(self.scenario / self.info["records_jsonl"], encoding="utf-8") as handle:
            return [json.loads(line) for line in handle]

    @cached_property
    def cq_units(self) -> list[dict]:
        with open(self.scenario / self.info["cq_jsonl"], encoding="utf-8") as handle:
            return [json.loads(line) for line in handle]


def variants() -> list[Variant]:
    if not REAL_ROOT.is_dir():
        return []
    found = []
    for expected in sorted(REAL_ROOT.glob("*/expected.json")):
        data = json.loads(expected.read_text(encoding="utf-8"))
        for name, info in data["variants"].items():
            found.append(Variant(expected.parent, name, info))
    return found


def real_params(values: list, ids: Callable[[object], str] = str) -> list:
    """``pytest.mark.parametrize`` values drawn from the real stores, each marked ``real``; when there
    are none, one ``absent`` entry marked ``real``, which skips (or fails where the component is
    required) instead of leaving an empty, silently skipped parameter set."""
    if not values:
        return [pytest.param(None, id="absent", marks=pytest.mark.real)]
    return [pytest.param(v, id=ids(v), marks=pytest.mark.real) for v in values]


def variant_params() -> list:
    """``pytest.mark.parametrize`` values: every variant of every real store."""
    return real_params(variants(), lambda v: v.id)
