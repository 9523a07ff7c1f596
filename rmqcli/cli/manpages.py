"""Generate roff man pages for ``rmq`` and each subcommand from the command tree.

``python -m rmqcli.cli.manpages DIR`` writes ``rmq.1`` and ``rmq-<command>.1`` into DIR. The output
depends only on the commands' declarations (no dates, no versions), so it can be committed and
checked for staleness by regenerating it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer
from typer import _click as click

from rmqcli.errors import EXIT_CODES

SECTION = "1"
SOURCE = "rmqcli"
MANUAL = "rmq manual"


def roff_escape(text: str) -> str:
    """Text safe in a roff line: backslashes and hyphens escaped, no leading control character."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    lines = []
    for line in text.split("\n"):
        if line[:1] in (".", "'"):
            line = "\\&" + line
        lines.append(line)
    return "\n".join(lines)


def _paragraphs(text: str) -> list[str]:
    """Docstring paragraphs, each re-flowed to one line."""
    paras = []
    for block in text.strip().split("\n\n"):
        words = " ".join(line.strip() for line in block.strip().splitlines())
        if words:
            paras.append(words)
    return paras


def _first_sentence(paragraph: str) -> str:
    return paragraph.split(". ")[0].split(": ")[0].rstrip(".")


def _context(command: click.Command, name: str, parent: click.Context | None) -> click.Context:
    return click.Context(command, info_name=name, parent=parent, **command.context_settings)


def _synopsis(command: click.Command, ctx: click.Context, path: str) -> str:
    parts = [f"\\fB{roff_escape(path)}\\fR", "[\\fIOPTIONS\\fR]"]
    for param in command.get_params(ctx):
        if param.param_type_name != "argument":
            continue
        record = param.get_help_record(ctx)
        name = record[0].split()[0] if record else str(param.name).upper()
        name = roff_escape(name.strip("{}[]").upper())
        parts.append(f"\\fI{name}\\fR" if param.required else f"[\\fI{name}\\fR]")
    if hasattr(command, "list_commands"):
        parts.append("\\fICOMMAND\\fR [\\fIARGS\\fR]...")
    return " ".join(parts)


def _param_items(command: click.Command, ctx: click.Context, kind: str) -> list[tuple[str, str]]:
    items = []
    for param in command.get_params(ctx):
        if param.param_type_name != kind or getattr(param, "hidden", False):
            continue
        record = param.get_help_record(ctx)
        if record:
            items.append((record[0], record[1] or ""))
    return items


def _tagged(items: list[tuple[str, str]]) -> list[str]:
    out = []
    for head, body in items:
        out += [".TP", f"\\fB{roff_escape(head)}\\fR", roff_escape(body) if body else ""]
    return [line for line in out if line != ""]


def _exit_codes() -> list[str]:
    from rmqcli.cli.main import EXTRA_EXIT_CODES

    codes = {**EXIT_CODES, **EXTRA_EXIT_CODES}
    out = [".SH EXIT STATUS"]
    for code in sorted(codes):
        out += [".TP", f"\\fB{code}\\fR", roff_escape(codes[code][:1].upper() + codes[code][1:] + ".")]
    return out


def render_page(
    command: click.Command,
    ctx: click.Context,
    path: str,
    subcommands: list[tuple[str, click.Command]] | None = None,
) -> str:
    """The roff text of one man page."""
    title = path.replace(" ", "-")
    help_text = command.help or ""
    paras = _paragraphs(help_text)
    summary = _first_sentence(paras[0]) if paras else title
    lines: list[str] = [
        f'.TH "{title.upper()}" "{SECTION}" "" "{SOURCE}" "{MANUAL}"',
        ".SH NAME",
        f"{roff_escape(title)} \\- {roff_escape(summary)}",
        ".SH SYNOPSIS",
        _synopsis(command, ctx, path),
        ".SH DESCRIPTION",
    ]
    for i, para in enumerate(paras):
        if i:
            lines.append(".PP")
        lines.append(roff_escape(para))
    arguments = _param_items(command, ctx, "argument")
    if arguments:
        lines.append(".SH ARGUMENTS")
        lines += _tagged(arguments)
    options = _param_items(command, ctx, "option")
    if options:
        lines.append(".SH OPTIONS")
        lines += _tagged(options)
    if subcommands:
        lines.append(".SH COMMANDS")
        for name, sub in subcommands:
            first = _paragraphs(sub.help or "")
            lines += [".TP", f"\\fB{roff_escape(name)}\\fR", roff_escape(_first_sentence(first[0]) + ".")]
            lines.append(f"See \\fB{roff_escape(f'{title}-{name}')}\\fR({SECTION}).")
    lines += _exit_codes()
    parent = path.rsplit(" ", 1)[0].replace(" ", "-")
    see = [f"{title}-{n}" for n, _ in subcommands] if subcommands else [parent]
    lines += [".SH SEE ALSO", ", ".join(f"\\fB{roff_escape(s)}\\fR({SECTION})" for s in see)]
    return "\n".join(lines) + "\n"


def _add_pages(command: click.Command, ctx: click.Context, path: str, pages: dict[str, str]) -> None:
    """The page of ``command`` and, for a group, of each of its subcommands (``rmq-pipeline-export``)."""
    subs: list[tuple[str, Any]] = []
    if hasattr(command, "list_commands"):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is None or sub.hidden:
                continue
            subs.append((name, sub))
            _add_pages(sub, _context(sub, name, ctx), f"{path} {name}", pages)
    pages[f"{path.replace(' ', '-')}.{SECTION}"] = render_page(command, ctx, path, subs)


def generate() -> dict[str, str]:
    """File name -> page text for ``rmq`` and every subcommand, at every level."""
    from rmqcli.cli.main import PROG, app

    root = typer.main.get_command(app)
    pages: dict[str, str] = {}
    _add_pages(root, _context(root, PROG, None), PROG, pages)
    return dict(sorted(pages.items()))


def write_pages(directory: Path) -> list[Path]:
    """Write every page into ``directory``, removing stale ``rmq*.1`` pages; returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    pages = generate()
    for old in directory.glob(f"rmq*.{SECTION}"):
        if old.name not in pages:
            old.unlink()
    written = []
    for name, text in pages.items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m rmqcli.cli.manpages DIR\n")
        return 2
    for path in write_pages(Path(args[0])):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
