"""``rmq controller``: a RocketMQ 5.1.1 controller as its own process (``rmqcli.controller``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def controller(
    config: Annotated[
        Path, typer.Option("--configFile", "-c", help="The controller's properties file (controller.conf).")
    ],
    print_config: Annotated[
        bool, typer.Option("--printConfigItem", "-p", help="Print every setting and exit.")
    ] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log at INFO level to stderr.")] = False,
) -> None:
    """Run a RocketMQ 5 controller (controller mode's master election), as mqcontroller does.

    The file holds ControllerConfig's keys: controllerDLegerGroup, controllerDLegerPeers
    (n0-host:port;n1-host:port;...), controllerDLegerSelfId, controllerStorePath,
    enableElectUncleanMaster, notifyBrokerRoleChanged, scanNotActiveBrokerInterval,
    scanInactiveMasterInterval, processReadEvent, mappedFileSize, configStorePath. It listens on its own
    peer's port, for brokers (controllerAddr), mqadmin and the other controllers alike; with several
    peers the controllers replicate their events with DLedger's Raft, and real 5.1.1 controllers may
    be among them. Keys rmq does not implement are named at start. Stops on SIGTERM or SIGINT."""
    import logging
    import sys

    from rmqcli.controller.run import run_controller
    from rmqcli.errors import NotFoundError

    if not config.is_file():
        raise NotFoundError(f"{config}: no such controller configuration")
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="rmq controller: %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )

    def announce(line: str) -> None:
        typer.echo(line)
        sys.stdout.flush()

    run_controller(config, print_config, announce)
