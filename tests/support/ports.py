"""Loopback ports for test servers, handed out once across every test process on the machine.

Ports are chosen first and bound later (a broker's listen, HA and VIP ports, a kit's conf), so two
picks must never meet: not within one run, not between the workers of a parallel run
(pytest-xdist), not between two runs at once. Every pick is written to one registry file under an
exclusive ``flock`` with the pid that holds it; a port stays taken while that process lives, and the
entries of ended processes are dropped at the next pick. Ports are drawn below the kernel's
ephemeral range (``ip_local_port_range``), so that no outgoing connection's source port takes one
between its pick and its bind, or while a server restarts on it."""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import socket
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

# one file for the machine: two runs with TMPDIRs of their own still see each other's ports
REGISTRY = Path("/tmp" if os.access("/tmp", os.W_OK) else tempfile.gettempdir()) / "rmq-test-ports"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def _registry() -> Iterator[dict[int, int]]:
    """The ports taken by living processes (port -> pid); what the block adds is appended, and the
    file is written anew once it holds many entries of ended processes."""
    with open(os.open(REGISTRY, os.O_RDWR | os.O_CREAT, 0o666), "r+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        taken: dict[int, int] = {}
        living: dict[int, bool] = {}
        stale = 0
        for line in f.read().split("\n"):
            port, _, pid = line.partition(" ")
            if port.isdigit() and pid.isdigit():
                if int(pid) not in living:
                    living[int(pid)] = _alive(int(pid))
                if living[int(pid)]:
                    taken[int(port)] = int(pid)
                else:
                    stale += 1
        before = set(taken)
        yield taken
        if stale > 2000:
            f.seek(0)
            f.truncate()
            f.write("".join(f"{port} {pid}\n" for port, pid in taken.items()))
        else:
            f.write("".join(f"{port} {taken[port]}\n" for port in taken.keys() - before))
        f.flush()


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _drawable() -> range:
    """The ports to draw from: 15000 up to the first ephemeral port (Linux's default: 32768)."""
    try:
        first = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        first = 32768
    return range(15000, max(first, 20000))


def claim(offsets: Iterable[int] = (0,)) -> int:
    """A free loopback port whose ``port + offset`` for each offset are free too, none handed out
    before to a living process; all of them are kept from later picks."""
    offsets = tuple(offsets)
    drawable = _drawable()
    with _registry() as taken:
        for _ in range(1000):
            port = random.choice(drawable)
            wanted = [port + o for o in offsets]
            if min(wanted) < 1025 or max(wanted) > 65535 or any(p in taken for p in wanted):
                continue
            if all(_bindable(p) for p in wanted):
                for p in wanted:
                    taken[p] = os.getpid()
                return port
    raise AssertionError("no free loopback port")
