"""``rmq serve`` as a child process on free loopback ports, and the broker.conf the tests give it
(DESIGN.md "broker end-to-end")."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from rmqcli.remoting.client import RemotingClient
from rmqcli.remoting.codec import RemotingCommand
from tests.support import ROOT
from tests.support.cli import RMQ
from tests.support.ports import claim

T = TypeVar("T")


def free_port() -> int:
    """A loopback port free now and handed out to no other server (``tests.support.ports``)."""
    return claim()


def free_port_pair() -> int:
    """A free broker listenPort whose HA port (+1) and VIP channel (-2) are free too; all three are
    kept from later picks."""
    return claim((0, 1, -2))


class PortTaken(AssertionError):
    """``rmq serve`` could not bind a port chosen free a moment before."""


class ServeProcess:
    """``rmq serve STORE`` on free loopback ports; ``stop()`` sends SIGTERM and waits. Its gRPC
    endpoint is off (``--grpc-port 0``: many servers run at once and 8081 is one port) unless
    ``grpc`` asks for it, on a free port (``grpc_port``)."""

    def __init__(
        self,
        store: Path,
        conf: Path | None = None,
        extra: list[str] | None = None,
        command: list[str] | None = None,
        grpc: bool = False,
    ):
        self.store = store
        self.conf = conf
        self.extra = extra or []
        self.command = command or RMQ  # what runs ``rmq``
        self.want_grpc = grpc
        self.started_once = False
        self._pick_ports()
        self.proc: subprocess.Popen[str] | None = None

    def _pick_ports(self) -> None:
        self.namesrv_port = free_port()
        self.port = free_port_pair()  # a master also listens on port + 1 (HA)
        while self.namesrv_port in (self.port - 2, self.port, self.port + 1):
            self.port = free_port_pair()
        self.grpc_port = 0
        taken = (0, self.namesrv_port, self.port - 2, self.port, self.port + 1)
        while self.want_grpc and self.grpc_port in taken:
            self.grpc_port = free_port()
        self.log = self.store.parent / f"serve-{self.port}.log"

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def grpc(self) -> str:
        """The gRPC endpoint (5.x clients' access point)."""
        return f"127.0.0.1:{self.grpc_port}"

    def start(self, timeout: float = 60.0) -> ServeProcess:
        """Start it and wait until it serves; ``timeout`` is only an upper bound (on a loaded machine
        the interpreter alone took over 15 s to start). A port another process took between its
        choice and the bind (a test suite running beside this one) is chosen again, at most twice,
        on the first start only (later starts keep the ports others were told)."""
        for attempt in range(3):
            try:
                return self._start(timeout)
            except PortTaken:
                if attempt == 2 or self.started_once:
                    raise
                self._pick_ports()
        raise AssertionError("unreachable")

    def _start(self, timeout: float) -> ServeProcess:
        args = [
            *self.command,
            "serve",
            str(self.store),
            "--namesrv-port",
            str(self.namesrv_port),
            "--port",
            str(self.port),
            "--grpc-port",
            str(self.grpc_port),
        ]
        if self.conf is not None:
            args += ["--config", str(self.conf)]
        args += self.extra
        self.log.parent.mkdir(parents=True, exist_ok=True)
        if self.log.exists():  # a restart: the earlier run's log kept beside (.1, .2, ...) as evidence
            runs = len(list(self.log.parent.glob(self.log.name + ".*")))
            self.log.rename(self.log.with_name(f"{self.log.name}.{runs + 1}"))
        handle = open(self.log, "w")  # noqa: SIM115 - kept open for the child
        self.proc = subprocess.Popen(args, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT, text=True)
        handle.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                out = self.output()
                if "address already in use" in out:
                    raise PortTaken(out)
                raise AssertionError(f"rmq serve exited {self.proc.returncode}: {out}")
            if "; store " in self.output() and _connectable(self.port):
                time.sleep(0.3)  # the first REGISTER_BROKER
                self.started_once = True
                return self
            time.sleep(0.05)
        self.kill()
        raise AssertionError(f"rmq serve did not start: {self.output()}")

    def output(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def stop(self, timeout: float = 15.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"rmq serve did not stop on SIGTERM: {self.output()}") from None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def __enter__(self) -> ServeProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process ``pid`` listens on (Linux: its socket inodes in /proc/PID/fd, matched
    with the LISTEN entries of /proc/net/tcp and tcp6)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def _connectable(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
        return True
    return False


def write_conf(path: Path, **extra: str) -> Path:
    lines = {
        "brokerName": "broker-a",
        "brokerClusterName": "DefaultCluster",
        "mappedFileSizeCommitLog": "4194304",
    }
    lines.update(extra)
    path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    return path


# delay levels of 1 s and 2 s (messageDelayLevel) for tests of delayed delivery and retries
LEVELS = "1s 2s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"


def run(coro_fn, *args):  # type: ignore[no-untyped-def]
    async def go():  # type: ignore[no-untyped-def]
        async with RemotingClient() as client:
            return await coro_fn(client, *args)

    return asyncio.run(go())


async def invoke(
    client: RemotingClient, addr: str, code: int, header=None, body: bytes = b""
) -> RemotingCommand:  # type: ignore[no-untyped-def]  # noqa: E501
    return await client.invoke(addr, RemotingCommand.request(code, header, body, version=407), 10.0)


def wait_until(check: Callable[[], T], timeout: float, what: str, step: float = 0.1) -> T:
    """Poll ``check`` until it returns something true, and return that; an AssertionError naming
    ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not (got := check()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout:g} s"
        time.sleep(step)
    return got
