"""``rmq serve``'s gRPC options, checked before anything of grpc is imported."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rmqcli.errors import UsageError

DEFAULT_PORT = 8081  # ProxyConfig.grpcServerPort


@dataclass(frozen=True)
class GrpcOptions:
    port: int = DEFAULT_PORT  # 0: no gRPC endpoint
    host: str = "127.0.0.1"
    cert: Path | None = None  # PEM certificate chain; with ``key``: TLS only
    key: Path | None = None

    @property
    def tls(self) -> bool:
        return self.cert is not None


def check_options(port: int, cert: Path | None, key: Path | None) -> None:
    """A port number (0: off), and a certificate with its key or neither (one-line usage errors)."""
    if not 0 <= port < 65536:
        raise UsageError(f"--grpc-port: bad port {port}")
    if (cert is None) != (key is None):
        raise UsageError("--grpc-cert and --grpc-key go together: give both or neither")
    for flag, path in (("--grpc-cert", cert), ("--grpc-key", key)):
        if path is not None and not path.is_file():
            raise UsageError(f"{flag}: {path}: no such file")
