"""Server-side renewal of the handles of messages received with ``auto_renew`` (the 5.1 proxy's
``ReceiptHandleProcessor`` with ``RenewStrategyPolicy``; research notes issue21 §2b).

Such messages are popped invisible for 60 s. Every 5 s each tracked handle that becomes visible
within 10 s has its invisible time changed to the next step (1 min, 3 min, 5 min, 10 min, 30 min,
then 1 h), until it has been held 3 h (then it is let go). Ack, change and forward calls of the
client name the handle it was given: ``resolve`` replaces it by the latest one. When the client's
stream ends or it says goodbye, its messages are made visible again after 1 s
(``invisibleTimeMillisWhenClear``). At most ``MAX_TRACKED`` handles are kept.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rmqcli.broker.pop.pop import PopError

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext

log = logging.getLogger(__name__)

PERIOD_SECONDS = 5.0  # renewSchedulePeriodMillis
AHEAD_MS = 10_000  # renewAheadTimeMillis
MAX_HOLD_MS = 3 * 3600 * 1000  # renewMaxTimeMillis
CLEAR_INVISIBLE_MS = 1_000  # invisibleTimeMillisWhenClear
STEPS_MS = (60_000, 180_000, 300_000, 600_000, 1_800_000, 3_600_000)  # RenewStrategyPolicy
MAX_TRACKED = 100_000

Change = Callable[[str, str, str, int], str]  # (group, topic, handle, invisible ms) -> new handle


@dataclass
class Tracked:
    group: str
    topic: str
    handle: str
    first_ms: int
    visible_at_ms: int
    renewals: int = 0


def _visible_at(handle: str) -> int:
    parts = handle.split(" ")
    try:
        return int(parts[1]) + int(parts[2])
    except (IndexError, ValueError):
        return 0


def now_ms() -> int:
    return int(time.time() * 1000)


class Renewer:
    """Handles renewed for clients, by (client id, group, message id)."""

    def __init__(self, ctl: BrokerContext, change: Change):
        self.ctl = ctl
        self.change = change
        self.tracked: dict[tuple[str, str, str], Tracked] = {}
        self._task: asyncio.Task[None] | None = None

    def track(self, client_id: str, group: str, topic: str, message_id: str, handle: str) -> None:
        if len(self.tracked) >= MAX_TRACKED:
            return
        now = now_ms()
        self.tracked[(client_id, group, message_id)] = Tracked(group, topic, handle, now, _visible_at(handle))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    def resolve(self, client_id: str, group: str, message_id: str, handle: str) -> str:
        found = self.tracked.get((client_id, group, message_id))
        return found.handle if found is not None else handle

    def forget(self, client_id: str, group: str, message_id: str) -> None:
        self.tracked.pop((client_id, group, message_id), None)

    def clear(self, client_id: str) -> None:
        for key in [key for key in self.tracked if key[0] == client_id]:
            item = self.tracked.pop(key)
            self._apply(item, CLEAR_INVISIBLE_MS)

    def _apply(self, item: Tracked, invisible: int) -> bool:
        try:
            item.handle = self.change(item.group, item.topic, item.handle, invisible)
        except (PopError, ValueError) as exc:
            log.info("gRPC renew of a %s message of %s failed: %s", item.topic, item.group, exc)
            return False
        except Exception as exc:  # a status error: the handle is no longer good
            log.info("gRPC renew of a %s message of %s failed: %s", item.topic, item.group, exc)
            return False
        item.visible_at_ms = _visible_at(item.handle)
        return True

    def renew_due(self) -> None:
        now = now_ms()
        for key, item in list(self.tracked.items()):
            if item.visible_at_ms - now > AHEAD_MS:
                continue
            if now - item.first_ms >= MAX_HOLD_MS:
                del self.tracked[key]  # held long enough: it comes back when its time is up
                continue
            step = STEPS_MS[min(item.renewals, len(STEPS_MS) - 1)]
            item.renewals += 1
            if not self._apply(item, step):
                self.tracked.pop(key, None)

    async def _run(self) -> None:
        while self.tracked:
            await asyncio.sleep(PERIOD_SECONDS)
            try:
                self.renew_due()
            except Exception:  # never let the loop die silently
                log.exception("gRPC renew round failed")
