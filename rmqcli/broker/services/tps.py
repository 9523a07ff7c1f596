"""The broker's put/get rates: ``putTps`` and ``getTransferedTps`` of GET_BROKER_RUNTIME_INFO (B.4).

The controller samples the store's counters every 10 s; each field is three rates, per second over
the last 10 s, 1 min and 10 min, with one decimal and separated by spaces.
"""

from __future__ import annotations

import time
from collections import deque

from rmqcli.broker.services.messagestore import MessageStore


class Stats:
    """Put/get counters sampled every 10 s for ``putTps``/``getTransferedTps`` (10 s, 1 min, 10 min)."""

    def __init__(self, store: MessageStore):
        self.store = store
        self.samples: deque[tuple[float, int, int]] = deque(maxlen=61)

    def sample(self) -> None:
        self.samples.append((time.monotonic(), self.store.put_count, self.store.get_count))

    def tps(self) -> tuple[str, str]:
        now = (time.monotonic(), self.store.put_count, self.store.get_count)
        out: list[list[str]] = [[], []]
        for span in (10, 60, 600):
            base = next((s for s in self.samples if now[0] - s[0] <= span + 1), None)
            for i in (0, 1):
                if base is None or now[0] <= base[0]:
                    out[i].append("0.0")
                else:
                    out[i].append(f"{(now[i + 1] - base[i + 1]) / (now[0] - base[0]):.1f}")
        return " ".join(out[0]), " ".join(out[1])
