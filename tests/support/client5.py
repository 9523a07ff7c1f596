"""The Apache RocketMQ 5.x Python client (PyPI ``rocketmq-python-client`` 5.1.2) in ``.venv-rmq5``
(``make test`` makes it): its interpreter, and the mark that skips a test without it. Its package
``rocketmq`` is not the C++ client's of the main virtual environment, so tests run it as a child
process."""

from __future__ import annotations

import subprocess

import pytest

from tests.support import ROOT

PYTHON5 = ROOT / ".venv-rmq5" / "bin" / "python"


def have_client5() -> bool:
    if not PYTHON5.exists():
        return False
    probe = subprocess.run([str(PYTHON5), "-c", "import rocketmq.v5"], capture_output=True, timeout=60)
    return probe.returncode == 0


needs_client5 = pytest.mark.skipif(not have_client5(), reason="no .venv-rmq5 with rocketmq-python-client")
