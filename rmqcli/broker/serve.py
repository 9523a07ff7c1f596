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

``main`` is the command (``rmqcli.cli.serve`` only parses its flags into ``ServeFlags``):
``prepare`` checks the flags, reads broker.conf once (``rmqcli.conf``) into the broker's settings,
the limits and the NameServer's keys, and gives the warnings to show first (keys rmq does not
implement, another store root, listeners beyond loopback without ACL, a broker registering
nowhere); ``serve`` runs the servers.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from rmqcli.broker.acl.setup import BrokerAcl, guard_namesrv, open_acl
from rmqcli.broker.config import BrokerConfig, broker_config_from_properties, with_listen_port
from rmqcli.broker.controller import BrokerController
from rmqcli.broker.metrics.broker import BrokerMetrics
from rmqcli.broker.services.retention import drill_usage
from rmqcli.conf.parse import BrokerConf, conf_of, load
from rmqcli.errors import NotFoundError, RmqError, UsageError, bind_error
from rmqcli.metrics.http import MetricsServer
from rmqcli.namesrv.server import NameServer, default_config, namesrv_config
from rmqcli.netaddr import is_loopback
from rmqcli.remoting.server.connection import MAX_CONNECTIONS, MAX_PENDING_FRAME_BYTES, Server, ServerLimits
from rmqcli.store.retention import disk_used_ratio
from rmqcli.store.write.messages import Host

if TYPE_CHECKING:
    from rmqcli.broker.grpc.server import GrpcEndpoint
    from rmqcli.controller.config import ControllerConfig
    from rmqcli.controller.server import ControllerServer
    from rmqcli.dledger.node import DLedgerNode
    from rmqcli.store import Store
    from rmqcli.store.write.writer import StoreWriter

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
    controller: ControllerConfig | None = None  # enableControllerInNamesrv: beside the NameServer


PENDING_BYTES_KEY = "rmqMaxPendingFrameBytes"
CONNECTIONS_KEY = "rmqMaxConnections"
ROOT_DIR_KEY = "storePathRootDir"


def unimplemented_keys(props: Mapping[str, str]) -> list[str]:
    """The keys of broker.conf that rmq does not implement (a broker's other settings): ``rmq
    serve`` names them once at start rather than drop them silently (``BrokerConf.unimplemented``).
    ``storePathRootDir`` is not one (``root_dir_warning``)."""
    return conf_of(props).unimplemented()


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
    defaults (256 MiB, 10,000; rows of ``rmqcli.conf.keys``). Each must be a positive integer."""
    conf = conf_of(props)
    chosen = []
    for flag, key, value in (
        ("--max-buffered-bytes", PENDING_BYTES_KEY, max_pending_bytes),
        ("--max-connections", CONNECTIONS_KEY, max_connections),
    ):
        if value is None:
            value = conf.value(key)  # the table's range: above 0
        elif value <= 0:
            raise UsageError(f"{flag}: must be above 0, not {value}")
        chosen.append(value)
    return chosen[0], chosen[1]


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
    store = Store(root, config.store, dledger_conf(config))
    if store.dledger is not None:
        return _recover_dledger(root, store)
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


def dledger_conf(config: BrokerConfig) -> dict[str, str]:
    """The broker.conf keys that say which DLedger log of the store is this broker's."""
    d = config.dledger
    return {"enableDLegerCommitLog": "true", "dLegerSelfId": d.self_id or ""} if d.enable else {}


def _recover_dledger(root: Path, store: Store) -> Recovered:
    """``DLedgerMmapFileStore.recover`` and the reput of a DLedger store (``rmq recover``'s)."""
    from rmqcli.ops import recover_dledger as dl

    assert store.dledger is not None
    store.dledger.refuse_mixed("rmq serve")
    if not store.dledger.home.is_dir():
        store.close()
        return Recovered("new", 0, None)
    try:
        result = dl.stage(store)
    finally:
        store.close()
    if result.plan.empty:
        dl.discard(result)
        return Recovered("dledger", 0, None)
    backup = dl.apply(root, result, ["serve", str(root)])
    return Recovered("dledger", len(result.plan.steps), backup)


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
        raise bind_error(server.name, host, port, exc) from None


async def start_ha(controller: BrokerController, host: str) -> None:
    """The HA port of a master (a port in use is a ``NetworkError`` naming it), or a slave's client."""
    try:
        await controller.start_ha()
    except OSError as exc:
        raise bind_error("HA", host, controller.config.ha.ha_listen_port, exc) from None


async def start_grpc(controller: BrokerController, opts: ServeOptions) -> GrpcEndpoint:
    """The gRPC endpoint of the 5.x clients (``rmqcli.broker.grpc``, on ``rmqcli.grpcserver``; the
    protobuf stubs are generated with grpcio-tools on first use)."""
    try:
        from rmqcli.broker.grpc.server import GrpcOptions, start
    except ImportError as exc:  # protobuf missing
        raise RmqError(f"gRPC: {exc} (pip install protobuf grpcio-tools, or --grpc-port 0)") from None

    options = GrpcOptions(opts.grpc_port, opts.grpc_listen, opts.grpc_cert, opts.grpc_key)
    return await start(controller, options)


def metrics_host(config: BrokerConfig) -> str:
    """``metricsPromExporterHost``, else ``brokerIP1`` (``BrokerMetricsManager``)."""
    return config.metrics.prom_host or config.broker_ip1 or "127.0.0.1"


async def start_metrics(metrics: BrokerMetrics, host: str) -> MetricsServer:
    """The Prometheus endpoint (``metricsExporterType=PROM``); a port in use is a ``NetworkError``."""
    server = MetricsServer(metrics.render)
    port = metrics.ctl.config.metrics.prom_port
    try:
        await server.start(host, port)
    except OSError as exc:
        raise bind_error("metrics", host, port, exc) from None
    return server


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
    if controller.config.dledger.enable:
        d = controller.config.dledger
        return f"off; DLedger {d.self_id} of {d.group} on {d.peer_map()[d.self_id or '']}"
    if controller.config.autoswitch.enable:
        return (
            f"controller mode, port {ha.ha_port}, controllers {controller.config.autoswitch.controller_addr}"
        )
    if ha.is_slave:
        return f"master {ha.slave.master_address or 'from the name server'}" if ha.slave else "off"
    return f"port {ha.ha_port}, address {controller.config.ha_server_addr}"


@dataclass
class Serving:
    """What ``serve`` has started, for ``stop`` to close in order."""

    writer: StoreWriter
    servers: list[Server] = field(default_factory=list)
    controller: BrokerController | None = None
    grpc: GrpcEndpoint | None = None
    metrics: MetricsServer | None = None
    namesrv_task: asyncio.Task[None] | None = None
    index_task: asyncio.Task[None] | None = None
    dledger: DLedgerNode | None = None  # the store's member of its DLedger group
    controller_server: ControllerServer | None = None  # the NameServer's controller (controller mode)

    async def stop(self) -> None:
        if self.index_task is not None:
            await asyncio.wait({self.index_task})  # the index is whole before the store closes
        if self.grpc is not None:
            await self.grpc.stop()  # before the store closes under its sends
        if self.metrics is not None:
            await self.metrics.close()
        if self.controller is not None:
            for server in self.servers:
                if server.name.startswith("broker"):
                    await server.close()
            await self.controller.shutdown()
        else:
            self.writer.close()
        if self.namesrv_task is not None:
            self.namesrv_task.cancel()
        if self.controller_server is not None:
            await self.controller_server.close()
        for server in self.servers:
            await server.close()


def dledger_node(root: Path, config: BrokerConfig, data_file_size: int) -> DLedgerNode | None:
    """The member of a DLedger group (``enableDLegerCommitLog``) over ``dledger-<selfId>/``."""
    d = config.dledger
    if not d.enable:
        return None
    from rmqcli.dledger.member import MemberState
    from rmqcli.dledger.node import DLedgerNode

    home = root / f"dledger-{d.self_id}"
    state = MemberState.load(d.group or "", d.self_id or "", d.peer_map(), home)
    return DLedgerNode(state, data_file_size=data_file_size, preferred=d.preferred, batch_push=d.batch_push)


def open_writer(opts: ServeOptions, config: BrokerConfig, announce: Callable[[str], None]) -> Serving:
    """The store recovered (said when it changed) and open for writing; the index rebuilt behind
    the CommitLog where the recovery dropped some of it."""
    from rmqcli.broker.dledger.replication import LedgerSink
    from rmqcli.store import Store
    from rmqcli.store.layout import find_dledger
    from rmqcli.store.write.writer import StoreWriter

    if config.dledger.enable is False and find_dledger(opts.store, {}) is not None:
        raise UsageError(
            f"{opts.store}: a DLedger CommitLog store (dledger-*/): serve it with enableDLegerCommitLog=true"
            " and its dLegerGroup, dLegerPeers and dLegerSelfId"
        )
    recovered = recover_store(opts.store, config)
    if recovered.steps:
        announce(
            f"recovered the store ({recovered.mode}, {recovered.steps} steps; backup in {recovered.backup})"
        )
    store = Store(opts.store, config.store, dledger_conf(config))
    try:
        for directory in (*store.commitlog_dirs, store.consumequeue_dir):  # DefaultMessageStore: ensureDirOK
            if store.dledger is None or directory == store.consumequeue_dir:
                directory.mkdir(parents=True, exist_ok=True)
        settings = store.effective_settings()
    finally:
        store.close()
    node = dledger_node(opts.store, config, settings.mapped_file_size_commitlog)
    writer = StoreWriter(
        opts.store,
        settings,
        store_host=Host.parse(f"{config.broker_ip1}:{config.listen_port}"),
        cluster=config.broker_cluster_name,
        index_behind=recovered.index_from is not None,
        entries=None if node is None else LedgerSink(node),
    )
    serving = Serving(writer, dledger=node)
    if recovered.index_from is not None and writer.index_behind:
        from rmqcli.broker.services import indexbehind

        serving.index_task = asyncio.get_running_loop().create_task(
            indexbehind.catch_up(writer, recovered.index_from)
        )
    return serving


async def start_namesrv(
    serving: Serving, opts: ServeOptions, acl: BrokerAcl | None, limits: ServerLimits
) -> None:
    """The embedded NameServer, listening, and its scan of expired brokers."""
    namesrv = NameServer(config=dict(opts.namesrv_config or default_config()))
    handle = namesrv.handle if acl is None else guard_namesrv(namesrv.handle, acl)
    server = Server("namesrv", handle, limits=limits)
    server.close_callbacks.append(namesrv.on_close)
    serving.servers.append(server)
    await listen(server, opts.listen, opts.namesrv_port)
    serving.namesrv_task = asyncio.get_running_loop().create_task(namesrv.scan_expired())
    if opts.controller is not None:
        serving.controller_server = await start_controller(opts.controller)


async def start_controller(config: ControllerConfig) -> ControllerServer:
    """The controller of ``enableControllerInNamesrv`` (5.1.1 ``NamesrvStartup``): on its own DLedger
    peer port, sharing nothing else with the NameServer (controller.md §4.2)."""
    from rmqcli.controller.server import ControllerServer

    server = ControllerServer(config)
    try:
        await server.start()
    except OSError as exc:
        await server.close()
        host, _, port = config.peer_map()[config.self_id].rpartition(":")
        raise bind_error("controller", host, int(port), exc) from None
    return server


async def start_broker(
    serving: Serving, opts: ServeOptions, config: BrokerConfig, acl: BrokerAcl | None, limits: ServerLimits
) -> int:
    """The broker listening (its port, its VIP channel, HA, gRPC) and its services started; the
    VIP channel's port (0: none)."""
    usage = disk_used_ratio if opts.disk_usage_file is None else drill_usage(opts.disk_usage_file)
    controller = serving.controller = BrokerController(
        config, serving.writer, namesrv_addrs(opts), acl=acl, ha_host=opts.listen, disk_usage=usage,
        dledger=serving.dledger,
    )  # fmt: skip
    broker_server = Server("broker", controller.dispatch, limits=limits)
    broker_server.settle = controller.store.catch_up  # sends are dispatched after their answers
    controller.defer_dispatch = True
    if controller.send_lane is not None:
        broker_server.frame_handler = controller.send_lane.handle
    broker_server.close_callbacks.append(controller.on_close)
    serving.servers.append(broker_server)
    await listen(broker_server, opts.listen, config.listen_port)
    vip_port = vip_channel_port(opts, config)
    if vip_port:
        vip_server = Server("broker VIP channel", controller.dispatch_vip, limits=limits)
        vip_server.settle = broker_server.settle
        vip_server.frame_handler = broker_server.frame_handler
        vip_server.close_callbacks.append(controller.on_close)
        serving.servers.append(vip_server)
        await listen(vip_server, opts.listen, vip_port)
    await start_ha(controller, opts.listen)
    if opts.grpc_port:
        serving.grpc = await start_grpc(controller, opts)
    if isinstance(controller.metrics, BrokerMetrics):
        serving.metrics = await start_metrics(controller.metrics, metrics_host(config))
    controller.start()
    return vip_port


def started_line(opts: ServeOptions, config: BrokerConfig, serving: Serving, vip_port: int) -> str:
    """The line ``rmq serve`` announces itself with: what listens where."""
    assert serving.controller is not None
    parts = []
    if opts.run_namesrv:
        parts.append(f"namesrv on {opts.listen}:{opts.namesrv_port}")
    if opts.controller is not None:
        c = opts.controller
        parts.append(
            f"controller {c.self_id} of {c.group or '-'} on {c.peer_map()[c.self_id]} (peers {c.peers})"
        )
    parts.append(
        f"broker {config.broker_name} (cluster {config.broker_cluster_name}, id {config.broker_id}) "
        f"on {opts.listen}:{config.listen_port} (VIP channel {vip_port or 'off'}), "
        f"address {serving.controller.addr}, {config.flush_disk_type}, "
        f"{config.broker_role} (HA {ha_description(serving.controller)})"
    )
    if serving.grpc is not None:
        parts.append(serving.grpc.describe())
    if serving.metrics is not None:
        parts.append(f"metrics (Prometheus) on {metrics_host(config)}:{serving.metrics.port}")
    return "rmq serve: " + "; ".join(parts) + f"; store {opts.store}"


async def serve(opts: ServeOptions, announce: Callable[[str], None] = print) -> None:
    """Run until SIGTERM/SIGINT (or cancellation); the store is closed cleanly either way. A
    server that cannot listen stops it before it announces itself, and without a "stopped" line."""
    config = effective_config(opts)
    if not 0 < config.listen_port < 65536:
        raise UsageError(f"bad broker port {config.listen_port}")
    acl = open_acl(config) if config.acl_enable else None  # a file that does not load stops us here
    serving = open_writer(opts, config, announce)
    stop = asyncio.Event()
    started = False
    loop = asyncio.get_running_loop()
    limits = ServerLimits(opts.max_pending_bytes, opts.max_connections)
    raise_open_file_limit(opts.max_connections)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        if opts.run_namesrv:
            await start_namesrv(serving, opts, acl, limits)
        vip_port = await start_broker(serving, opts, config, acl, limits)
        announce(started_line(opts, config, serving, vip_port))
        started = True
        await stop.wait()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await serving.stop()
        if started:
            announce("rmq serve: stopped; store flushed and closed")


# --- the command: its flags, broker.conf read once, the warnings, the run ---------------------------
@dataclass
class ServeFlags:
    """What ``rmq serve`` was given on its command line (``rmqcli.cli.serve``)."""

    store: Path
    config: Path | None = None  # broker.conf
    namesrv_port: int = 9876
    port: int | None = None  # else listenPort of broker.conf
    fast_port: int | None = None
    listen: str = "127.0.0.1"
    no_namesrv: bool = False
    namesrv: str | None = None  # ";"-separated
    max_buffered_bytes: int | None = None
    max_connections: int | None = None
    grpc_port: int | None = None  # else 8081
    grpc_listen: str = "127.0.0.1"
    grpc_cert: Path | None = None
    grpc_key: Path | None = None
    acl: Path | None = None
    disk_usage_from: Path | None = None


def check_flags(flags: ServeFlags) -> int:
    """One-line usage errors for flags that cannot work, before broker.conf is read; the gRPC port."""
    from rmqcli.broker.grpc.options import DEFAULT_PORT, check_options

    if flags.config is not None and not flags.config.is_file():
        raise NotFoundError(f"{flags.config}: no such broker.conf")
    if flags.store.exists() and not flags.store.is_dir():
        raise UsageError(f"{flags.store}: expected a store directory, not a file")
    if not 0 < flags.namesrv_port < 65536:
        raise UsageError(f"--namesrv-port: bad port {flags.namesrv_port}")
    if flags.fast_port is not None and not 0 <= flags.fast_port < 65536:
        raise UsageError(f"--fast-port: bad port {flags.fast_port}")
    grpc = DEFAULT_PORT if flags.grpc_port is None else flags.grpc_port
    check_options(grpc, flags.grpc_cert, flags.grpc_key)
    return grpc


def broker_settings(flags: ServeFlags, conf: BrokerConf) -> BrokerConfig:
    """The broker's settings: broker.conf's, with ``--acl`` (only with aclEnable) and ``--port``."""
    config = broker_config_from_properties(conf)
    if flags.acl is not None:
        if not config.acl_enable:
            raise UsageError("--acl is given but broker.conf does not say aclEnable=true")
        config = replace(config, acl_file=str(flags.acl.absolute()))
    if flags.port is not None:
        config = with_listen_port(config, flags.port, conf)
    return config


def start_warnings(flags: ServeFlags, conf: BrokerConf, config: BrokerConfig, grpc: int) -> list[str]:
    """The lines ``rmq serve`` warns with before it starts: keys rmq does not implement, another
    store root, listeners beyond loopback without ACL, a broker that registers nowhere."""
    lines = []
    ignored = conf.unimplemented()
    if ignored:
        lines.append(
            f"rmq serve: warning: {flags.config}: keys rmq does not implement (shown as given by "
            f"getBrokerConfig, without effect): {', '.join(ignored)}"
        )
    lines.append(root_dir_warning(conf, flags.store) or "")
    lines.append(exposure_warning(flags.listen, config.acl_enable) or "")
    if grpc and not is_loopback(flags.grpc_listen) and not config.acl_enable:
        lines.append(
            f"rmq serve: warning: gRPC listening on {flags.grpc_listen or '*'} without aclEnable=true: "
            "anyone who can connect may send messages"
        )
    lines += metrics_warnings(config)
    if flags.no_namesrv and not registry_addrs(flags) and not config.namesrv_addr:
        lines.append("rmq serve: warning: --no-namesrv without --namesrv: the broker registers nowhere")
    return [line for line in lines if line]


def metrics_warnings(config: BrokerConfig) -> list[str]:
    """An exporter type rmq does not implement, ``metricsLabel`` pairs 5.1.1 skips."""
    lines = []
    metrics = config.metrics
    if metrics.exporter not in ("DISABLE", "PROM"):
        lines.append(
            f"rmq serve: warning: metricsExporterType={metrics.exporter_type} is not implemented "
            "(rmq exports PROM only): metrics off"
        )
    for pair in metrics.bad_labels():
        lines.append(f"rmq serve: warning: metricsLabel: {pair!r} is not key:value; skipped")
    return lines


def registry_addrs(flags: ServeFlags) -> tuple[str, ...]:
    """``--namesrv``'s addresses."""
    return tuple(a.strip() for a in (flags.namesrv or "").split(";") if a.strip())


def prepare(flags: ServeFlags) -> tuple[ServeOptions, list[str]]:
    """The flags checked, broker.conf read once and checked (every key rmq implements), the
    options of ``serve`` and the warnings to show first."""
    grpc = check_flags(flags)
    conf = load(flags.config)
    config = broker_settings(flags, conf)
    pending_budget, connection_cap = serve_limits(conf, flags.max_buffered_bytes, flags.max_connections)
    same = ("store", "listen", "namesrv_port", "grpc_listen", "grpc_cert", "grpc_key")
    options = ServeOptions(
        config=config, run_namesrv=not flags.no_namesrv, namesrv_addrs=registry_addrs(flags),
        max_pending_bytes=pending_budget, max_connections=connection_cap, namesrv_config=namesrv_config(conf),
        disk_usage_file=flags.disk_usage_from, grpc_port=grpc, vip_port=flags.fast_port,
        controller=embedded_controller(flags, conf), **{name: getattr(flags, name) for name in same},
    )  # fmt: skip
    return options, start_warnings(flags, conf, config, grpc)


def embedded_controller(flags: ServeFlags, conf: BrokerConf) -> ControllerConfig | None:
    """The controller's settings when broker.conf says ``enableControllerInNamesrv=true`` (checked
    now: peers, self id, values); a usage error with ``--no-namesrv``, which leaves it no NameServer."""
    if not conf.value("enableControllerInNamesrv"):
        return None
    if flags.no_namesrv:
        raise UsageError("enableControllerInNamesrv=true needs the embedded NameServer: drop --no-namesrv")
    from rmqcli.controller.config import load as controller_settings

    controller = controller_settings(conf)
    controller.peer_map()
    return controller


def main(flags: ServeFlags, announce: Callable[[str], None], warn: Callable[[str], None]) -> None:
    """``rmq serve``: prepare, warn, serve until stopped (an ``OSError`` is one ``RmqError`` line)."""
    options, warnings = prepare(flags)
    for line in warnings:
        warn(line)
    try:
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            runner.run(serve(options, announce))
    except OSError as exc:  # the listeners' own failures are NetworkErrors (exit 5) already
        where = f"{exc.filename}: " if exc.filename else ""
        raise RmqError(f"{where}{exc.strerror or exc}") from None
