"""Bad peers against rmq's ``DLedgerNode`` on a real socket: garbage frames on the peer port, a vote
from a member not in the group, pushes with a gap, with an entry that does not land where it says
and from a leader of another term. Each gets its answer (or the connection closes) and a log line;
the node keeps answering, and nothing is written past its last good entry."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest

from rmqcli.dledger import protocol as dp
from rmqcli.dledger.member import MemberState, Role
from rmqcli.dledger.node import DLedgerNode
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.client import RemotingClient
from tests.support.serve import free_port

GROUP = "RaftNode00"
Code = dp.DLedgerResponseCode


def entry(index: int, pos: int, term: int = 1, body: bytes = b"x" * 60) -> dp.DLedgerEntry:
    return dp.DLedgerEntry(body=body, index=index, magic=1, pos=pos, size=48 + len(body), term=term)


def push(kind: str, e: dp.DLedgerEntry | None, term: int = 1, commit: int = -1) -> dp.PushEntryRequest:
    return dp.PushEntryRequest(
        group=GROUP, remote_id="n0", local_id="n1", leader_id="n1", term=term, type=kind, entry=e,
        commit_index=commit,
    ).with_entries()  # fmt: skip


def test_bad_peers_get_answers_and_leave_the_log_as_it_was(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    addr = f"127.0.0.1:{free_port()}"
    peers = {"n0": addr, "n1": f"127.0.0.1:{free_port()}", "n2": f"127.0.0.1:{free_port()}"}

    async def scenario() -> None:
        state = MemberState.load(GROUP, "n0", peers, tmp_path / "dledger-n0")
        state.curr_term = 1
        node = DLedgerNode(state, data_file_size=1 << 20)
        await node.start()
        client = RemotingClient()

        async def call(code: dp.DLedgerRequestCode, body: object, cls: type) -> object:
            answer = await client.invoke(addr, dp.request_command(code, body), 5)
            assert answer.code == dp.SUCCESS
            return jb.decode(cls, answer.body)

        try:
            # garbage on the peer port: the connection is closed, the node goes on
            host, port = addr.split(":")
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(b"\xff" * 64)
            await writer.drain()
            assert await asyncio.wait_for(reader.read(16), 5) == b""
            writer.close()
            # a vote from a member that is not in the group
            vote = dp.VoteRequest(group=GROUP, remote_id="n0", local_id="n9", leader_id="n9", term=5)
            answer = await call(dp.DLedgerRequestCode.VOTE, vote, dp.VoteResponse)
            assert answer.vote_result == "REJECT_UNKNOWN_LEADER"  # type: ignore[attr-defined]
            # n1 leads term 1: a heartbeat makes the node its follower
            beat = dp.HeartBeatRequest(group=GROUP, remote_id="n0", local_id="n1", leader_id="n1", term=1)
            assert (
                await call(dp.DLedgerRequestCode.HEART_BEAT, beat, dp.HeartBeatResponse)
            ).code == Code.SUCCESS  # type: ignore[attr-defined]
            assert state.role is Role.FOLLOWER
            first = entry(0, 0)
            ok = await call(dp.DLedgerRequestCode.PUSH, push("TRUNCATE", first), dp.PushEntryResponse)
            assert (ok.code, node.ledger.end_index) == (Code.SUCCESS, 0)  # type: ignore[attr-defined]
            end_pos = node.ledger.write_pos
            # a gap: entry 5 while the log ends at 0 waits, then is refused after a second
            started = time.monotonic()
            gap = await call(dp.DLedgerRequestCode.PUSH, push("APPEND", entry(5, 500)), dp.PushEntryResponse)
            assert gap.code == Code.INCONSISTENT_STATE and time.monotonic() - started >= 1.0  # type: ignore[attr-defined]
            # the next index, but not where the log ends
            astray = await call(
                dp.DLedgerRequestCode.PUSH, push("APPEND", entry(1, end_pos + 8)), dp.PushEntryResponse
            )
            assert astray.code == Code.INCONSISTENT_STATE  # type: ignore[attr-defined]
            # a leader of another term
            other = await call(
                dp.DLedgerRequestCode.PUSH, push("APPEND", entry(1, end_pos), term=7), dp.PushEntryResponse
            )
            assert other.code == Code.INCONSISTENT_STATE  # type: ignore[attr-defined]
            assert (node.ledger.end_index, node.ledger.write_pos) == (0, end_pos)
            # and the node still takes a good entry
            good = await call(
                dp.DLedgerRequestCode.PUSH, push("APPEND", entry(1, end_pos)), dp.PushEntryResponse
            )
            assert (good.code, node.ledger.end_index) == (Code.SUCCESS, 1)  # type: ignore[attr-defined]
        finally:
            await client.close()
            await node.close()

    asyncio.run(scenario())
    text = caplog.text
    assert "[PushFastForward]" in text and "append at 1 refused" in text
