"""A ``BrokerController`` in this process over a ``StoreWriter`` whose clock the test moves: the
broker services (schedule, transaction check) without sockets."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from rmqcli.broker.config import BrokerConfig
from rmqcli.broker.controller import BrokerController
from rmqcli.store.write.writer import StoreWriter


@contextmanager
def broker_controller(root: Path, clock: list[int], **config: object) -> Iterator[BrokerController]:
    """The controller of a store at ``root`` whose time is ``clock[0]``; ``config`` overrides
    ``BrokerConfig`` fields. The writer is closed on leaving."""
    writer = StoreWriter(root, clock=lambda: clock[0])
    try:
        yield BrokerController(replace(BrokerConfig(broker_ip1="127.0.0.1"), **config), writer, [])
    finally:
        writer.close()
