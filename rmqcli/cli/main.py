"""The ``rmq`` command: the typer app, its subcommands and the process entry point ``run``.

``run`` turns every failure into one line on stderr and a stable exit code (see
``rmqcli.errors.EXIT_CODES``): never a traceback for bad input.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Annotated

import typer
from typer import _click as click
from typer.core import TyperGroup

from rmqcli import __version__
from rmqcli.cli import commands
from rmqcli.errors import RmqError

PROG = "rmq"
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader went away (e.g. `| head`)
EXTRA_EXIT_CODES = {
    EXIT_INTERRUPTED: "interrupted (Ctrl-C)",
    EXIT_BROKEN_PIPE: "the output pipe was closed early (e.g. by head); nothing is printed",
}


def _error(message: str) -> None:
    sys.stderr.write(f"{PROG}: error: {message}\n")
    sys.stderr.flush()


def _quiet_broken_pipe() -> int:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    return EXIT_BROKEN_PIPE


def _build(name: str) -> click.Command:
    """The click command of ``name`` from its declaration (``commands.find``): a typer function or
    app, or an mqadmin ``AdminCommand``."""
    target = commands.resolve(name)
    if isinstance(target, typer.Typer):
        group = typer.main.get_group(target)
        group.name = name
        return group
    from rmqcli.cli.admin.registry import AdminCommand, build

    if isinstance(target, AdminCommand):
        return build(target)
    from typer.models import CommandInfo

    from rmqcli.cli.admin.commands import HELP_HELP

    text = HELP_HELP if name == "help" else None
    info = CommandInfo(name=name, callback=target, help=text, short_help=text)
    return typer.main.get_command_from_info(info, pretty_exceptions_short=True, rich_markup_mode=None)


class RmqGroup(TyperGroup):
    """The top-level group: turns ``RmqError`` and a closed pipe into an exit code.

    Subcommands are imported and built when first asked for (``commands.find``): a run of one
    command builds one click command, not sixty.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(commands.every())

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            if commands.find(cmd_name) is not None:
                self.commands[cmd_name] = _build(cmd_name)
            elif (name := commands.canonical(cmd_name)) is not None:  # mqadmin's case and aliases
                self.commands[cmd_name] = _build(name)
        return super().get_command(ctx, cmd_name)

    def summary(self, ctx: click.Context, name: str, limit: int) -> str | None:
        """The one line listings show for ``name`` (None: not listed). An mqadmin command's is its
        description, read from the declaration without building the command."""
        if name in commands.admin() and name not in self.commands:
            return commands.resolve(name).description
        command = self.get_command(ctx, name)
        if command is None or command.hidden:
            return None
        return command.get_short_help_str(limit)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """``Commands:`` of ``rmq --help``, as click writes it, from ``summary``."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = [(name, text) for name in names if (text := self.summary(ctx, name, limit)) is not None]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """No arguments: list the commands as mqadmin does (protocol.md C.1)."""
        if not args and not ctx.resilient_parsing:
            from rmqcli.cli.admin.commands import command_list

            typer.echo(command_list(self, ctx), nl=False)
            ctx.exit(0)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context):  # type: ignore[no-untyped-def]
        try:
            return super().invoke(ctx)
        except RmqError as exc:
            _error(str(exc).replace("\n", " ") or type(exc).__name__)
            raise typer.Exit(exc.exit_code) from None
        except BrokenPipeError:
            raise typer.Exit(_quiet_broken_pipe()) from None


app = typer.Typer(name=PROG, cls=RmqGroup, pretty_exceptions_enable=False, **commands.GROUP_SETTINGS)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"{PROG} {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", "-V", is_eager=True, callback=_show_version, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """A command-line toolkit for Apache RocketMQ operators.

    Store inspector commands read a broker's store directory offline. Every command has --json;
    listing commands have --output table|json|jsonl|yaml. Tables are drawn on a terminal and
    become tab-separated text when the output is piped.
    """


def invoke(args: Sequence[str]) -> int:
    """Run ``rmq`` with ``args`` and return the exit code; errors are reported on stderr."""
    command = typer.main.get_command(app)
    command._main_shell_completion({}, PROG, None)  # handles _RMQ_COMPLETE requests, then exits
    try:
        with command.make_context(PROG, list(args)) as ctx:
            command.invoke(ctx)
        return 0
    except typer.Exit as exc:
        return exc.exit_code
    except click.exceptions.NoArgsIsHelpError as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        _error(exc.format_message().replace("\n", " ") + hint)
        return 2
    except click.exceptions.ClickException as exc:
        _error(exc.format_message().replace("\n", " "))
        return exc.exit_code
    except typer.Abort:
        return EXIT_INTERRUPTED
    except RmqError as exc:
        _error(str(exc).replace("\n", " ") or type(exc).__name__)
        return exc.exit_code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return _quiet_broken_pipe()


def run(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point."""
    code = invoke(sys.argv[1:] if argv is None else argv)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        code = _quiet_broken_pipe()
    except (OSError, ValueError):
        pass
    sys.exit(code)


if __name__ == "__main__":
    run()
