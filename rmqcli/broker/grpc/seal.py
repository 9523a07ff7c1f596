"""Sealed receipt handles: a handle the gRPC endpoint gives out carries a MAC, so that a forged
handle, or one given to another group or for another topic, is refused before the broker does any
work for it (rmq's own; issue 41).

A handle is the 5.1.1 proxy's ``ReceiptHandle.encode`` (9 space-separated fields: start offset,
retrieve time, invisible time, revive queue, topic type, broker name, queue id, offset, commit log
offset) with ``:<mac>`` after the last field: an HMAC-SHA256 (the first 16 bytes, base64url) over
the consumer group, the topic the call names and the 9 fields, with a key drawn at random when the
endpoint starts. The field count stays 9 and the 5.x clients pass a handle back as an opaque
string; a handle given out before a restart of ``rmq serve`` is refused (its message comes back
when its invisible time is up). The remoting POP (ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME) keeps
5.1.1's plain extra info: its callers are signed when ACL is on.

``Acked`` remembers the MACs of the last ``MAX_ACKED`` handles acked, so a handle acked again is
answered at once without another ack message (the proxy's client sees OK both times).
"""

from __future__ import annotations

import base64
import hmac
import os
from collections import OrderedDict

from rmqcli.broker.grpc import status as st

SEPARATOR = ":"
MAC_BYTES = 16
MAC_CHARS = 22  # base64url of 16 bytes, unpadded
MAX_ACKED = 65_536


def invalid() -> st.GrpcStatusError:
    return st.GrpcStatusError(st.INVALID_RECEIPT_HANDLE, "receipt handle is invalid")


class Sealer:
    """Seals and opens the receipt handles of one endpoint."""

    def __init__(self, key: bytes | None = None):
        self._key = key if key is not None else os.urandom(32)

    def _mac(self, group: str, topic: str, plain: str) -> str:
        data = f"{group}\n{topic}\n{plain}".encode("utf-8", "surrogatepass")
        digest = hmac.digest(self._key, data, "sha256")  # one call into OpenSSL's HMAC
        return base64.urlsafe_b64encode(digest[:MAC_BYTES]).rstrip(b"=").decode("ascii")

    def seal(self, plain: str, group: str, topic: str) -> str:
        """``plain`` (the 9 fields) with its MAC for ``group`` and ``topic``."""
        return f"{plain}{SEPARATOR}{self._mac(group, topic, plain)}"

    def open(self, handle: str, group: str, topic: str) -> tuple[str, str]:
        """The plain handle and its MAC; INVALID_RECEIPT_HANDLE unless sealed here for ``group`` and
        ``topic``. Constant work per call whatever the handle holds."""
        plain, sep, mac = handle.rpartition(SEPARATOR)
        if not sep or len(mac) != MAC_CHARS or len(handle) > 2048:
            raise invalid()
        if not hmac.compare_digest(mac, self._mac(group, topic, plain)):
            raise invalid()
        return plain, mac


class Acked:
    """The MACs of the handles acked last (at most ``MAX_ACKED``)."""

    def __init__(self, size: int = MAX_ACKED):
        self.size = size
        self._macs: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, mac: str) -> bool:
        return mac in self._macs

    def add(self, mac: str) -> None:
        self._macs[mac] = None
        if len(self._macs) > self.size:
            self._macs.popitem(last=False)
