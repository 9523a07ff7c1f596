"""A disk filled fast (issue 41): ``rmq serve`` on a 64 MiB tmpfs with 8 MiB CommitLog files, sent
64 KiB bodies over remoting as fast as it answers, before any clean-up round: once the disk is full
the sends are refused with 14 (SERVICE_NOT_AVAILABLE), the broker lives on (no SIGBUS), every
acknowledged message is in the store and ``rmq verify`` finds it clean. Needs permission to mount a
tmpfs (root); skipped without."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from rmqcli.remoting.client import RemotingClient
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from tests.broker.test_timer_serve import header
from tests.support import popwire as w
from tests.support.cli import run_rmq
from tests.support.serve import ServeProcess, write_conf

TOPIC = "TopicFill"
BODY = b"f" * 65536


@pytest.fixture
def small_disk(tmp_path: Path):  # type: ignore[no-untyped-def]
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(disk)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(addr: str, limit: int, props: dict[str, str]) -> list[int]:
    """Sends of ``BODY`` with ``props``, 16 at a time, until 40 in a row are refused: the codes."""

    async def go() -> list[int]:
        codes: list[int] = []
        async with RemotingClient() as client:
            while len(codes) < limit and not (len(codes) >= 40 and set(codes[-40:]) != {RS.SUCCESS}):
                batch = [
                    client.invoke(
                        addr,
                        RemotingCommand.request(
                            RC.SEND_MESSAGE_V2, header(TOPIC, {"KEYS": f"K{len(codes) + i}", **props}), BODY
                        ),
                        20.0,
                    )
                    for i in range(16)
                ]
                codes += [r.code for r in await asyncio.gather(*batch)]
        return codes

    return asyncio.run(go())


@pytest.mark.parametrize("delayed", [False, True], ids=["plain", "delayed"])
def test_a_fast_fill_is_refused_with_14_and_the_broker_lives(
    small_disk: Path, tmp_path: Path, delayed: bool
) -> None:
    """Plain sends take the send lane; delayed ones (level 18: 2 h, parked in SCHEDULE_TOPIC_XXXX
    queue 17) the general path: both answer 14 from the first send that finds no room."""
    conf = write_conf(
        tmp_path / "broker.conf",
        mappedFileSizeCommitLog=str(8 * 1024 * 1024),
        mappedFileSizeConsumeQueue=str(20 * 4000),
        maxHashSlotNum="1000",
        maxIndexNum="4000",
    )  # small queue and index files: on a tmpfs, reading a hole through a map takes a page too
    serve = ServeProcess(small_disk / "store", conf).start()
    try:
        a = serve.broker
        assert w.create_topic(a, TOPIC, 4).code == RS.SUCCESS
        codes = fill(a, 3000, {"DELAY": "18"} if delayed else {})
        stored = codes.count(RS.SUCCESS)
        assert stored > 500 and set(codes) <= {RS.SUCCESS, RS.SERVICE_NOT_AVAILABLE}, sorted(set(codes))
        assert codes[-1] == RS.SERVICE_NOT_AVAILABLE
        assert serve.proc is not None and serve.proc.poll() is None  # alive
        assert "disk full" in serve.output()
        if delayed:
            pulled = len(w.pull_all(a, "SCHEDULE_TOPIC_XXXX", 17))
        else:
            pulled = sum(len(w.pull_all(a, TOPIC, q)) for q in range(4))
        assert pulled == stored
    finally:
        code = serve.stop()
    assert code == 0, serve.output()[-2000:]
    verify = run_rmq("verify", str(small_disk / "store"))
    assert verify.returncode == 0, verify.stdout + verify.stderr


@pytest.mark.parametrize("delayed", [False, True], ids=["plain", "delayed"])
def test_a_failed_mapping_is_an_error_answer_and_one_log_line(tmp_path: Path, delayed: bool) -> None:
    """A directory where the next CommitLog file goes: the send that needs that file is answered as
    4.9.8 answers ``CREATE_MAPEDFILE_FAILED`` (SYSTEM_ERROR, "create mapped file failed, server is
    busy or broken."), the writer logs it once, and the broker lives on: the stored messages are
    pulled, and once the directory is gone the next send is stored. Plain sends take the send lane,
    delayed ones the general path. Needs no root."""
    size = 1024 * 1024
    conf = write_conf(tmp_path / "broker.conf", mappedFileSizeCommitLog=str(size))
    serve = ServeProcess(tmp_path / "store", conf).start()
    blocker = tmp_path / "store" / "commitlog" / f"{size:020d}"
    props = {"DELAY": "18"} if delayed else {}
    try:
        a = serve.broker
        assert w.create_topic(a, TOPIC, 1).code == RS.SUCCESS
        blocker.mkdir(parents=True)
        codes: list[int] = []
        while len(codes) < 40 and RS.SUCCESS == (codes[-1] if codes else RS.SUCCESS):
            answer = w.call(a, RC.SEND_MESSAGE_V2, header(TOPIC, {"KEYS": f"K{len(codes)}", **props}), BODY)
            codes.append(answer.code)
        assert (
            codes[-1] == RS.SYSTEM_ERROR
            and answer.remark == "create mapped file failed, server is busy or broken."
        )
        stored = len(codes) - 1
        assert stored > 10, codes
        assert serve.proc is not None and serve.proc.poll() is None  # alive
        lines = [line for line in serve.output().splitlines() if "ERROR" in line or "Traceback" in line]
        assert len(lines) == 1 and "CommitLog: cannot create or map the next file" in lines[0], lines
        assert "Is a directory" in lines[0]
        topic, queue = ("SCHEDULE_TOPIC_XXXX", 17) if delayed else (TOPIC, 0)
        assert len(w.pull_all(a, topic, queue)) == stored
        blocker.rmdir()
        again = w.call(a, RC.SEND_MESSAGE_V2, header(TOPIC, {"KEYS": "AFTER", **props}), BODY)
        assert again.code == RS.SUCCESS, again.remark
        assert len(w.pull_all(a, topic, queue)) == stored + 1
    finally:
        code = serve.stop()
    assert code == 0, serve.output()[-2000:]
