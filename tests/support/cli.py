"""Two ways to run ``rmq``: in process through typer's runner, or as the installed command in a
child process (what an operator runs: real exit codes, real signals, its own environment)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from typer.testing import CliRunner, Result

from rmqcli.cli.main import app
from tests.support import ROOT

RMQ = [sys.executable, "-m", "rmqcli.cli.main"]  # the installed package's ``rmq``


def invoke_rmq(*args: str, check: bool = False) -> Result:
    """``rmq ARGS`` in this process; stdout and stderr apart; ``check`` asserts exit code 0."""
    result = CliRunner().invoke(app, list(args))
    if check:
        assert result.exit_code == 0, result.output
    return result


def rmq_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """This environment less rmq's own settings (``RMQ_*``, ``ROCKETMQ_HOME``), plus ``env``."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("RMQ_", "ROCKETMQ_HOME"))}
    environ.update(env or {})
    return environ


def run_rmq(
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 600,
    check: bool = False,
    cwd: os.PathLike | str = ROOT,
) -> subprocess.CompletedProcess[str]:
    """``rmq ARGS`` as a child process (in the repository unless ``cwd``); ``check`` asserts exit
    code 0."""
    proc = subprocess.run(
        [*RMQ, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=rmq_env(env)
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def one_line_error(err: str) -> str:
    """``err`` is exactly one line and no traceback (DESIGN.md: every failure is one line)."""
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def rmq_json(*args: str) -> object:
    """The one JSON document ``rmq ARGS`` prints (exit code 0)."""
    return json.loads(run_rmq(*args, check=True).stdout)


def rmq_jsonl(*args: str) -> list[dict]:
    """The JSON lines ``rmq ARGS`` prints (exit code 0)."""
    return [json.loads(line) for line in run_rmq(*args, check=True).stdout.split("\n") if line]
