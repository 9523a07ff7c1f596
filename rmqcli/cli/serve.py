"""``rmq serve``: run a NameServer and a Broker over a store directory (``rmqcli.broker``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rmqcli.errors import NotFoundError, RmqError, UsageError


def serve(
    store: Annotated[
        Path, typer.Argument(metavar="STORE", help="The store directory (created when missing).")
    ],
    namesrv_port: Annotated[
        int, typer.Option("--namesrv-port", help="Port of the embedded NameServer.")
    ] = 9876,
    port: Annotated[
        int | None,
        typer.Option("--port", help="Broker port (default: listenPort of broker.conf, else 10911)."),
    ] = None,
    fast_port: Annotated[
        int | None,
        typer.Option(
            "--fast-port",
            help="Port of the broker's VIP channel, where 4.9.8 slaves fetch their master's topics and "
            "clients with vipChannelEnabled send (default: the broker port - 2, as fastListenPort; 0: none).",
        ),
    ] = None,
    listen: Annotated[str, typer.Option("--listen", help="Address to listen on.")] = "127.0.0.1",
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="broker.conf: brokerName, brokerClusterName, brokerId, brokerRole (ASYNC_MASTER, "
            "SYNC_MASTER, SLAVE), haListenPort, haMasterAddress, slaveReadEnable, listenPort, brokerIP1, "
            "flushDiskType, mapped file sizes, autoCreateTopicEnable, autoCreateSubscriptionGroup, "
            "messageIndexEnable, messageDelayLevel, transactionTimeOut, transactionCheckMax, "
            "transactionCheckInterval, rejectTransactionMessage...",
            dir_okay=False,
        ),
    ] = None,
    no_namesrv: Annotated[
        bool, typer.Option("--no-namesrv", help="Run only the Broker (register with --namesrv).")
    ] = False,
    namesrv: Annotated[
        str | None,
        typer.Option(
            "--namesrv",
            "-n",
            help="NameServer address(es) to register with, `;`-separated (default: the embedded one).",
        ),
    ] = None,
    max_buffered_bytes: Annotated[
        int | None,
        typer.Option(
            "--max-buffered-bytes",
            help="Bytes all partly received frames may hold; a client taking them past it is "
            "dropped (default: rmqMaxPendingFrameBytes of broker.conf, rmq's own key, else 268435456).",
        ),
    ] = None,
    max_connections: Annotated[
        int | None,
        typer.Option(
            "--max-connections",
            help="Open connections; more are closed at once "
            "(default: rmqMaxConnections of broker.conf, rmq's own key, else 10000).",
        ),
    ] = None,
    grpc_port: Annotated[
        int | None,
        typer.Option(
            "--grpc-port",
            help="Port of the gRPC endpoint of RocketMQ 5.x clients, as the 5.x proxy's grpcServerPort "
            "(default 8081; 0: none).",
        ),
    ] = None,
    grpc_listen: Annotated[
        str, typer.Option("--grpc-listen", help="Address the gRPC endpoint listens on.")
    ] = "127.0.0.1",
    grpc_cert: Annotated[
        Path | None,
        typer.Option(
            "--grpc-cert", help="PEM certificate (chain): the gRPC endpoint speaks TLS.", dir_okay=False
        ),
    ] = None,
    grpc_key: Annotated[
        Path | None,
        typer.Option("--grpc-key", help="PEM private key of --grpc-cert.", dir_okay=False),
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log connections and warnings.")] = False,
    acl: Annotated[
        Path | None,
        typer.Option(
            "--acl",
            help="The plain_acl.yml to check requests against when broker.conf has aclEnable=true "
            "(default: $ROCKETMQ_HOME/conf/plain_acl.yml and $ROCKETMQ_HOME/conf/acl/*.yml).",
            dir_okay=False,
        ),
    ] = None,
    disk_usage_from: Annotated[
        Path | None,
        typer.Option(
            "--disk-usage-from",
            help="A file holding the disk usage to act on, a fraction like 0.93, read at every clean-up "
            "round instead of measuring the disk: a drill of disk-full protection (bad or missing "
            "content: the real figure).",
            dir_okay=False,
        ),
    ] = None,
) -> None:
    """Serve a store to real RocketMQ clients: a NameServer and a Broker in one process.

    At start the store is checked like a broker does it: a store whose lock a live process holds
    is refused, the start-up recovery of `rmq recover` runs and is applied (abnormal when `abort`
    exists; removed bytes are backed up), then the store is opened for writing. Index files the
    recovery drops are rebuilt behind the CommitLog while it serves. Producers send,
    consumers pull (with long polling) and commit offsets to config/consumerOffset.json. Messages a
    consumer sends back go to %RETRY%<group> with growing delays, then to %DLQ%<group>; delayed
    messages wait in SCHEDULE_TOPIC_XXXX until due (progress in config/delayOffset.json);
    transactional sends are half messages until END_TRANSACTION, and the producer group is asked
    about those left open past transactionTimeOut. SIGTERM or Ctrl-C stops it cleanly: flushed,
    config persisted, `abort` removed.

    With brokerRole=SLAVE (brokerId above 0) it replicates its master's CommitLog over the HA port
    (haMasterAddress, else the one the NameServer names), builds its own consume queues and index,
    copies the master's topics, groups and offsets every 10 s, serves pulls and refuses sends. A
    master (brokerId 0) serves its slaves on haListenPort (listenPort + 1); a SYNC_MASTER answers a
    send once a slave has it. Like a 4.9.8 broker it also listens on its VIP channel (listenPort - 2,
    --fast-port), where real slaves fetch the topics and clients with vipChannelEnabled send.
    broker.conf keys rmq does not implement are named once at start.

    Retention as a 4.9.8 broker: every cleanResourceInterval ms (from 60 s after start) CommitLog
    files older than fileReservedTime hours go at the deleteWhen hours, or at once when the disk is
    fuller than diskMaxUsedSpaceRatio; consume-queue and index files below the new minimum follow.
    Above diskSpaceWarningLevelRatio (90%) sends are refused until space returns.

    RocketMQ 5.x clients (Java, Go, C++, Python, Node.js... of apache/rocketmq-clients) talk gRPC:
    the endpoint on --grpc-port (8081, loopback unless --grpc-listen; TLS with --grpc-cert and
    --grpc-key) is the 5.x proxy in local mode over the same store: routes, settings, heartbeats,
    sends (normal, FIFO message groups, delivery timestamps, transactions), receive / ack / change
    invisible duration by POP (also over remoting, for 5.x remoting clients), dead-letter forwards
    and client termination. Without it: --grpc-port 0. With aclEnable=true every gRPC call is
    checked against the same plain_acl.yml as remoting (the 5.x clients' Credentials signatures,
    as the 5.1.1 proxy checks them; a refusal is gRPC PERMISSION_DENIED). Messages with
    TIMER_DELAY_SEC, TIMER_DELAY_MS or TIMER_DELIVER_MS wait in rmq_sys_wheel_timer until their
    time, as on a 5.x broker.
    """
    import asyncio
    import logging
    import sys
    from dataclasses import replace

    from rmqcli.broker.config import load_broker_config, with_listen_port
    from rmqcli.broker.serve import (
        ServeOptions,
        acl_enabled,
        exposure_warning,
        is_loopback,
        new_event_loop,
        root_dir_warning,
        serve_limits,
        unimplemented_keys,
    )
    from rmqcli.broker.serve import serve as run
    from rmqcli.namesrv.server import namesrv_config, settings_problem
    from rmqcli.store.settings import read_properties

    if config is not None and not config.is_file():
        raise NotFoundError(f"{config}: no such broker.conf")
    if store.exists() and not store.is_dir():
        raise UsageError(f"{store}: expected a store directory, not a file")
    if not 0 < namesrv_port < 65536:
        raise UsageError(f"--namesrv-port: bad port {namesrv_port}")
    if fast_port is not None and not 0 <= fast_port < 65536:
        raise UsageError(f"--fast-port: bad port {fast_port}")
    from rmqcli.broker.grpc.options import DEFAULT_PORT, check_options

    grpc = DEFAULT_PORT if grpc_port is None else grpc_port
    check_options(grpc, grpc_cert, grpc_key)
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="rmq serve: %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    broker_config = load_broker_config(config)
    if acl is not None:
        if not broker_config.acl_enable:
            raise UsageError("--acl is given but broker.conf does not say aclEnable=true")
        broker_config = replace(broker_config, acl_file=str(acl.absolute()))
    props = read_properties(config) if config is not None else {}
    if port is not None:
        broker_config = with_listen_port(broker_config, port, props)
    pending_budget, connection_cap = serve_limits(props, max_buffered_bytes, max_connections)
    problem = settings_problem(props)
    if problem is not None:
        raise UsageError(f"{config}: {problem}")
    ignored = unimplemented_keys(props)
    if ignored:
        names = ", ".join(ignored)
        typer.echo(
            f"rmq serve: warning: {config}: keys rmq does not implement (shown as given by "
            f"getBrokerConfig, without effect): {names}",
            err=True,
        )
    other_root = root_dir_warning(props, store)
    if other_root:
        typer.echo(other_root, err=True)
    exposed = exposure_warning(listen, acl_enabled(broker_config, props))
    if exposed:
        typer.echo(exposed, err=True)
    if grpc and not is_loopback(grpc_listen) and not acl_enabled(broker_config, props):
        typer.echo(
            f"rmq serve: warning: gRPC listening on {grpc_listen or '*'} without aclEnable=true: "
            "anyone who can connect may send messages",
            err=True,
        )
    addrs = tuple(a.strip() for a in (namesrv or "").split(";") if a.strip())
    if no_namesrv and not addrs and not broker_config.namesrv_addr:
        typer.echo(
            "rmq serve: warning: --no-namesrv without --namesrv: the broker registers nowhere", err=True
        )
    options = ServeOptions(
        store=store,
        config=broker_config,
        listen=listen,
        namesrv_port=namesrv_port,
        run_namesrv=not no_namesrv,
        namesrv_addrs=addrs,
        max_pending_bytes=pending_budget,
        max_connections=connection_cap,
        namesrv_config=namesrv_config(props),
        disk_usage_file=disk_usage_from,
        grpc_port=grpc,
        grpc_listen=grpc_listen,
        grpc_cert=grpc_cert,
        grpc_key=grpc_key,
        vip_port=fast_port,
    )

    def announce(line: str) -> None:
        typer.echo(line)
        sys.stdout.flush()

    try:
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            runner.run(run(options, announce))
    except OSError as exc:  # the listeners' own failures are NetworkErrors (exit 5) already
        where = f"{exc.filename}: " if exc.filename else ""
        raise RmqError(f"{where}{exc.strerror or exc}") from None
