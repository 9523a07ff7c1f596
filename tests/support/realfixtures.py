"""Stores written by a real Apache RocketMQ broker, from ``../shared/fixtures/real`` when present."""

from __future__ import annotations

import json
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


def variant_params():
    """``pytest.mark.parametrize`` values; one skipped entry when the fixtures are absent."""
    found = variants()
    if not found:
        return [pytest.param(None, marks=pytest.mark.skip(reason="../shared/fixtures/real is absent"))]
    return [pytest.param(v, id=v.id) for v in found]
