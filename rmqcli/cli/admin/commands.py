"""``rmq help CMD`` and the command listing ``rmq`` prints without arguments (protocol.md C.1)."""

from typing import Annotated, Any

import typer
from typer import _click as click

from rmqcli.cli.admin.registry import MQADMIN_ORDER
from rmqcli.errors import UsageError

HELP_HELP = "Show the help of one command, as `mqadmin help <command>`."


def command_list(group: Any, ctx: Any) -> str:
    """``The most commonly used mqadmin commands are:`` and one ``   %-20s %s`` line per command:
    mqadmin's commands in its order, then the others (store, broker) as registered."""
    names = [n for n in group.list_commands(ctx) if n != "help"]
    known = [n for n in MQADMIN_ORDER if n in names]
    others = [n for n in names if n not in known]
    lines = ["The most commonly used mqadmin commands are:\n"]
    for name in known + others:
        text = group.summary(ctx, name, 100)
        if text is not None:
            lines.append(f"   {name:<20} {text}\n")
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
