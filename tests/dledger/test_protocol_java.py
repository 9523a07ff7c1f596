"""The DLedger RPC bodies (``rmqcli.dledger.protocol``) against a real DLedger node: a real 4.9.8
broker in DLedger mode (``n0``) whose two other peers (``n1``, ``n2``) are listeners of this test.
Every request it sends them must read back into our beans and encode to the very same bytes; our
answers (votes ACCEPT, heartbeats SUCCESS) must be understood: it becomes leader, and its log shows
each vote answer re-serialized (``[GetVoteResponse]``) as exactly the bytes we sent. Its own answer
to a METADATA request reads into ``MetadataResponse``."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rmqcli.dledger import protocol as dp
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.client import RemotingClient
from rmqcli.remoting.codec import FrameDecoder, RemotingCommand, encode
from tests.support.components import require
from tests.support.oracle import KIT, LOADED_MACHINE, Jvm, broker_port, kit_env
from tests.support.serve import free_port

pytestmark = pytest.mark.java

GROUP = "RaftNode00"
_VOTE_ANSWER = re.compile(r"\[n0\]\[GetVoteResponse\] (\{.*\})")
_ELECTED = re.compile(r"\[n0\] \[VOTE_RESULT\] has been elected to be the leader in term (\d+)")


Answer = Callable[[str, RemotingCommand], object]


class Peers:
    """Listeners for the peers of ``ports`` on their own loop thread: every request frame is kept
    (peer, command) and answered with ``answer(peer, command)`` (default ``accept_all``)."""

    def __init__(self, ports: dict[str, int], answer: Answer | None = None):
        self.ports = ports
        self.answer = answer or self.accept_all
        self.received: list[tuple[str, RemotingCommand]] = []
        self.sent: list[bytes] = []  # the vote answers' bodies
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)

        async def start() -> None:
            self.servers = [
                await asyncio.start_server(lambda r, w, n=name: self._serve(n, r, w), "127.0.0.1", port)
                for name, port in self.ports.items()
            ]
            self.ready.set()

        self.loop.run_until_complete(start())
        self.loop.run_forever()

    async def _serve(self, name: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frames = FrameDecoder()
        try:
            while data := await reader.read(65536):
                for cmd in frames.feed_commands(data):
                    self.received.append((name, cmd))
                    writer.write(encode(dp.response_command(cmd, self.answer(name, cmd))))
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    def accept_all(self, _peer: str, cmd: RemotingCommand) -> object:
        """Votes ACCEPT in the requested term, heartbeats SUCCESS, pushes as an empty follower
        answers them, anything else UNSUPPORTED."""
        if cmd.code == dp.DLedgerRequestCode.VOTE:
            req = jb.decode(dp.VoteRequest, cmd.body)
            answer = dp.VoteResponse(
                group=req.group, remote_id=req.remote_id, local_id=req.local_id, leader_id=req.leader_id,
                term=req.term, vote_result="ACCEPT",
            )  # fmt: skip
            self.sent.append(jb.encode(answer))
            return answer
        if cmd.code == dp.DLedgerRequestCode.HEART_BEAT:
            return dp.HeartBeatResponse()
        if cmd.code == dp.DLedgerRequestCode.PUSH:
            push = jb.decode(dp.PushEntryRequest, cmd.body)
            index = push.first_entry_index if push.type != "COMMIT" else None
            count = push.count if push.type != "COMMIT" else 0
            return dp.PushEntryResponse(group=push.group, term=push.term, index=index, count=count)
        return dp.HeartBeatResponse(code=int(dp.DLedgerResponseCode.UNSUPPORTED))

    def __enter__(self) -> Peers:
        self.thread.start()
        assert self.ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        for server in self.servers:
            self.loop.call_soon_threadsafe(server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def _logs(state: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted((state / "logs").rglob("*.log")))


@contextmanager
def java_n0_with(
    home: Path, listeners: dict[str, Answer | None], silent: tuple[str, ...] = ()
) -> Iterator[tuple[Peers, Path, int, int]]:
    """The real n0 with peers ``listeners`` (answered by the test; None: ``accept_all``) and
    ``silent`` (nobody listens), until it has been elected and sent a heartbeat round: (peers, its
    log dir, its DLedger port, the term it was elected in)."""
    require("java")
    raft = {name: free_port() for name in ("n0", *listeners, *silent)}
    peers = ";".join(f"{n}-127.0.0.1:{p}" for n, p in raft.items())
    conf = {
        "brokerClusterName": "DefaultCluster", "brokerName": GROUP, "listenPort": str(broker_port()),
        "namesrvAddr": f"127.0.0.1:{free_port()}", "brokerIP1": "127.0.0.1",
        "storePathRootDir": str(home / "store"),
        "mappedFileSizeCommitLog": str(1 << 20), "enableDLegerCommitLog": "true", "dLegerGroup": GROUP,
        "dLegerPeers": peers, "dLegerSelfId": "n0", "diskMaxUsedSpaceRatio": "95", **LOADED_MACHINE,
    }  # fmt: skip
    (home / "broker.conf").write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
    env = kit_env(home)

    def answer(peer: str, cmd: RemotingCommand) -> object:
        return (listeners[peer] or fake.accept_all)(peer, cmd)  # None: accept_all

    with Peers({n: raft[n] for n in listeners}, answer) as fake:
        jvm = Jvm([str(KIT / "bin" / "broker"), "-c", str(home / "broker.conf")], home / "broker.out", env)
        try:
            state = Path(env["ORACLE_STATE_DIR"])
            deadline = time.monotonic() + 120
            while not (elected := _ELECTED.search(_logs(state))):
                assert jvm.proc.poll() is None, (home / "broker.out").read_text()[-3000:]
                assert time.monotonic() < deadline, "n0 never became leader with our votes"
                time.sleep(0.5)
            deadline = time.monotonic() + 30
            while {n for n, c in fake.received if c.code == dp.DLedgerRequestCode.HEART_BEAT} != set(
                listeners
            ):
                assert time.monotonic() < deadline, "no heartbeats from the elected n0"
                time.sleep(0.2)
            yield fake, state, raft["n0"], int(elected.group(1))
        finally:
            jvm.stop()


@pytest.fixture(scope="module")
def java_n0(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Peers, Path, int]]:
    """The real n0 elected with the ACCEPT answers of fake n1 and n2, until the module ends."""
    home = tmp_path_factory.mktemp("dledger-n0")
    with java_n0_with(home, {"n1": None, "n2": None}) as (fake, state, port, _):
        yield fake, state, port


def test_every_request_reads_back_to_its_bytes(java_n0) -> None:
    fake, _, _ = java_n0
    codes = {c.code for _, c in fake.received}
    assert {dp.DLedgerRequestCode.VOTE, dp.DLedgerRequestCode.HEART_BEAT} <= codes
    for name, cmd in list(fake.received):
        cls = dp.REQUESTS[cmd.code]
        bean = jb.decode(cls, cmd.body)
        assert jb.encode(bean) == cmd.body, (cls.__name__, cmd.body)
        assert not cmd.ext_fields and (bean.group, bean.remote_id, bean.local_id) == (GROUP, name, "n0")


def test_vote_requests_carry_the_candidates_empty_ledger(java_n0) -> None:
    fake, state, _ = java_n0
    term = int(_ELECTED.search(_logs(state)).group(1))
    votes = [
        jb.decode(dp.VoteRequest, c.body) for _, c in fake.received if c.code == dp.DLedgerRequestCode.VOTE
    ]
    assert votes and all(
        v.leader_id == "n0" and (v.ledger_end_index, v.ledger_end_term) == (-1, -1) for v in votes
    )
    assert votes[-1].term == term
    beats = [jb.decode(dp.HeartBeatRequest, c.body) for _, c in fake.received if c.code == 51002]
    assert all(b.leader_id == "n0" and b.term == term for b in beats)


def test_the_java_candidate_read_our_vote_answers_as_sent(java_n0) -> None:
    """``[GetVoteResponse]`` is fastjson's re-serialization of the answer it parsed: the same bytes."""
    fake, state, _ = java_n0
    logged = [
        line for line in _VOTE_ANSWER.findall(_logs(state)) if '"remoteId":"n0"' not in line
    ]  # not its own
    assert len(logged) >= 2
    assert {line.encode() for line in logged} <= set(fake.sent)
    assert any('"voteResult":"ACCEPT"' in line for line in logged)


def test_metadata_of_the_java_node(java_n0) -> None:
    _, _, port = java_n0

    async def ask() -> dp.MetadataResponse:
        req = dp.MetadataRequest(group=GROUP, remote_id="n0", local_id="n1")
        async with RemotingClient() as client:
            answer = await client.invoke(
                f"127.0.0.1:{port}", dp.request_command(dp.DLedgerRequestCode.METADATA, req), 5
            )
        assert answer.code == dp.SUCCESS
        return jb.decode(dp.MetadataResponse, answer.body)

    meta = asyncio.run(ask())
    assert (meta.code, meta.group, meta.leader_id) == (dp.SUCCESS, GROUP, "n0")
    assert set(meta.peers or {}) == {"n0", "n1", "n2"}
    wrong = dp.MetadataRequest(group=GROUP, remote_id="n9", local_id="n1")

    async def ask_wrong() -> dp.MetadataResponse:
        async with RemotingClient() as client:
            answer = await client.invoke(
                f"127.0.0.1:{port}", dp.request_command(dp.DLedgerRequestCode.METADATA, wrong), 5
            )
        return jb.decode(dp.MetadataResponse, answer.body)

    assert asyncio.run(ask_wrong()).code == dp.DLedgerResponseCode.UNKNOWN_MEMBER


# --- rmq's elector as a voter of the real n0 ---------------------------------------------------------
def test_the_real_n0_is_elected_with_rmqs_vote_and_rmq_follows_it(tmp_path: Path) -> None:
    """n1 is ``rmqcli.dledger.elector`` on its own ``currterm``, n2 is down: n0 needs n1's vote. n1
    gives it as 0.3.1.2 does (its ``currterm`` then holds what n0's holds: the vote for n0 in the
    elected term, byte for byte) and becomes n0's follower on its first heartbeat."""
    from rmqcli.dledger.elector import Elector
    from rmqcli.dledger.member import MemberState, Role

    state = MemberState.load(GROUP, "n1", {"n0": "", "n1": "", "n2": ""}, tmp_path / "n1" / "dledger-n1")
    elector = Elector(state)

    def rmq_n1(_peer: str, cmd: RemotingCommand) -> object:
        if cmd.code == dp.DLedgerRequestCode.VOTE:
            return elector.handle_vote(jb.decode(dp.VoteRequest, cmd.body))
        if cmd.code == dp.DLedgerRequestCode.HEART_BEAT:
            return elector.handle_heartbeat(jb.decode(dp.HeartBeatRequest, cmd.body))
        return dp.HeartBeatResponse(code=int(dp.DLedgerResponseCode.UNSUPPORTED))

    home = tmp_path / "java"
    home.mkdir()
    with java_n0_with(home, {"n1": rmq_n1}, silent=("n2",)) as (_fake, _state, _port, term):
        assert (state.role, state.leader_id, state.curr_term) == (Role.FOLLOWER, "n0", term)
        java_term_file = home / "store" / "dledger-n0" / "currterm"
        assert (
            state.term_file.read_bytes()
            == java_term_file.read_bytes()
            == f"voteLeader=n0\ncurrTerm={term}\n".encode()
        )
        again = MemberState.load(GROUP, "n1", state.peers, state.home)
        assert (again.curr_term, again.curr_vote_for) == (term, "n0")
