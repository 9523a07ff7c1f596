"""The real Apache RocketMQ 4.9.8 of ``../shared/rocketmq-4.9.8`` for interop tests: whether it can
run here (Java 17 and the kit), free broker ports, and its launchers as child processes."""

from __future__ import annotations

import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.support import SHARED
from tests.support.serve import free_port

KIT = SHARED / "rocketmq-4.9.8"


def _java_17() -> bool:
    if shutil.which("java") is None or not (KIT / "bin" / "broker").is_file():
        return False
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return re.search(r'version "17[."]', out.stderr + out.stdout) is not None


HAVE_JAVA = _java_17()


def broker_port() -> int:
    """A listenPort whose listenPort-2 (VIP channel) and listenPort+1 (HA) are free too."""
    for _ in range(100):
        port = free_port()
        if port < 1100:
            continue
        try:
            for other in (port - 2, port + 1):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", other))
        except OSError:
            continue
        return port
    raise AssertionError("no free port triple")


class Jvm:
    """One launcher of the kit in the foreground, its output in ``log``; ``stop()`` sends SIGTERM
    and waits."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str]):
        self.log = log
        with open(log, "w") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=log.parent)

    def wait_for(self, text: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log.read_text(errors="replace"):
            assert self.proc.poll() is None, f"{self.log.name} exited: {self.log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, (
                f"{self.log.name}: no {text!r}: {self.log.read_text()[-2000:]}"
            )
            time.sleep(0.1)

    def terminate(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def wait(self) -> None:
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        self.terminate()
        self.wait()
