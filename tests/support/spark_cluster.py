"""A Spark standalone cluster on loopback, started from the installed PySpark's ``bin/spark-class``.

One Master and N Workers (``cores`` each), every daemon a child JVM with its own log; the work
directories (where executors run) live under the cluster's directory, apart from the driver's
current directory. ``private`` gives the last Worker (and so its executors) a mount namespace of
its own with an empty tmpfs over that directory: a path under it exists for the driver (and the
other Workers) only, as a disk local to one machine is on a real cluster.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.ports import claim

START_TIMEOUT_S = 120.0


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__path__[0])


@dataclass
class SparkCluster:
    root: Path
    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    private: Path | None = None
    url: str = ""
    procs: list[subprocess.Popen] = field(default_factory=list)

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            SPARK_HOME=str(spark_home()),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOG_DIR=str(self.root / "logs"),
            PYSPARK_PYTHON=sys.executable,
            SPARK_NO_DAEMONIZE="1",
        )
        return env

    def _spawn(self, name: str, args: list[str], private: bool = False) -> subprocess.Popen:
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        command = [str(spark_home() / "bin" / "spark-class"), *args]
        if private and self.private is not None:
            script = 'mount -t tmpfs rmq-private "$0" && exec "$@"'
            command = [
                "unshare",
                "-m",
                "--propagation",
                "private",
                "sh",
                "-c",
                script,
                str(self.private),
                *command,
            ]
        proc = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self._env(),
            cwd=self.root,
            start_new_session=True,
        )
        log.close()
        self.procs.append(proc)
        return proc

    def start(self) -> SparkCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "logs").mkdir(exist_ok=True)
        port = claim()
        self.url = f"spark://127.0.0.1:{port}"
        self._spawn(
            "master",
            ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(claim())],
        )  # fmt: skip
        self._wait_log("master", "I have been elected leader")
        for i in range(self.workers):
            self.add_worker(i)
        return self

    def add_worker(self, i: int) -> None:
        work = self.root / f"work-{i}"
        work.mkdir(exist_ok=True)
        self._spawn(
            f"worker-{i}",
            ["org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
             "--cores", str(self.cores), "--memory", self.memory, "--webui-port", str(claim()),
             "--work-dir", str(work)],
            private=i == self.workers - 1,
        )  # fmt: skip
        self._wait_log(f"worker-{i}", "Successfully registered with master")

    def _wait_log(self, name: str, line: str) -> None:
        path = self.root / f"{name}.log"
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if line in path.read_text(errors="replace"):
                return
            if any(p.poll() is not None for p in self.procs):
                break
            time.sleep(0.2)
        raise RuntimeError(f"spark {name} did not start: {path.read_text(errors='replace')[-2000:]}")

    def executor_of(self, pid: int) -> int | None:
        """The executor JVM ``pid`` runs under (itself, or its nearest such ancestor), if any."""
        while pid > 1:
            try:
                args = Path(f"/proc/{pid}/cmdline").read_bytes()
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                return None
            if b"CoarseGrainedExecutorBackend" in args:
                return pid
            pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state: ppid
        return None

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
