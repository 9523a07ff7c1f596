"""``rmq serve`` with its gRPC endpoint and one topic, and a raw grpcio stub of its
``MessagingService`` (the stubs rmq generates), for the tests that call the endpoint by hand."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from rmqcli.broker.grpc.stubs import load
from tests.support.cli import run_rmq
from tests.support.serve import ServeProcess, write_conf


@contextmanager
def grpc_server(tmp: Path, topic: str, extra: list[str] | None = None) -> Iterator[ServeProcess]:
    """``rmq serve`` on free ports with gRPC on, ``topic`` created; stopped cleanly at the end."""
    serve = ServeProcess(tmp / "store", write_conf(tmp / "broker.conf"), extra=extra, grpc=True).start()
    try:
        run_rmq("updateTopic", "-n", serve.namesrv, "-c", "DefaultCluster", "-t", topic, check=True)
        yield serve
    finally:
        serve.stop()


@contextmanager
def messaging_stub(server: ServeProcess) -> Iterator[object]:
    with grpc.insecure_channel(server.grpc) as channel:
        yield load().service_grpc.MessagingServiceStub(channel)


def server_fixture(topic: str, extra: list[str] | None = None) -> Callable[..., Iterator[ServeProcess]]:
    """A module-scoped fixture ``server``: ``grpc_server`` for the module's ``topic``."""

    def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
        with grpc_server(tmp_path_factory.mktemp("grpc"), topic, extra) as serve:
            yield serve

    return pytest.fixture(scope="module", name="server")(server)


def stub_fixture() -> Callable[..., Iterator[object]]:
    """A module-scoped fixture ``stub``: the ``messaging_stub`` of the module's ``server``."""

    def stub(server: ServeProcess) -> Iterator[object]:
        with messaging_stub(server) as made:
            yield made

    return pytest.fixture(scope="module", name="stub")(stub)
