"""``rmqcli.netaddr.is_loopback``: the check behind the listen warnings of ``rmq serve`` and
``rmq exporter``; literal addresses, bracketed IPv6 and a name the resolver answers."""

from __future__ import annotations

import pytest

from rmqcli.netaddr import is_loopback


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("[::1]", True), (" 127.0.0.1 ", True),
     ("localhost", True), ("", False), ("*", False), ("0.0.0.0", False), ("::", False), ("[::]", False),
     ("10.1.2.3", False), ("192.168.0.1", False), ("fe80::1", False)],
)  # fmt: skip
def test_only_addresses_that_stay_on_this_machine_are_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
