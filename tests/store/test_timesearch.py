"""``offset_by_time``: 4.9.x's ``getOffsetInQueueByTime`` over a queue's store times."""

from __future__ import annotations

import pytest

from rmqcli.store.timesearch import offset_by_time

TIMES = {3: 100, 4: 200, 5: 200, 6: 400}  # queue offsets 3..6


@pytest.mark.parametrize(
    ("timestamp", "offset"),
    [(50, 3), (100, 3), (150, 4), (200, 4), (260, 5), (340, 6), (400, 6), (900, 6)],
)
def test_the_message_stored_then_or_the_closer_neighbour(timestamp: int, offset: int) -> None:
    assert offset_by_time(3, 7, TIMES.get, timestamp) == offset


def test_an_empty_queue_gives_zero() -> None:
    assert offset_by_time(5, 5, TIMES.get, 100) == 0
