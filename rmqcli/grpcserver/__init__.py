"""rmq serve's own HTTP/2 gRPC server (RFC 9113, gRPC's PROTOCOL-HTTP2.md) on asyncio or uvloop.

``Server(handlers)`` serves ``"/package.Service/Method"`` -> ``MethodHandler(kind, behaviour,
request_deserializer, response_serializer)``; the behaviours get a context that mimics grpc.aio's
``ServicerContext`` (``calls.Call``). About a quarter of grpc.aio's server CPU per unary call.
"""

from rmqcli.grpcserver.calls import AbortError, Call, Kind, MethodHandler, StatusCode
from rmqcli.grpcserver.server import Server, server_ssl_context

__all__ = ["AbortError", "Call", "Kind", "MethodHandler", "Server", "StatusCode", "server_ssl_context"]
