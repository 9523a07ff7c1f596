"""An answer still pending when its task is cancelled before it ran (the server stopping as the
request arrives) is closed, not left to warn "coroutine ... was never awaited"."""

from __future__ import annotations

import asyncio
import gc
import socket
import warnings

from rmqcli.remoting.codec import RemotingCommand, encode
from rmqcli.remoting.server.connection import Connection, Server


def test_a_pending_answer_cancelled_before_it_ran_is_closed() -> None:
    started: list[bool] = []
    cancelled: list[asyncio.Task] = []

    async def held() -> RemotingCommand | None:  # stands for a held pull (``pull.hold``)
        started.append(True)
        await asyncio.sleep(60)
        return None

    async def main() -> None:
        loop = asyncio.get_running_loop()
        conn: Connection | None = None

        def stop_all() -> None:  # runs before the answer's task takes its first step
            assert conn is not None
            for task in conn.tasks:
                task.cancel()
                cancelled.append(task)

        def dispatch(request: RemotingCommand, _conn: Connection):  # type: ignore[no-untyped-def]
            loop.call_soon(stop_all)
            return held()

        server = Server("broker", dispatch)
        conn = Connection(server)
        ours, theirs = socket.socketpair()
        await loop.connect_accepted_socket(lambda: conn, sock=ours)
        theirs.sendall(encode(RemotingCommand(code=11, opaque=7, ext_fields={"topic": "T"})))
        for _ in range(400):
            if cancelled and all(task.done() for task in cancelled):
                break
            await asyncio.sleep(0.005)
        theirs.close()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(main())
        assert cancelled and all(task.cancelled() for task in cancelled)
        cancelled.clear()  # the last references to the tasks and their coroutines
        gc.collect()
    assert not started
    assert not [w for w in caught if "never awaited" in str(w.message)]
