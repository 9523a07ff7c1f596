"""``rmq controller``: one controller as its own process (5.1.1 ``ControllerStartup``,
controller.md §4.2): the file's settings, the peer port, logs, SIGTERM/SIGINT to stop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from rmqcli.conf.parse import load as load_conf
from rmqcli.controller.config import ControllerConfig, java_properties, load
from rmqcli.controller.server import ControllerServer
from rmqcli.errors import bind_error
from rmqcli.stopsignal import until_stopped


def controller_config(path: Path) -> tuple[ControllerConfig, list[str]]:
    """The settings of ``path`` and the keys of it rmq does not implement (to be named)."""
    conf = load_conf(path)
    config = load(conf)
    config.peer_map()  # a missing or malformed peer list stops here
    return config, conf.unimplemented()


def properties_of(config: ControllerConfig) -> str:
    """``-p``: every setting, ``key=value`` (ControllerStartup's printConfigs)."""
    return "".join(f"{k}={v}\n" for k, v in java_properties(config).items())


async def serve_controller(config: ControllerConfig, announce: Callable[[str], None] = print) -> None:
    """Run until SIGTERM/SIGINT; a port that cannot be bound stops it with one line."""
    server = ControllerServer(config)
    host, _, port = config.peer_map()[config.self_id].rpartition(":")
    try:
        bound = await server.start()
    except OSError as exc:
        await server.close()
        raise bind_error("controller", host, int(port), exc) from None
    group = config.group or "-"
    announce(f"rmq controller: {config.self_id} of {group} on {host}:{bound} (peers {config.peers}); "
             f"store {config.member_home}")  # fmt: skip
    try:
        await until_stopped()
    finally:
        await server.close()
        announce("rmq controller: stopped")


def run_controller(path: Path, print_only: bool, announce: Callable[[str], None] = print) -> None:
    config, unimplemented = controller_config(path)
    if print_only:
        announce(properties_of(config).rstrip("\n"))
        return
    for key in unimplemented:
        logging.getLogger("rmqcli.controller").warning("%s: %s is not implemented by rmq; ignored", path, key)
    asyncio.run(serve_controller(config, announce))
