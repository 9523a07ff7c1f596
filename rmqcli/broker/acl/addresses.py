"""White-list address patterns of ``plain_acl.yml`` (``RemoteAddressStrategyFactory``, 4.9.x).

A pattern is one of:

* blank: matches nothing; ``*``, ``*.*.*.*`` or ``*:*:*:*:*:*:*:*``: matches every address;
* one address, IPv4 or IPv6 (IPv6 compared in full form);
* a comma-separated list of addresses, or ``192.168.1.{1,2,3}`` / ``fe80::{a,b}``;
* a range: the first field that is ``*`` or ``a-b`` (IPv4 decimal, IPv6 hex) bounds that field,
  the fields before it are fixed and every field after it must be ``*``: ``192.168.1.*``,
  ``192.168.*.*``, ``192.168.1.1-200``, ``10.1-10.*.*``.

A pattern that is none of these raises ``AclConfigError`` with the broker's wording.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

Matcher = Callable[[str], bool]

MATCH_ALL = frozenset({"*", "*.*.*.*", "*:*:*:*:*:*:*:*"})


class AclConfigError(ValueError):
    """An ACL file or request that the broker refuses (``AclException``)."""


def _exact(text: str) -> str | None:
    """The canonical (exploded, upper-case) form of one address, None if it is not one."""
    try:
        return ipaddress.ip_address(text.strip()).exploded.upper()
    except ValueError:
        return None


def _field_bounds(text: str, hexa: bool) -> tuple[int, int] | None:
    """``*`` or ``a-b`` as inclusive bounds; None for a fixed field."""
    top = 0xFFFF if hexa else 255
    if text == "*":
        return 0, top
    if "-" in text:
        low, _, high = text.partition("-")
        try:
            a, b = int(low, 16 if hexa else 10), int(high, 16 if hexa else 10)
        except ValueError:
            raise AclConfigError(
                f"RangeRemoteAddressStrategy netaddress examine scope Exception value {text} "
            ) from None
        if not (0 <= a <= b <= top) or not low:
            raise AclConfigError(
                "RangeRemoteAddressStrategy netaddress examine scope Exception "
                f"start is {low} , end is {high}"
            )
        return a, b
    return None


def _range(pattern: str) -> Matcher:
    hexa = ":" in pattern
    fields = pattern.split(":" if hexa else ".")
    if hexa:  # a range over an IPv6 address: expand the fixed head's "::" first
        if "::" in pattern:
            raise AclConfigError(f"Netaddress examine scope Exception netaddress is {pattern}")
    if len(fields) != (8 if hexa else 4):
        raise AclConfigError(f"Netaddress examine scope Exception netaddress is {pattern}")
    first = next(i for i, f in enumerate(fields) if _field_bounds(f.strip(), hexa) is not None)
    if first == 0 or any(f.strip() != "*" for f in fields[first + 1 :]):
        raise AclConfigError(f"Netaddress examine scope Exception netaddress is {pattern}")
    try:
        head = [int(f, 16 if hexa else 10) for f in fields[:first]]
    except ValueError:
        raise AclConfigError(f"Netaddress examine scope Exception netaddress is {pattern}") from None
    if any(not 0 <= h <= (0xFFFF if hexa else 255) for h in head):
        raise AclConfigError(f"Netaddress examine scope Exception netaddress is {pattern}")
    low, high = _field_bounds(fields[first].strip(), hexa) or (0, 0)

    def match(address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        if (ip.version == 6) != hexa:
            return False
        parts = [int(p, 16) for p in ip.exploded.split(":")] if hexa else list(ip.packed)
        return parts[:first] == head and low <= parts[first] <= high

    return match


def compile_pattern(pattern: str | None) -> Matcher:
    """The matcher of one white-list pattern (``getRemoteAddressStrategy``)."""
    text = (pattern or "").strip()
    if not text:
        return lambda address: False
    if text in MATCH_ALL:
        return lambda address: True
    if text.endswith("}"):
        head, brace, tail = text.partition("{")
        if not brace or not head:
            raise AclConfigError(
                f"MultipleRemoteAddressStrategy netaddress examine scope Exception netaddress {text}"
            )
        members = [head + part.strip() for part in tail[:-1].split(",") if part.strip()]
        return _members(members)
    if "," in text:
        return _members([part for part in text.split(",") if part.strip()])
    if "*" in text or "-" in text:
        return _range(text)
    return _members([text])


def _members(addresses: list[str]) -> Matcher:
    canonical = set()
    for address in addresses:
        exact = _exact(address)
        if exact is None:
            raise AclConfigError(f"Netaddress examine Exception netaddress is {address.strip()}")
        canonical.add(exact)
    return lambda address: _exact(address) in canonical
