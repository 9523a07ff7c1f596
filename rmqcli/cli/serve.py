"""``rmq serve``: run a NameServer and a Broker over a store directory (``rmqcli.broker``).

The command parses its flags and hands them to ``rmqcli.broker.serve.main``, which reads broker.conf
once, checks it, warns and serves; the options' declarations are the aliases below.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

HELP = {  # the options' help
    "--namesrv-port": "Port of the embedded NameServer.",
    "--port": "Broker port (default: listenPort of broker.conf, else 10911).",
    "--fast-port": "Port of the broker's VIP channel, where 4.9.8 slaves fetch their master's topics and "
    "clients with vipChannelEnabled send (default: the broker port - 2, as fastListenPort; 0: none).",
    "--listen": "Address to listen on.",
    "--config": "broker.conf: brokerName, brokerClusterName, brokerId, brokerRole (ASYNC_MASTER, "
    "SYNC_MASTER, SLAVE), haListenPort, haMasterAddress, slaveReadEnable, listenPort, brokerIP1, "
    "flushDiskType, mapped file sizes, autoCreateTopicEnable, autoCreateSubscriptionGroup, "
    "messageIndexEnable, messageDelayLevel, transactionTimeOut, transactionCheckMax, "
    "transactionCheckInterval, rejectTransactionMessage...",
    "--no-namesrv": "Run only the Broker (register with --namesrv).",
    "--namesrv": "NameServer address(es) to register with, `;`-separated (default: the embedded one).",
    "--max-buffered-bytes": "Bytes all partly received frames may hold; a client taking them past it is "
    "dropped (default: rmqMaxPendingFrameBytes of broker.conf, rmq's own key, else 268435456).",
    "--max-connections": "Open connections; more are closed at once "
    "(default: rmqMaxConnections of broker.conf, rmq's own key, else 10000).",
    "--grpc-port": "Port of the gRPC endpoint of RocketMQ 5.x clients, as the 5.x proxy's grpcServerPort "
    "(default 8081; 0: none).",
    "--grpc-listen": "Address the gRPC endpoint listens on.",
    "--grpc-cert": "PEM certificate (chain): the gRPC endpoint speaks TLS.",
    "--grpc-key": "PEM private key of --grpc-cert.",
    "--verbose": "Log connections and warnings.",
    "--acl": "The plain_acl.yml to check requests against when broker.conf has aclEnable=true "
    "(default: $ROCKETMQ_HOME/conf/plain_acl.yml and $ROCKETMQ_HOME/conf/acl/*.yml).",
    "--disk-usage-from": "A file holding the disk usage to act on, a fraction like 0.93, read at every "
    "clean-up round instead of measuring the disk: a drill of disk-full protection (bad or missing "
    "content: the real figure).",
}


def _option(kind: Any, *names: str, file: bool = False) -> Any:
    """An option's type: ``kind`` read by ``typer.Option(*names)`` with its ``HELP``; ``file``: a
    file, not a directory."""
    return Annotated[kind, typer.Option(*names, help=HELP[names[0]], dir_okay=not file)]


StoreArg = Annotated[
    Path, typer.Argument(metavar="STORE", help="The store directory (created when missing).")
]
NamesrvPortOpt = _option(int, "--namesrv-port")
PortOpt = _option(int | None, "--port")
FastPortOpt = _option(int | None, "--fast-port")
ListenOpt = _option(str, "--listen")
ConfigOpt = _option(Path | None, "--config", file=True)
NoNamesrvOpt = _option(bool, "--no-namesrv")
NamesrvOpt = _option(str | None, "--namesrv", "-n")
MaxBufferedBytesOpt = _option(int | None, "--max-buffered-bytes")
MaxConnectionsOpt = _option(int | None, "--max-connections")
GrpcPortOpt = _option(int | None, "--grpc-port")
GrpcListenOpt = _option(str, "--grpc-listen")
GrpcCertOpt = _option(Path | None, "--grpc-cert", file=True)
GrpcKeyOpt = _option(Path | None, "--grpc-key", file=True)
VerboseOpt = _option(bool, "--verbose", "-v")
AclOpt = _option(Path | None, "--acl", file=True)
DiskUsageFromOpt = _option(Path | None, "--disk-usage-from", file=True)


def serve(
    store: StoreArg, namesrv_port: NamesrvPortOpt = 9876, port: PortOpt = None, fast_port: FastPortOpt = None,
    listen: ListenOpt = "127.0.0.1", config: ConfigOpt = None, no_namesrv: NoNamesrvOpt = False,
    namesrv: NamesrvOpt = None, max_buffered_bytes: MaxBufferedBytesOpt = None,
    max_connections: MaxConnectionsOpt = None, grpc_port: GrpcPortOpt = None,
    grpc_listen: GrpcListenOpt = "127.0.0.1", grpc_cert: GrpcCertOpt = None, grpc_key: GrpcKeyOpt = None,
    verbose: VerboseOpt = False, acl: AclOpt = None, disk_usage_from: DiskUsageFromOpt = None,
) -> None:  # fmt: skip
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

    With enableDLegerCommitLog=true (dLegerGroup, dLegerPeers, dLegerSelfId, preferredLeaderId,
    enableBatchPush) it is a member of a DLedger group, as 4.9.8's DLedger CommitLog, with Java
    brokers or other rmq serves: the log is dledger-<selfId>/ of the store, replicated by Raft on
    the dLegerPeers port; the elected leader registers as brokerId 0 and takes sends, each answered
    once a majority holds it; the others register as selfId's number + 1, copy the leader's config
    and refuse sends. Only committed messages reach the consume queues. A leader that loses its
    majority steps down.

    With enableControllerMode=true (controllerAddr, allAckInSyncStateSet, ...) it is a RocketMQ 5.1
    controller-mode broker, with Java brokers or other rmq serves: the controller gives it an id
    (brokerIdentity) and its role; replication is AutoSwitchHA on haListenPort with the group's
    epochs (epochFileCheckpoint), a rejoining replica is cut back to the point it shares with the
    master (what is cut is backed up), and only what the in-sync set confirmed reaches the consume
    queues. With enableControllerInNamesrv=true (controllerDLegerGroup, controllerDLegerPeers,
    controllerDLegerSelfId, controllerStorePath) the NameServer also runs a controller, as 5.1.1's.

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
    import logging
    import sys

    from rmqcli.broker.serve import ServeFlags, main

    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="rmq serve: %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    flags = ServeFlags(
        store, config, namesrv_port, port, fast_port, listen, no_namesrv, namesrv, max_buffered_bytes,
        max_connections, grpc_port, grpc_listen, grpc_cert, grpc_key, acl, disk_usage_from,
    )  # fmt: skip

    def announce(line: str) -> None:
        typer.echo(line)
        sys.stdout.flush()

    main(flags, announce, lambda line: typer.echo(line, err=True))
