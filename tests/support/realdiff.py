"""Differential scenarios against the real RocketMQ 5.1.1 broker: one ``rmq serve`` and one real broker
started once for a module, the same scenario run on both at once, and a comparison that names each
step whose answers differ."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support import popwire as w
from tests.support.oracle5 import real_cluster5
from tests.support.serve import ServeProcess, write_conf

Seen = dict[str, Any]


@dataclass(frozen=True)
class Pair:
    ours: str  # rmq serve's broker address
    theirs: str  # the real 5.1.1 broker's


@contextmanager
def pair(root: Path, **real_settings: str) -> Iterator[Pair]:
    """``rmq serve`` and the real 5.1.1 broker (its NameServer too), started side by side."""
    (root / "rmq").mkdir()
    (root / "real").mkdir()
    serve = ServeProcess(root / "rmq" / "store", write_conf(root / "broker.conf"))
    real_cm = real_cluster5(root / "real", **real_settings)
    with ExitStack() as stack:
        with ThreadPoolExecutor(1) as pool:
            started = pool.submit(real_cm.__enter__)  # the JVMs start while rmq serve does
            try:
                stack.enter_context(serve)
            finally:
                real = started.result()
                stack.push(real_cm.__exit__)
        yield Pair(serve.broker, real.broker)


def run_both(p: Pair, scenario: Callable[[str], Seen]) -> tuple[Seen, Seen]:
    """``scenario`` on both brokers at once (each on its own thread); what each showed."""
    with ThreadPoolExecutor(2) as pool:
        ours = pool.submit(scenario, p.ours)
        theirs = pool.submit(scenario, p.theirs)
        return ours.result(), theirs.result()


def same(ours: Seen, theirs: Seen, only: list[str] | None = None) -> None:
    """Every step (or the steps ``only``) the same on both; a difference names its step(s)."""
    steps = only if only is not None else list(dict.fromkeys([*theirs, *ours]))
    differ = [
        f"step {k!r}: rmq {ours.get(k, '<missing>')!r} != real 5.1.1 {theirs.get(k, '<missing>')!r}"
        for k in steps
        if ours.get(k, "<missing>") != theirs.get(k, "<missing>")
    ]
    assert not differ, "\n".join(differ)


def changed(p: w.Popped, resp: Any, broker: str = "broker-a") -> w.Popped:
    """The handle a 5.1.1 client builds from a CHANGE_MESSAGE_INVISIBLETIME answer
    (``ExtraInfoUtil.buildExtraInfo`` with the message's offset as the ck's, then the offset)."""
    h = resp.ext_fields
    retry = 1 if p.real_topic.startswith("%RETRY%") else 0
    off = p.rec.queue_offset
    fields = (off, h["popTime"], h["invisibleTime"], h["reviveQid"], retry, broker, p.rec.queue_id, off)
    return w.Popped(p.rec, " ".join(str(x) for x in fields), p.real_topic)


def until(check: Callable[[], Any], timeout: float, step: float = 0.1) -> Any:
    """``check()`` until it gives something true, or its last answer after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got or time.monotonic() >= deadline:
            return got
        time.sleep(step)
