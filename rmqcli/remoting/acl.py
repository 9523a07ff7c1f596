"""Request signatures of RocketMQ's plain ACL (``AclClientRPCHook``, ``AclUtils``, 4.9.x).

A signed request carries ``AccessKey``, ``Signature`` and, for temporary credentials,
``SecurityToken`` among its ext fields. The signature is ``Base64(HmacSHA1(secretKey, content))``
where ``content`` is the values of the ext fields sorted by key (``TreeMap``), without
``Signature`` itself and the unique-key query flag, concatenated in UTF-8, then the body's bytes.
The broker rebuilds the same content from what it received (``PlainAccessValidator.parse``), so
the client and the server share this one function.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rmqcli.remoting.codec import RemotingCommand

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"  # MixAll: added after signing, never signed
_UNSIGNED = frozenset({SIGNATURE, UNIQUE_MSG_QUERY_FLAG})


@dataclass(frozen=True)
class Credentials:
    """``SessionCredentials``: an account's keys (and a token for temporary credentials)."""

    access_key: str
    secret_key: str
    security_token: str | None = None


def _java_order(key: str) -> bytes:
    """``TreeMap<String, ...>`` order: ``String.compareTo``, UTF-16 code units."""
    return key.encode("utf-16-be", "surrogatepass")


def signed_content(ext_fields: Mapping[str, str], body: bytes | None) -> bytes:
    """``AclUtils.combineRequestContent``: sorted values (no keys), then the body."""
    values = "".join(ext_fields[k] for k in sorted(ext_fields, key=_java_order) if k not in _UNSIGNED)
    return values.encode("utf-8", "surrogatepass") + (body or b"")


def calc_signature(content: bytes, secret_key: str) -> str:
    """``AclUtils.calSignature``: Base64 of HmacSHA1 keyed with the secret key's UTF-8 bytes."""
    digest = hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def sign(request: RemotingCommand, credentials: Credentials) -> None:
    """``AclClientRPCHook.doBeforeRequest``: add AccessKey (SecurityToken) and Signature."""
    fields = request.ext_fields
    fields.pop(SIGNATURE, None)
    fields[ACCESS_KEY] = credentials.access_key
    if credentials.security_token:
        fields[SECURITY_TOKEN] = credentials.security_token
    fields[SIGNATURE] = calc_signature(signed_content(fields, request.body), credentials.secret_key)
