"""``apache.rocketmq.v2.Code`` values and the 5.1 proxy's mapping of failures to a ``Status``
(``ResponseBuilder``, ``GrpcProxyException``).

Errors are not gRPC errors: every response carries ``status {code, message}``. A broker answer
(remoting response code) maps as ``ResponseBuilder.RESPONSE_CODE_MAPPING`` (SUCCESS -> OK,
SYSTEM_BUSY -> TOO_MANY_REQUESTS, REQUEST_CODE_NOT_SUPPORTED -> NOT_IMPLEMENTED,
SUBSCRIPTION_GROUP_NOT_EXIST -> CONSUMER_GROUP_NOT_FOUND, anything else INTERNAL_SERVER_ERROR);
an unexpected exception is INTERNAL_SERVER_ERROR with a one-line description (logged with its
traceback, at most 10 a minute). What the proxy raises as a ``ProxyException`` (a message type
conflict, an expired receipt handle, ...) reaches the client wrapped in a ``GrpcProxyException(cause)``,
whose message is the cause's ``toString()``: the class name, then the text (seen with the real
5.1.1 proxy); such errors say ``wrapped``.
"""

from __future__ import annotations

import logging
from typing import Any

from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.remoting.server.connection import LogLimiter

log = logging.getLogger(__name__)

# definition.proto's enum Code (the values that rmq answers; tests check them against the stubs)
OK = 20000
MULTIPLE_RESULTS = 30000
BAD_REQUEST = 40000
ILLEGAL_TOPIC = 40002
ILLEGAL_CONSUMER_GROUP = 40003
ILLEGAL_MESSAGE_TAG = 40004
ILLEGAL_MESSAGE_KEY = 40005
ILLEGAL_MESSAGE_GROUP = 40006
ILLEGAL_MESSAGE_PROPERTY_KEY = 40007
INVALID_TRANSACTION_ID = 40008
ILLEGAL_MESSAGE_ID = 40009
ILLEGAL_DELIVERY_TIME = 40012
INVALID_RECEIPT_HANDLE = 40013
MESSAGE_PROPERTY_CONFLICT_WITH_TYPE = 40014
UNRECOGNIZED_CLIENT_TYPE = 40015
MESSAGE_CORRUPTED = 40016
CLIENT_ID_REQUIRED = 40017
FORBIDDEN = 40300
NOT_FOUND = 40400
TOPIC_NOT_FOUND = 40402
CONSUMER_GROUP_NOT_FOUND = 40403
MESSAGE_BODY_TOO_LARGE = 41301
TOO_MANY_REQUESTS = 42900
MESSAGE_PROPERTIES_TOO_LARGE = 43101
INTERNAL_SERVER_ERROR = 50001
HA_NOT_AVAILABLE = 50002
NOT_IMPLEMENTED = 50100
PROXY_TIMEOUT = 50400
MASTER_PERSISTENCE_TIMEOUT = 50401
SLAVE_PERSISTENCE_TIMEOUT = 50402

CODE_NAMES = {value: name for name, value in globals().items() if name.isupper() and isinstance(value, int)}

REMOTING_CODES = {
    RS.SUCCESS: OK,
    RS.SYSTEM_BUSY: TOO_MANY_REQUESTS,
    RS.REQUEST_CODE_NOT_SUPPORTED: NOT_IMPLEMENTED,
    RS.SUBSCRIPTION_GROUP_NOT_EXIST: CONSUMER_GROUP_NOT_FOUND,
}


_failures = LogLimiter(10, "about failed gRPC calls")  # a client cannot flood the log


PROXY_EXCEPTION = "org.apache.rocketmq.proxy.common.ProxyException: "  # the wrapped cause's class


class GrpcStatusError(Exception):
    """A request answered with ``code`` and ``message`` (``GrpcProxyException``); ``wrapped``: a
    ``ProxyException`` of the proxy, whose status text starts with its class name."""

    def __init__(self, code: int, message: str, wrapped: bool = False):
        super().__init__(message)
        self.code = code
        self.message = message
        self.wrapped = wrapped

    @property
    def status_text(self) -> str:
        """The status message the client reads."""
        return PROXY_EXCEPTION + self.message if self.wrapped else self.message


def from_remoting(code: int) -> int:
    """``ResponseBuilder.buildCode``: the Code of a broker's remoting response code."""
    return REMOTING_CODES.get(code, INTERNAL_SERVER_ERROR)


def make(definition: Any, code: int, message: str | None = None) -> Any:
    """A ``Status``; the message defaults to the code's name, as the proxy writes it. One with the
    default message is made once per code and shared: callers put it into a response (a copy),
    never change it."""
    if message is None:
        key = (definition, code)
        found = _defaults.get(key)
        if found is None:
            found = _defaults[key] = definition.Status(code=code, message=CODE_NAMES.get(code, str(code)))
        return found
    return definition.Status(code=code, message=message)


_defaults: dict[tuple[Any, int], Any] = {}  # (definition module, code): its Status


def of_exception(definition: Any, exc: BaseException, what: str) -> Any:
    """``ResponseBuilder.buildStatus(Throwable)``: a ``GrpcStatusError`` as it says, anything else
    INTERNAL_SERVER_ERROR (logged once with its traceback, answered in one line)."""
    if isinstance(exc, GrpcStatusError):
        return make(definition, exc.code, exc.status_text)
    suffix = _failures.admit()
    if suffix is not None:
        log.error("gRPC %s failed%s", what, suffix, exc_info=exc)
    text = str(exc).splitlines()[0] if str(exc) else ""
    return make(
        definition, INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    )
