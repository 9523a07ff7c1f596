"""``rmq`` for the mqadmin tests: in process through typer's runner (exit code checked), or as child
processes started together; a port nothing listens on; mqadmin's local times back to epoch millis."""

from __future__ import annotations

import subprocess
from datetime import datetime

from typer.testing import CliRunner

from rmqcli.cli.main import app
from tests.support import ROOT
from tests.support.cli import RMQ, one_line_error, rmq_env
from tests.support.serve import free_port


def rmq(*args: str, env: dict[str, str] | None = None, code: int = 0) -> str:
    """``rmq ARGS`` in process; its exit code must be ``code``; returns stdout."""
    result = CliRunner().invoke(app, list(args), env=env)
    assert result.exit_code == code, (result.exit_code, result.output, result.stderr)
    return result.stdout


def rmq_fail(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """``rmq ARGS`` in process, which must fail with one line on stderr and no traceback."""
    result = CliRunner().invoke(app, list(args), env=env)
    assert result.exit_code != 0, result.output
    return result.exit_code, one_line_error(result.stderr)


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``rmq ARGS`` as a child process, with ``env`` added to its environment."""
    return run_together([*args], env=env)[0]


def run_together(
    *calls: list[str], env: dict[str, str] | None = None
) -> list[subprocess.CompletedProcess[str]]:
    """Each ``rmq ARGS`` of ``calls`` as a child process, all started at once (their order does
    not matter to what they answer), with ``env`` added to their environment."""
    procs = [
        subprocess.Popen(
            [*RMQ, *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=rmq_env(env),
        )
        for args in calls
    ]
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=30)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


def closed_port() -> int:
    """A loopback port nothing listens on."""
    return free_port()


def local_millis(text: str) -> int:
    """mqadmin's ``yyyy-MM-dd HH:mm:ss[,SSS]`` in local time, back to epoch millis."""
    pattern = "%Y-%m-%d %H:%M:%S,%f" if "," in text else "%Y-%m-%d %H:%M:%S"
    moment = datetime.strptime(text, pattern)
    return int(moment.timestamp()) * 1000 + moment.microsecond // 1000
