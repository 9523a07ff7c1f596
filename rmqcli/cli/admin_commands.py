"""Registers the mqadmin commands on the ``rmq`` app, ``rmq help CMD``, and the command listing
``rmq`` prints without arguments (PROTOCOL.md C.1)."""

from typing import Annotated, Any

import typer
from typer import _click as click

from rmqcli.cli import admin_broker as broker
from rmqcli.cli import admin_group as group
from rmqcli.cli import admin_message as message
from rmqcli.cli import admin_topic as topic
from rmqcli.cli.admin_common import DESCRIPTIONS, MQADMIN_ORDER
from rmqcli.errors import UsageError

COMMANDS = {
    "updateTopic": topic.update_topic,
    "deleteTopic": topic.delete_topic,
    "updateBrokerConfig": broker.update_broker_config,
    "updateTopicPerm": topic.update_topic_perm,
    "topicRoute": topic.topic_route,
    "topicStatus": topic.topic_status,
    "topicClusterList": topic.topic_cluster_list,
    "brokerStatus": broker.broker_status,
    "clusterList": broker.cluster_list,
    "topicList": topic.topic_list,
    "updateKvConfig": broker.update_kv_config,
    "deleteKvConfig": broker.delete_kv_config,
    "wipeWritePerm": broker.wipe_write_perm,
    "addWritePerm": broker.add_write_perm,
    "updateOrderConf": topic.update_order_conf,
    "cleanExpiredCQ": broker.clean_expired_cq,
    "deleteExpiredCommitLog": broker.delete_expired_commit_log,
    "cleanUnusedTopic": broker.clean_unused_topic,
    "allocateMQ": topic.allocate_mq,
    "getNamesrvConfig": broker.get_namesrv_config,
    "updateNamesrvConfig": broker.update_namesrv_config,
    "getBrokerConfig": broker.get_broker_config,
}

# Part B: group, offset and message commands (their own modules register descriptions too).
MORE_COMMANDS = {**group.COMMANDS, **message.COMMANDS}
DESCRIPTIONS.update(group.DESCRIPTIONS)
DESCRIPTIONS.update(message.DESCRIPTIONS)


def register(app: typer.Typer) -> None:
    """Add every mqadmin command (mqadmin's names and descriptions) and ``help``."""
    for name, function in {**COMMANDS, **MORE_COMMANDS}.items():
        app.command(name, help=DESCRIPTIONS[name], short_help=DESCRIPTIONS[name])(function)
    app.command("help", help="Show the help of one command, as `mqadmin help <command>`.")(help_command)


def _description(command: Any, name: str) -> str:
    if name in DESCRIPTIONS:
        return DESCRIPTIONS[name]
    return command.get_short_help_str(limit=100)


def command_list(group: Any, ctx: Any) -> str:
    """``The most commonly used mqadmin commands are:`` and one ``   %-20s %s`` line per command:
    mqadmin's commands in its order, then the others (store, broker) as registered."""
    names = [n for n in group.list_commands(ctx) if n != "help"]
    known = [n for n in MQADMIN_ORDER if n in names]
    others = [n for n in names if n not in known]
    lines = ["The most commonly used mqadmin commands are:\n"]
    for name in known + others:
        command = group.get_command(ctx, name)
        if command is None or getattr(command, "hidden", False):
            continue
        lines.append(f"   {name:<20} {_description(command, name)}\n")
    lines.append("\nSee 'rmq help <command>' for more information on a specific command.\n")
    return "".join(lines)


def help_command(
    ctx: typer.Context,
    command: Annotated[
        str | None, typer.Argument(help="The command to describe.", show_default=False)
    ] = None,
) -> None:
    """Show the help of one command, as `mqadmin help <command>`."""
    root = ctx.find_root()
    group = root.command
    if command is None:
        typer.echo(command_list(group, root), nl=False)
        return
    sub = group.get_command(root, command)  # type: ignore[attr-defined]
    if sub is None:
        raise UsageError(f"The sub command {command} not exist.")
    sub_ctx = click.Context(sub, info_name=command, parent=root)
    typer.echo(sub.get_help(sub_ctx))
