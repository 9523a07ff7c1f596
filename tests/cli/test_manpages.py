"""The committed man pages are exactly what the command tree generates."""

from __future__ import annotations

from pathlib import Path

from rmqcli.cli.manpages import generate, write_pages
from tests.support import ROOT

MAN = ROOT / "man"


def test_man_pages_are_up_to_date(tmp_path: Path) -> None:
    written = write_pages(tmp_path)
    fresh = {p.name: p.read_text(encoding="utf-8") for p in written}
    committed = {p.name: p.read_text(encoding="utf-8") for p in MAN.glob("rmq*.1")}
    assert fresh == committed, "man/ is stale: run `make man`"


def test_every_command_has_a_page() -> None:
    """Every command at every level has a page, listed on its group's page (``rmq-pipeline-export``
    on ``rmq-pipeline``, which is on ``rmq``); every page documents the exit codes."""
    import typer

    from rmqcli.cli.main import app

    pages = generate()
    root = typer.main.get_command(app)
    pending = [(root, "rmq")]
    seen = set()
    while pending:
        group, path = pending.pop()
        ctx = group.make_context(path, [], resilient_parsing=True)
        for name in group.list_commands(ctx):
            page = f"{path}-{name}.1"
            assert page in pages, page
            assert f"\\fB{name.replace('-', chr(92) + '-')}\\fR" in pages[f"{path}.1"], page
            seen.add(page)
            sub = group.get_command(ctx, name)
            if hasattr(sub, "list_commands"):
                pending.append((sub, f"{path}-{name}"))
    assert set(pages) == seen | {"rmq.1"}
    assert "rmq-pipeline-export.1" in seen
    assert all(".SH EXIT STATUS" in text for text in pages.values())


def test_generation_is_deterministic() -> None:
    assert generate() == generate()
