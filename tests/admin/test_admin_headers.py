"""The typed request header classes of ``rmqcli.remoting.headers``: they behave as the keyword-only
value classes they declare, and their module stays cheap to import. The ext fields the admin
commands put on the wire are compared with the real mqadmin's in ``test_admin_headers_real.py``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rmqcli import errors
from rmqcli.remoting import headers as hd


def test_header_classes_are_keyword_only_values() -> None:
    a = hd.GetMaxOffsetRequestHeader(topic="t", queue_id=1)
    assert (
        a
        == hd.GetMaxOffsetRequestHeader(topic="t", queue_id=1)
        != hd.GetMaxOffsetRequestHeader(topic="t", queue_id=2)
    )
    assert repr(a) == "GetMaxOffsetRequestHeader(topic='t', queue_id=1, committed=None, bname=None)"
    with pytest.raises(TypeError):
        hd.GetMaxOffsetRequestHeader(topic="t")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        hd.GetMaxOffsetRequestHeader("t", 1)  # type: ignore[misc]
    with pytest.raises(TypeError):
        hash(a)
    with pytest.raises(AttributeError):
        a.queueId = 3  # type: ignore[attr-defined]
    assert hd.UpdateConsumerOffsetRequestHeader.from_ext_fields(
        {"consumerGroup": "g", "topic": "t", "queueId": "0", "commitOffset": "7"}
    ) == hd.UpdateConsumerOffsetRequestHeader(consumer_group="g", topic="t", queue_id=0, commit_offset=7)
    assert hd.HeaderError is errors.HeaderError and issubclass(hd.HeaderError, errors.RmqError)


def test_header_module_is_light() -> None:
    """No dataclass machinery at import: classes get their ``__init__`` and decoder on first use."""
    code = (
        "import sys, rmqcli.remoting.headers; print('dataclasses' in sys.modules, 'inspect' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
