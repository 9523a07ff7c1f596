"""A server on the port that is not RocketMQ's (an HTTP, SSH or TLS server, a cut frame): ``rmq``'s
admin commands name it so in one line, exit 5; a RocketMQ frame with a bad header keeps its precise
error."""

from __future__ import annotations

import pytest

from tests.support.cli import one_line_error
from tests.support.foreign import HttpLike


@pytest.mark.parametrize(
    ("answer", "shown"),
    [
        (b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n", "'HTTP/1.1 400 Bad Request'"),
        (b"SSH-2.0-OpenSSH_9.6\r\n", "'SSH-2.0-OpenSSH_9.6'"),
        (b"\x15\x03\x03\x00\x02\x02\x32", "bytes 15 03 03 00 02 02 32"),  # a TLS alert
        (b"\x00\x00\x01", "bytes 00 00 01"),  # a piece of a length word, then the end
    ],
    ids=["http", "ssh", "tls", "cut"],
)
def test_a_non_rocketmq_answer_is_named_so(answer: bytes, shown: str, rmq) -> None:
    server = HttpLike(answer)
    try:
        result = rmq("clusterList", "-n", server.addr)
    finally:
        server.close()
    assert result.exit_code == 5
    assert (
        one_line_error(result.stderr)
        == f"rmq: error: not a RocketMQ server at {server.addr}: it answered {shown}\n"
    )


def test_a_rocketmq_shaped_frame_keeps_its_precise_error(rmq) -> None:
    """A length word, serialize type JSON and a header length that fits: a RocketMQ frame whose
    header is bad, which is reported as such, not as another kind of server."""
    server = HttpLike(b"\x00\x00\x00\x10\x00\x00\x00\x05{bad}xxxxxxx")
    try:
        result = rmq("clusterList", "-n", server.addr)
    finally:
        server.close()
    assert result.exit_code == 5 and one_line_error(result.stderr).startswith(f"rmq: error: {server.addr}: ")
    assert "not a RocketMQ server" not in result.stderr
