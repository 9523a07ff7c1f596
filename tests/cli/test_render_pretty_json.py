"""``--json``'s fast indenting writer gives exactly ``json.dumps(indent=2)``'s text."""

from __future__ import annotations

import json
from enum import IntEnum

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqcli.cli.render import _json

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=6), inner, max_size=4)
        | st.dictionaries(st.integers(), inner, max_size=2)
    ),
    max_leaves=20,
)


def reference(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


@settings(max_examples=400, deadline=None)
@given(values)
def test_the_same_text_as_the_standard_encoder(value: object) -> None:
    assert _json(value) == reference(value)


class Level(IntEnum):
    LOW = 1


def test_values_it_leaves_to_the_standard_encoder_come_out_the_same() -> None:
    for value in (
        {"when": ValueError("x"), "path": __import__("pathlib").Path("/tmp")},
        {"level": Level.LOW, "nan": float("nan"), "inf": [float("inf")]},
        {1: "int key", None: "null key"},
        {"nested": {"k": ["é", "\u2028", "\x00"]}},
    ):
        assert _json(value) == reference(value)
