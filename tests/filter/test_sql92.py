"""The SQL92 selector (``rmqcli.filter.sql92``) against 4.9.8's own parser and evaluator: the same
expressions and properties given to ``SelectorParser.parse`` and ``evaluate`` in the kit's JVM
(``tests/support/java/SelectorOracle.java``) must give the same outcome, for a hand-written corpus
of the language's corners and for thousands of generated expressions."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from rmqcli.filter.javavalues import EvaluationError
from rmqcli.filter.sql92 import MAX_DEPTH, SelectorError, compile_selector
from tests.support.java import compile_programs, run_program

PROPS = [
    {},
    {"a": "5", "b": "x", "c": "true", "d": "2.5"},
    {"a": "-3", "b": "it's", "c": "TRUE", "d": "NaN", "e": ""},
    {"a": "2147483648", "b": "y", "c": "false", "d": " 7 ", "TAGS": "TagA"},
    {"a": "abc", "b": "5", "d": "1e3", "KEYS": "k1 k2"},
    {"a": "0", "b": "", "c": "yes", "d": "-0.0", "e": "0x10"},
    {"a": "007", "b": "x", "d": "Infinity", "e": "1.5f"},
    {"a": "\u0663", "b": "\uff15", "d": "\u0663.5", "e": "1_0"},  # Arabic-Indic 3, fullwidth 5
]

CORPUS = [
    "a > 3", "a >= 5", "a < 5.5", "a <= -3", "a = 5", "a <> 5", "a = '5'", "b = 'x'", "b <> 'x'",
    "a BETWEEN 1 AND 10", "a NOT BETWEEN 1 AND 10", "a BETWEEN 10 AND 1", "a BETWEEN 1.5 AND 2",
    "a between 'x' and 'y'", "a BETWEEN NULL AND 3", "b IN ('x', 'y')", "b NOT IN ('x')",
    "b in ('it''s')", "a IN ('5')", "5 IN ('5')", "a IS NULL", "a IS NOT NULL", "z IS NULL",
    "z IS NOT NULL", "a = NULL", "NULL = a", "c = TRUE", "c = FALSE", "TRUE = c", "TRUE = 1",
    "1 = TRUE", "TRUE", "FALSE", "NULL", "a", "NOT a", "c", "NOT c", "5", "'x'", "a AND b",
    "a > 1 AND b = 'x'", "a > 1 OR b = 'x'", "NOT (a > 1)", "NOT a > 1", "NOT a = 5",
    "(a > 1) = TRUE", "a > 1 = TRUE", "a > 1 > 0", "a > 'x'", "a > TRUE", "'x' < a",
    "a = 5 xyz", "a = 5 ) (", "a = 5 !", "a = 5 #", "a == 5", "a != 5", "a = 05", "a = 5L",
    "a = 5l", "a = 2147483648", "a = 2147483647", "a > 9223372036854775807",
    "a > 9223372036854775808", "a > 0.0", "a > 0.5", "a > .5", "a > 5.", "a > 5e0", "a > 5E-1",
    "a > 1e400", "a > -2147483648", "-a > 1", "- -a = 5", "+a = 5", "+5 = a", "-5 = -a",
    "a > -(-3)", "d > 2", "d < 3.0", "d = 2.5", "d > a", "a < d", "a = d", "b > a",
    "a = 5 -- comment\n AND b = 'x'", "a = 5 -- trailing", "a /* c */ = 5", "a = /* open 5",
    "a = 5 AND", "a = 5 AND b", "(a = 5", "a = 5)", "", "   ", "()", "a IN ()", "a IN ('x',)",
    "a IS 5", "a IS NOT 5", "a NOT 5", "a NOT LIKE 'x'", "TAGS = 'TagA'", "KEYS = 'k1 k2'",
    "$x IS NULL", "_a IS NULL", "a1 IS NULL", "A = 5", "a = 5 OR z = 1", "z = 1 OR a = 5",
    "z = 1 AND a = 5", "a = 5 AND z = 1", "NOT z = 1", "NOT (z = 1)", "z = z", "z = a", "a = z",
    "e = ''", "e > 1", "e = 16", "e = 1.5", "c = 'true'", "not not c = true", "a in ('5') = true",
    "a BETWEEN 1 AND 10 AND b = 'x'", "a NOT BETWEEN 1 AND 10 OR c", "2 BETWEEN a AND 10",
    "a BETWEEN -1 AND +1", "a > 1.7976931348623157E308", "a > 4.9E-324", "a = 'x''", "'a' = 'a'",
    "1 = 1", "1 = 1.0", "1.0 = 1", "2147483648 = 2147483648", "1 < 2", "1 > 2L", "TRUE = TRUE",
    "NULL IS NULL", "a IS NULL IS NULL", "(a IS NULL) = FALSE", "NOT NULL", "NOT 5", "-TRUE = 1",
    "-'x' = 1", "a = - 5", "a > -5", "a <> NULL", "a = 1 = 1", "d >= d", "d <= 7", "a > 2.5",
    "a = 5 or b in ('x','y','z','w','v','u')", "b in ('a','b','c','d','e','f','x')",
]  # fmt: skip


def python_outcome(expression: str, props: dict[str, str]) -> str:
    try:
        selector = compile_selector(expression)
    except SelectorError:
        return "PARSE_ERROR"
    try:
        value = selector.evaluate(props)
    except EvaluationError:
        return "ERROR"
    if value is None:
        return "NULL"
    return ("TRUE" if value else "FALSE") if isinstance(value, bool) else "VALUE"


NAMES = ["a", "b", "c", "d", "e", "z"]
LITERALS = ["5", "0", "-3", "2147483648", "2.5", "0.5", "1e3", "'x'", "'5'", "'it''s'", "''", "TRUE", "FALSE",
            "NULL", "007", "5L"]  # fmt: skip


STRINGS = LITERALS[7:11]


def generated(rng: random.Random, depth: int = 0) -> str:
    """A random expression of the grammar, sometimes ill-typed or broken on purpose."""
    roll = rng.random()
    if depth > 3 or roll < 0.2:
        return rng.choice(NAMES + LITERALS)
    operand = lambda: generated(rng, depth + 1)  # noqa: E731
    forms = [
        lambda: f"{operand()} {rng.choice(['=', '<>', '>', '>=', '<', '<='])} {operand()}",
        lambda: f"{operand()} {rng.choice(['AND', 'OR'])} {operand()}",
        lambda: f"NOT {operand()}",
        lambda: f"-{operand()}",
        lambda: f"({operand()})",
        lambda: f"{operand()} IS {rng.choice(['', 'NOT '])}NULL",
        lambda: f"{operand()} {rng.choice(['', 'NOT '])}BETWEEN {operand()} AND {operand()}",
        lambda: f"{rng.choice(NAMES)} {rng.choice(['', 'NOT '])}IN ({', '.join(rng.sample(STRINGS, 2))})",
    ]
    text = rng.choice(forms)()
    if rng.random() < 0.03:
        text = text[: rng.randrange(len(text) + 1)]  # cut short
    return text


def cases() -> list[tuple[str, dict[str, str]]]:
    rng = random.Random(20261126)
    out = [(expression, props) for expression in CORPUS for props in PROPS]
    for _ in range(3000):
        out.append((generated(rng), rng.choice(PROPS)))
    return out


@pytest.mark.java
def test_the_selector_agrees_with_4_9_8_on_every_case(tmp_path: Path) -> None:
    classes = compile_programs(tmp_path / "classes")
    all_cases = cases()
    file = tmp_path / "cases.jsonl"
    file.write_text("".join(json.dumps([e, p]) + "\n" for e, p in all_cases), encoding="utf-8")
    java = run_program(classes, tmp_path / "state", "SelectorOracle", str(file), timeout=300).splitlines()
    assert len(java) == len(all_cases)
    differ = [
        (expression, props, want, got)
        for (expression, props), want in zip(all_cases, java, strict=True)
        if (got := python_outcome(expression, props)) != want
    ]
    assert not differ, differ[:20]
    outcomes = {want for want in java}
    assert outcomes == {"PARSE_ERROR", "ERROR", "TRUE", "FALSE", "NULL"}  # every kind was met


def test_matches_only_a_true_result_and_refuses_deep_nesting() -> None:
    selector = compile_selector("a > 3 AND b IN ('x', 'y')")
    assert selector.matches({"a": "4", "b": "y"})
    assert not selector.matches({"a": "4"})  # NULL
    assert not selector.matches({"a": "four", "b": "x"})  # a failed evaluation matches nothing
    assert compile_selector("(" * MAX_DEPTH + "a = 1" + ")" * MAX_DEPTH).matches({"a": "1"})
    with pytest.raises(SelectorError, match="nested"):
        compile_selector("(" * (MAX_DEPTH + 1) + "a = 1" + ")" * (MAX_DEPTH + 1))
    with pytest.raises(SelectorError, match="nested"):
        compile_selector("NOT " * 100_000 + "a")
    chain = " OR ".join(f"b = 'x{i}'" for i in range(5000))  # one level, however long
    assert compile_selector(chain + " OR b = 'y'").matches({"b": "y"})
    with pytest.raises(SelectorError, match="nested"):
        compile_selector("a" + " = a" * (MAX_DEPTH + 1))
