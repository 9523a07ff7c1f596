"""The Apache RocketMQ 5.x Python client (PyPI ``rocketmq-python-client`` 5.1.2) in ``.venv-rmq5``
(``make test`` makes it): its interpreter, and the mark that skips a test without it. Its package
``rocketmq`` is not the C++ client's of the main virtual environment, so tests run it as a child
process."""

from __future__ import annotations

import pytest

from tests.support import ROOT
from tests.support.components import missing

PYTHON5 = ROOT / ".venv-rmq5" / "bin" / "python"


def have_client5() -> bool:
    return missing("client5") is None


needs_client5 = pytest.mark.client5
