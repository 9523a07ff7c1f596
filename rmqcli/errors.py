"""The one error hierarchy of rmq; each class has a stable process exit code (see README).

Design note: every error rmq reports is an ``RmqError`` subclass that carries its exit code
(``exit_code``, listed in ``EXIT_CODES``) and a message of one line that says where: the file
and byte offset for data (``CorruptDataError(message, path, offset)``), the host and port for
the network (``NetworkError(f"{addr}: ...")``), the store, file or name for the rest. The CLI
prints that line and exits with that code; no layer below it prints or exits. This is what to
keep and follow: a new error is a subclass here with a code from ``EXIT_CODES`` (a new code
only with a new line there and in the README), raised with its place in the message.
"""

from __future__ import annotations


class RmqError(Exception):
    """Base of every error rmq reports to its user as one line."""

    exit_code = 1


class UsageError(RmqError):
    """Wrong flags or arguments."""

    exit_code = 2


class NotFoundError(RmqError):
    """A store, file, topic, queue or key that does not exist."""

    exit_code = 3


class CorruptDataError(RmqError):
    """Bytes that do not follow the RocketMQ layout; names the file and byte offset."""

    exit_code = 4

    def __init__(self, message: str, path: str | None = None, offset: int | None = None):
        self.path = path
        self.offset = offset
        where = ""
        if path is not None:
            where = f"{path}" + (f" at byte {offset}" if offset is not None else "") + ": "
        super().__init__(where + message)


class UnsafeNameError(CorruptDataError):
    """A name (a topic read from a CommitLog record, a request, an option) that cannot name a
    directory inside the store: it would lead out of it, or the filesystem would refuse it."""

    def __init__(self, name: str, reason: str, path: str | None = None, offset: int | None = None):
        self.name = name
        self.reason = reason
        super().__init__(f"topic {name!r} cannot name a consume-queue directory: {reason}", path, offset)

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return type(self), (self.name, self.reason, self.path, self.offset)


class NetworkError(RmqError):
    """An unreachable host, a broken connection, a timeout."""

    exit_code = 5


def bind_error(name: str, host: str, port: int, exc: OSError) -> NetworkError:
    """A listener that could not bind (a port in use, ...): one line naming it and the address."""
    import os

    reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return NetworkError(f"{name}: cannot listen on {where}: {reason}")


class HeaderError(RmqError):
    """A custom header that cannot be decoded (``RemotingCommandException``); a broker answers
    ``SYSTEM_ERROR`` with this message, a client reports the peer as broken."""

    exit_code = 5


class BrokerError(RmqError):
    """A broker or name server answered with an error code."""

    exit_code = 6


class BrokerNotFoundError(BrokerError):
    """A broker or name server answered that the topic, group or message asked for does not
    exist (TOPIC_NOT_EXIST, QUERY_NOT_FOUND, SUBSCRIPTION_GROUP_NOT_EXIST, NO_MESSAGE): exit 3,
    as every "not found" of rmq."""

    exit_code = 3


class StoreBusyError(RmqError):
    """The store is in use: a broker holds its ``lock``, or another rmq command is changing it."""

    exit_code = 7


EXIT_CODES = {
    0: "success",
    1: "unexpected error",
    2: "usage error (wrong flags or arguments)",
    3: "not found (store, file, topic, queue, key; also a broker's TOPIC_NOT_EXIST, QUERY_NOT_FOUND, ...)",
    4: "corrupt data (the message names the file and byte offset)",
    5: "network error (unreachable host, timeout)",
    6: "broker error (the broker's response code and remark)",
    7: "store busy (a broker holds its lock, or another rmq command is changing it)",
}
