"""How rmq's long-running commands (``rmq controller``, ``rmq exporter``) wait to be stopped."""

from __future__ import annotations

import asyncio
import signal

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


async def until_stopped() -> None:
    """Return at the first SIGTERM or SIGINT; the handlers are removed afterwards."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)
