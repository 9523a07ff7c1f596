"""``rmq serve``: a NameServer and a Broker in one asyncio process over one store directory.

Start-up is ``BrokerStartup`` + ``DefaultMessageStore.load/start``: refuse a store whose ``lock``
a live process holds; finish or roll back an interrupted ``rmq`` change; run the broker's recovery
(``rmqcli.ops.recover``: abnormal when ``abort`` exists) and apply it; open a ``StoreWriter`` (it
takes the lock and creates ``abort``); listen; register with the name servers. SIGTERM/SIGINT stop
it cleanly: unregister, flush, persist the config files, remove ``abort``, release the lock.

The NameServer and the Broker share one ``ServerLimits`` (``rmqcli.remoting.server.connection``): the bytes
of partly received frames and the open connections, set by ``--max-buffered-bytes`` and
``--max-connections`` or by broker.conf's ``rmqMaxPendingFrameBytes`` and ``rmqMaxConnections``
(rmq's own keys; a RocketMQ broker ignores them).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import signal
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from rmqcli.broker.acl.setup import guard_namesrv, open_acl
from rmqcli.broker.config import BrokerConfig
from rmqcli.broker.controller import BrokerController
from rmqcli.broker.services.retention import drill_usage
from rmqcli.errors import NetworkError, RmqError, UsageError
from rmqcli.namesrv.server import NameServer, default_config
from rmqcli.remoting.server.connection import MAX_CONNECTIONS, MAX_PENDING_FRAME_BYTES, Server, ServerLimits
from rmqcli.store.retention import disk_used_ratio
from rmqcli.store.write.messages import Host

if TYPE_CHECKING:
    from rmqcli.broker.grpc.server import GrpcEndpoint

log = logging.getLogger(__name__)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's event loop where it is installed (a dependency off Windows), else asyncio's.

    A sync send is one round trip, and uvloop's reads and writes in C shorten the server's part
    of it: about 10% more sends per second from one client thread (``make bench``)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


@dataclass
class ServeOptions:
    store: Path
    config: BrokerConfig
    listen: str = "127.0.0.1"
    namesrv_port: int = 9876
    run_namesrv: bool = True
    namesrv_addrs: tuple[str, ...] = ()
    max_pending_bytes: int = MAX_PENDING_FRAME_BYTES
    max_connections: int = MAX_CONNECTIONS
    namesrv_config: dict[str, str] | None = None  # NameServer keys of the --config file (namesrv.SETTINGS)
    disk_usage_file: Path | None = None  # --disk-usage-from: the clean-up's usage figure, for drills
    grpc_port: int = 0  # the gRPC endpoint (rmqcli.broker.grpc); 0: none (the command's default is 8081)
    grpc_listen: str = "127.0.0.1"
    grpc_cert: Path | None = None  # with grpc_key: TLS
    grpc_key: Path | None = None
    vip_port: int | None = None  # the VIP channel; None: listenPort - 2 (fastListenPort); 0: none


PENDING_BYTES_KEY = "rmqMaxPendingFrameBytes"
CONNECTIONS_KEY = "rmqMaxConnections"
ROOT_DIR_KEY = "storePathRootDir"


def unimplemented_keys(props: Mapping[str, str]) -> list[str]:
    """The keys of broker.conf that rmq does not implement (a broker's other settings): ``rmq
    serve`` names them once at start rather than drop them silently. ``storePathRootDir`` is not one
    (``root_dir_warning``)."""
    from rmqcli.broker.acl.brokerkeys import PROPERTY_NAMES as SIGNING_KEYS
    from rmqcli.broker.acting.config import implemented as acting_keys
    from rmqcli.broker.config import PROPERTY_NAMES as BROKER_KEYS
    from rmqcli.broker.ha.config import PROPERTY_NAMES as HA_KEYS
    from rmqcli.broker.pop.config import PROPERTY_NAMES as POP_KEYS
    from rmqcli.broker.timer.config import PROPERTY_NAMES as TIMER_KEYS
    from rmqcli.namesrv.server import SETTINGS as NAMESRV_KEYS
    from rmqcli.store.retention import PROPERTY_NAMES as RETENTION_KEYS
    from rmqcli.store.settings import PROPERTY_NAMES as STORE_KEYS

    known = {
        *BROKER_KEYS,
        *HA_KEYS,
        *STORE_KEYS,
        *RETENTION_KEYS,
        *NAMESRV_KEYS,
        *POP_KEYS,
        *TIMER_KEYS,
        *SIGNING_KEYS,
        PENDING_BYTES_KEY,
        CONNECTIONS_KEY,
    }
    known |= acting_keys(props)
    known.add(ROOT_DIR_KEY)
    unknown = [key for key in props if key not in known]
    if props.get("notifyMinBrokerIdChanged", "false").strip().lower() == "true":
        unknown.append("notifyMinBrokerIdChanged")  # the NameServer's pushes (905) are not implemented
    return sorted(unknown)


def root_dir_warning(props: Mapping[str, str], store: Path) -> str | None:
    """broker.conf's ``storePathRootDir`` when it names another directory than STORE, which is served."""
    given = props.get(ROOT_DIR_KEY, "").strip()
    if not given or Path(given).absolute().resolve() == store.absolute().resolve():
        return None
    return (
        f"rmq serve: warning: broker.conf: {ROOT_DIR_KEY}={given} is not the STORE argument; serving {store}"
    )


def serve_limits(
    props: Mapping[str, str], max_pending_bytes: int | None, max_connections: int | None
) -> tuple[int, int]:
    """The frame budget and the connection cap: the flags, else broker.conf's keys, else the
    defaults (256 MiB, 10,000). Each must be a positive integer."""
    chosen = []
    for flag, key, value, default in (
        ("--max-buffered-bytes", PENDING_BYTES_KEY, max_pending_bytes, MAX_PENDING_FRAME_BYTES),
        ("--max-connections", CONNECTIONS_KEY, max_connections, MAX_CONNECTIONS),
    ):
        where = flag
        if value is None and key in props:
            where = f"broker.conf: {key}"
            try:
                value = int(props[key].strip())
            except ValueError:
                raise UsageError(f"{where}={props[key]!r} is not a number") from None
        if value is None:
            value = default
        if value <= 0:
            raise UsageError(f"{where}: must be above 0, not {value}")
        chosen.append(value)
    return chosen[0], chosen[1]


def acl_enabled(config: BrokerConfig, props: Mapping[str, str]) -> bool:
    """``aclEnable`` of broker.conf (``BrokerConfig.aclEnable``, default false)."""
    value = getattr(config, "acl_enable", None)
    if value is not None:
        return bool(value)
    return props.get("aclEnable", "false").strip().lower() == "true"


def is_loopback(host: str) -> bool:
    """Whether listening on ``host`` reaches only this machine (every address it names is loopback)."""
    host = host.strip().strip("[]")
    if host in ("", "0.0.0.0", "::", "*"):
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    addresses = {info[4][0].split("%")[0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)


def exposure_warning(listen: str, acl: bool) -> str | None:
    """The one line ``rmq serve`` prints when it listens beyond loopback without ACL."""
    if acl or is_loopback(listen):
        return None
    return (
        f"rmq serve: warning: listening on {listen or '*'} without aclEnable=true: "
        "anyone who can connect may delete topics and data"
    )


def raise_open_file_limit(connections: int) -> None:
    """Lift the soft limit of open files toward the hard one, so that the connection cap, not the
    system, is what refuses clients (the store's files and the listeners take some too)."""
    try:
        import resource
    except ImportError:  # not on Windows
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = connections + 1024
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        except (ValueError, OSError):
            log.info("cannot raise the open-file limit from %d to %d", soft, want)


@dataclass
class Recovered:
    """What start-up recovery did: its mode and how many plan steps it applied."""

    mode: str
    steps: int
    backup: Path | None
    index_from: int | None = None  # the index is rebuilt from here behind the CommitLog (indexbehind)


def recover_store(root: Path, config: BrokerConfig) -> Recovered:
    """Lock check, interrupted-change clean-up and the broker's recovery, applied."""
    from rmqcli.ops import recover as ops
    from rmqcli.ops.safety import ensure_unlocked, finish_interrupted
    from rmqcli.store import Store

    root.mkdir(parents=True, exist_ok=True)
    ensure_unlocked(root)
    finish_interrupted(root)
    store = Store(root, config.store)
    if not store.abort_exists and not store.commitlog.files and not store.consumequeue_dir.exists():
        store.close()
        return Recovered("new", 0, None)  # a new store: nothing to recover
    try:
        result = ops.stage_recover(store, index_later=True)
    finally:
        store.close()
    if result.plan.empty:
        ops.discard(result)
        return Recovered(result.mode, 0, None, result.index_from)
    backup = ops.apply_recover(root, result, ["serve", str(root)])
    return Recovered(result.mode, len(result.plan.steps), backup, result.index_from)


def effective_config(opts: ServeOptions) -> BrokerConfig:
    """The broker's address: ``brokerIP1``, else the listen address (127.0.0.1 for a wildcard)."""
    config = opts.config
    ip = config.broker_ip1 or ("127.0.0.1" if opts.listen in ("", "0.0.0.0", "::") else opts.listen)
    return replace(config, broker_ip1=ip)


def namesrv_addrs(opts: ServeOptions) -> list[str]:
    if opts.namesrv_addrs:
        return list(opts.namesrv_addrs)
    if opts.config.namesrv_addr:
        return [a.strip() for a in opts.config.namesrv_addr.split(";") if a.strip()]
    if opts.run_namesrv:
        host = "127.0.0.1" if opts.listen in ("", "0.0.0.0", "::") else opts.listen
        return [f"{host}:{opts.namesrv_port}"]
    return []


async def listen(server: Server, host: str, port: int) -> None:
    """``server.start``; a port in use (or any refusal to bind) is a ``NetworkError`` naming the
    server and the address, as ``NettyRemotingServer.start`` fails with a ``BindException``."""
    try:
        await server.start(host, port)
    except OSError as exc:
        reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        raise NetworkError(f"{server.name}: cannot listen on {where}: {reason}") from None


async def start_ha(controller: BrokerController, host: str) -> None:
    """The HA port of a master (a port in use is a ``NetworkError`` naming it), or a slave's client."""
    try:
        await controller.start_ha()
    except OSError as exc:
        reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
        port = controller.config.ha.ha_listen_port
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        raise NetworkError(f"HA: cannot listen on {where}: {reason}") from None


async def start_grpc(controller: BrokerController, opts: ServeOptions) -> GrpcEndpoint:
    """The gRPC endpoint of the 5.x clients (``rmqcli.broker.grpc``; grpc is imported only here).
    grpc's own log lines (its C core writes to stderr) only with ``--verbose``: a port in use is
    said once, in rmq's line."""
    if not logging.getLogger().isEnabledFor(logging.INFO):
        os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    try:
        from rmqcli.broker.grpc.server import GrpcOptions, start
    except ImportError as exc:  # grpcio missing
        raise RmqError(f"gRPC: {exc} (pip install grpcio grpcio-tools, or --grpc-port 0)") from None

    options = GrpcOptions(opts.grpc_port, opts.grpc_listen, opts.grpc_cert, opts.grpc_key)
    return await start(controller, options)


def vip_channel_port(opts: ServeOptions, config: BrokerConfig) -> int:
    """The VIP channel's port: ``--fast-port``, else 4.9.8's ``fastListenPort``, listenPort − 2
    (none below 1, where 4.9.8 fails to bind); 0: none. A 4.9.8 slave fetches its master's topics
    there (``SlaveSynchronize``, ``MixAll.brokerVIPChannel``), clients with ``vipChannelEnabled``
    send there."""
    if opts.vip_port is not None:
        return opts.vip_port
    return max(config.listen_port - 2, 0)


def ha_description(controller: BrokerController) -> str:
    ha = controller.ha
    if ha.is_slave:
        return f"master {ha.slave.master_address or 'from the name server'}" if ha.slave else "off"
    return f"port {ha.ha_port}, address {controller.config.ha_server_addr}"


async def serve(opts: ServeOptions, announce: Callable[[str], None] = print) -> None:
    """Run until SIGTERM/SIGINT (or cancellation); the store is closed cleanly either way. A
    server that cannot listen stops it before it announces itself, and without a "stopped" line."""
    from rmqcli.store import Store
    from rmqcli.store.layout import find_dledger
    from rmqcli.store.write.writer import StoreWriter

    config = effective_config(opts)
    if not 0 < config.listen_port < 65536:
        raise UsageError(f"bad broker port {config.listen_port}")
    acl = open_acl(config) if config.acl_enable else None  # a file that does not load stops us here
    if find_dledger(opts.store, {}) is not None:  # nothing is written to a DLedger store (issue 35)
        raise UsageError(f"{opts.store}: a DLedger CommitLog store (dledger-*/): rmq serve cannot serve it")
    recovered = recover_store(opts.store, config)
    if recovered.steps:
        announce(
            f"recovered the store ({recovered.mode}, {recovered.steps} steps; backup in {recovered.backup})"
        )
    store = Store(opts.store, config.store)
    try:
        for directory in (*store.commitlog_dirs, store.consumequeue_dir):  # DefaultMessageStore: ensureDirOK
            directory.mkdir(parents=True, exist_ok=True)
        settings = store.effective_settings()
    finally:
        store.close()
    writer = StoreWriter(
        opts.store,
        settings,
        store_host=Host.parse(f"{config.broker_ip1}:{config.listen_port}"),
        cluster=config.broker_cluster_name,
        index_behind=recovered.index_from is not None,
    )
    index_task = None
    if recovered.index_from is not None and writer.index_behind:
        from rmqcli.broker.services import indexbehind

        index_task = asyncio.get_running_loop().create_task(
            indexbehind.catch_up(writer, recovered.index_from)
        )
    servers: list[Server] = []
    controller: BrokerController | None = None
    grpc_endpoint: GrpcEndpoint | None = None
    namesrv: NameServer | None = None
    ns_task: asyncio.Task[None] | None = None
    stop = asyncio.Event()
    started = False
    loop = asyncio.get_running_loop()
    limits = ServerLimits(opts.max_pending_bytes, opts.max_connections)
    raise_open_file_limit(opts.max_connections)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        if opts.run_namesrv:
            namesrv = NameServer(config=dict(opts.namesrv_config or default_config()))
            ns_handle = namesrv.handle if acl is None else guard_namesrv(namesrv.handle, acl)
            ns_server = Server("namesrv", ns_handle, limits=limits)
            ns_server.close_callbacks.append(namesrv.on_close)
            servers.append(ns_server)
            await listen(ns_server, opts.listen, opts.namesrv_port)
            ns_task = loop.create_task(namesrv.scan_expired())
        usage = disk_used_ratio if opts.disk_usage_file is None else drill_usage(opts.disk_usage_file)
        controller = BrokerController(
            config, writer, namesrv_addrs(opts), acl=acl, ha_host=opts.listen, disk_usage=usage
        )
        broker_server = Server("broker", controller.dispatch, limits=limits)
        broker_server.settle = controller.store.catch_up  # sends are dispatched after their answers
        controller.defer_dispatch = True
        if controller.send_lane is not None:
            broker_server.frame_handler = controller.send_lane.handle
        broker_server.close_callbacks.append(controller.on_close)
        servers.append(broker_server)
        await listen(broker_server, opts.listen, config.listen_port)
        vip_port = vip_channel_port(opts, config)
        if vip_port:
            vip_server = Server("broker VIP channel", controller.dispatch_vip, limits=limits)
            vip_server.settle = broker_server.settle
            vip_server.frame_handler = broker_server.frame_handler
            vip_server.close_callbacks.append(controller.on_close)
            servers.append(vip_server)
            await listen(vip_server, opts.listen, vip_port)
        await start_ha(controller, opts.listen)
        if opts.grpc_port:
            grpc_endpoint = await start_grpc(controller, opts)
        controller.start()
        parts = []
        if opts.run_namesrv:
            parts.append(f"namesrv on {opts.listen}:{opts.namesrv_port}")
        parts.append(
            f"broker {config.broker_name} (cluster {config.broker_cluster_name}, id {config.broker_id}) "
            f"on {opts.listen}:{config.listen_port} (VIP channel {vip_port or 'off'}), "
            f"address {controller.addr}, {config.flush_disk_type}, "
            f"{config.broker_role} (HA {ha_description(controller)})"
        )
        if grpc_endpoint is not None:
            parts.append(grpc_endpoint.describe())
        announce("rmq serve: " + "; ".join(parts) + f"; store {opts.store}")
        started = True
        await stop.wait()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        if index_task is not None:
            await asyncio.wait({index_task})  # the index is whole before the store closes
        if grpc_endpoint is not None:
            await grpc_endpoint.stop()  # before the store closes under its sends
        if controller is not None:
            for server in servers:
                if server.name.startswith("broker"):
                    await server.close()
            await controller.shutdown()
        else:
            writer.close()
        if ns_task is not None:
            ns_task.cancel()
        for server in servers:
            await server.close()
        if started:
            announce("rmq serve: stopped; store flushed and closed")
