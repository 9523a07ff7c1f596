"""The real Apache RocketMQ 5.1.1 proxy of ``../shared/rocketmq-5.1.1-proxy`` (README there), the
gRPC endpoint 5.x clients use, in local mode (a Broker in the proxy's JVM) beside the base kit's
NameServer, on free loopback ports: the oracle of the gRPC tests and benchmarks. Skipped like the
other kits: without Java 17, the base kit or the proxy kit."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support import SHARED
from tests.support.components import missing
from tests.support.oracle import Jvm, broker_port
from tests.support.oracle5 import KIT5, kit5_env
from tests.support.serve import free_port

PROXY_KIT = SHARED / "rocketmq-5.1.1-proxy"
HAVE_PROXY = missing("proxy5") is None and missing("java5") is None
WHY_NO_PROXY = "needs Java 17, ../shared/rocketmq-5.1.1 and ../shared/rocketmq-5.1.1-proxy"


@dataclass(frozen=True)
class RealProxy:
    namesrv: str  # host:port of the 5.1.1 NameServer
    broker: str  # host:port of the broker inside the proxy's JVM (remoting)
    endpoint: str  # host:port of the gRPC endpoint
    remoting: str  # host:port of the proxy's own remoting port
    home: Path  # where its state lives: the generated configs, store/, logs/
    pid: int  # the proxy JVM's (the launcher execs java)

    @property
    def logs(self) -> Path:
        return self.home / "run" / "logs"

    def env(self) -> dict[str, str]:
        """An environment for the base kit's tools (``mqadmin``) beside this proxy."""
        return kit5_env(self.home)


@contextmanager
def real_proxy(
    home: Path,
    broker_settings: dict[str, str] | None = None,
    proxy_settings: dict[str, str] | None = None,
    java_opts: str = "",
) -> Iterator[RealProxy]:
    """The 5.1.1 NameServer and proxy (local mode) under ``home``. ``broker_settings`` are more
    broker.conf lines; ``proxy_settings`` more ``rmq-proxy.json`` fields, each value JSON text
    (``{"enableACL": "true"}``); ``java_opts`` goes to the JVM (``JAVA_OPT_EXT``), e.g.
    ``-Drocketmq.home.dir=...`` for a ``conf/plain_acl.yml`` of the test's own. Killed at the end:
    the store is thrown away, no 15 s shutdown."""
    home.mkdir(parents=True, exist_ok=True)
    ns_port, grpc_port, remoting_port, port = free_port(), free_port(), free_port(), broker_port()
    ns = f"127.0.0.1:{ns_port}"
    env = kit5_env(home)
    env["PROXY_STATE_DIR"] = str(home / "state")
    env["PROXY_LOG_DIR"] = str(home / "run" / "logs")
    if java_opts:
        env["JAVA_OPT_EXT"] = java_opts
    args = [str(PROXY_KIT / "bin" / "proxy"), "-p", str(grpc_port), "-r", str(remoting_port), "-b", str(port)]
    args += ["-n", ns, "--fresh"]
    if broker_settings:
        extra = home / "extra-broker.conf"
        extra.write_text("".join(f"{k}={v}\n" for k, v in broker_settings.items()))
        args += ["-c", str(extra)]
    if proxy_settings:
        fields = home / "extra-proxy.json"
        fields.write_text("".join(f'"{k}": {v}\n' for k, v in proxy_settings.items()))
        args += ["-j", str(fields)]
    namesrv = Jvm([str(KIT5 / "bin" / "namesrv"), "-p", str(ns_port)], home / "namesrv.out", env)
    proxy = Jvm(args, home / "proxy.out", {**env, "ORACLE5_STATE_DIR": str(home / "ns-state")})
    try:
        namesrv.wait_for("The Name Server boot success")
        proxy.wait_for("rocketmq-proxy startup successfully", timeout=120)
        local = "127.0.0.1"
        yield RealProxy(
            ns, f"{local}:{port}", f"{local}:{grpc_port}", f"{local}:{remoting_port}", home, proxy.proc.pid
        )
    finally:
        proxy.proc.kill()
        namesrv.proc.kill()
        proxy.wait()
        namesrv.wait()
