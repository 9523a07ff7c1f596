"""The real Apache RocketMQ 5.1.1 of ``../shared/rocketmq-5.1.1`` (README there): a NameServer and
one ASYNC_MASTER on free loopback ports, for the tests that compare rmq's 5.x features (POP) with
it. Skipped like the 4.9.8 tests: without Java 17 or the kit."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support import SHARED
from tests.support.components import missing
from tests.support.oracle import RealCluster, broker_port, kit_cluster, kit_env, write_broker_conf
from tests.support.serve import free_port

KIT5 = SHARED / "rocketmq-5.1.1"
HAVE_KIT5 = missing("java5") is None


def kit5_env(home: Path) -> dict[str, str]:
    env = kit_env(home)
    env["ORACLE5_STATE_DIR"] = str(home / f"state5-{time.monotonic_ns()}")
    return env


@contextmanager
def real_cluster5(
    home: Path,
    cluster: str = "DefaultCluster",
    broker: str = "broker-a",
    clean_stop: bool = False,
    **settings: str,
) -> Iterator[RealCluster]:
    """The 5.1.1 NameServer and broker; ``settings`` are more ``broker.conf`` lines. Killed at the
    end (its store thrown away, no 15 s shutdown), or with ``clean_stop`` stopped by SIGTERM (the
    broker flushes its files: a store to read afterwards)."""
    ns_port, port = free_port(), broker_port()
    ns = f"127.0.0.1:{ns_port}"
    write_broker_conf(home, ns, port, cluster, broker, **{"autoCreateTopicEnable": "true", **settings})
    env = kit5_env(home)
    with kit_cluster(KIT5, home, ns_port, port, lambda: env, kill=not clean_stop) as cluster_:
        yield cluster_
