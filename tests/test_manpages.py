"""The committed man pages are exactly what the command tree generates."""

from __future__ import annotations

from pathlib import Path

from rmqcli.cli.manpages import generate, write_pages

MAN = Path(__file__).resolve().parents[1] / "man"


def test_man_pages_are_up_to_date(tmp_path: Path) -> None:
    written = write_pages(tmp_path)
    fresh = {p.name: p.read_text(encoding="utf-8") for p in written}
    committed = {p.name: p.read_text(encoding="utf-8") for p in MAN.glob("rmq*.1")}
    assert fresh == committed, "man/ is stale: run `make man`"


def test_every_command_has_a_page() -> None:
    pages = generate()
    root = pages["rmq.1"]
    for name in pages:
        if name != "rmq.1":
            command = name.removeprefix("rmq-").removesuffix(".1")
            assert f"\\fB{command.replace('-', chr(92) + '-')}\\fR" in root
            assert ".SH EXIT STATUS" in pages[name]


def test_generation_is_deterministic() -> None:
    assert generate() == generate()
