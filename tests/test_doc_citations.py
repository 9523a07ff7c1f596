"""Every citation of the format and protocol references names a section they have.

The code cites ``docs/formats.md`` as ``formats.md §3.2`` and ``docs/protocol.md`` as
``protocol.md B.4`` (``docs/README.md``): a document name, then section numbers, ranges
(``§1.9-1.11``, ``A.1-A.4``), lists joined by ``,``, ``;`` or ``and``, words such as ``requests``
and ``bodies``, remarks in parentheses, or a quoted heading name (``formats.md "IndexFile"``). Each
section found so must be a heading of the document; the old upper-case names of the documents,
which lived outside the repository, must not be cited any more.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SCANNED = ("rmqcli", "formats", "fixtures", "tests")
TEXT_SUFFIXES = set(".py .md .txt .rst .java .js .json .toml .cfg .ini .yaml .yml".split())
SKIPPED_DIRS = {"node_modules", "__pycache__"}
THIS_FILE = Path(__file__).resolve()

# A cited section of formats.md starts with § (a range may leave it out after the dash: §1.9-1.11);
# one of protocol.md is a letter and numbers (B.4, C.4.7) or a letter alone (A).
FORMATS_ID = r"§\d+(?:\.\d+)*(?:\s?-\s?§?\d+(?:\.\d+)*)?"
PROTOCOL_ID = r"[A-F](?:\.\d+)*(?:\s?-\s?[A-F](?:\.\d+)*)?"
DOCUMENTS = {
    "formats.md": (DOCS / "formats.md", FORMATS_ID),
    "protocol.md": (DOCS / "protocol.md", PROTOCOL_ID),
}

NAME = re.compile(r"(?<![\w/.-])(?:docs/)?(formats|protocol)\.md\b")
OLD_NAME = re.compile(r"\b(?:FORMATS|PROTOCOL)\.md\b")


def _span_pattern(section_id: str) -> re.Pattern[str]:
    """What may follow a document name: section ids and ranges, separators, a few joining words,
    remarks in parentheses and quoted heading names, across line breaks and comment markers."""
    section = rf"(?<![\w.]){section_id}(?![\w§])"
    token = rf"""(?:{section}|\([^()]*\)|"[^"\n]+"|[,;]|(?<![\w])(?:and|requests|bodies)(?![\w])|\s+\#*)"""
    return re.compile(rf"(?:{token})*")


SPANS = {name: _span_pattern(section_id) for name, (_, section_id) in DOCUMENTS.items()}


@dataclass(frozen=True)
class Citation:
    path: Path
    line: int
    document: str
    text: str
    sections: tuple[str, ...]
    headings: tuple[str, ...]

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}: {self.text!r}"


def _plain(section: str) -> str:
    return section.lstrip("§")


def _expand(first: str, last: str) -> list[str]:
    """``1.9``-``1.11`` -> 1.9, 1.10, 1.11; ``A.1``-``A.4`` -> A.1 … A.4; otherwise both ends."""
    a, b = first.split("."), last.split(".")
    if len(a) == len(b) and a[:-1] == b[:-1] and a[-1].isdigit() and b[-1].isdigit():
        lo, hi = int(a[-1]), int(b[-1])
        if lo <= hi and hi - lo < 50:
            return [".".join([*a[:-1], str(n)]) for n in range(lo, hi + 1)]
    return [first, last]


def _sections(span: str, section_id: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The section ids and the quoted heading names of a citation's span."""
    no_remarks = re.sub(r"\([^()]*\)", " ", span)
    quoted = tuple(re.findall(r'"([^"\n]+)"', no_remarks))
    no_quotes = re.sub(r'"[^"\n]+"', " ", no_remarks)
    found: list[str] = []
    for cited in re.findall(rf"(?<![\w.]){section_id}(?![\w§])", no_quotes):
        first, _, last = (part.strip() for part in cited.partition("-"))
        found.extend(_expand(_plain(first), _plain(last)) if last else [_plain(first)])
    return tuple(found), quoted


def _scanned_files() -> list[Path]:
    files = []
    for top in SCANNED:
        base = ROOT / top
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            parts = set(path.relative_to(ROOT).parts)
            if parts & SKIPPED_DIRS or any(p.startswith(".") for p in path.relative_to(ROOT).parts):
                continue
            if path.is_file() and path.suffix in TEXT_SUFFIXES and path.resolve() != THIS_FILE:
                files.append(path)
    return files


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _span(text: str, match: re.Match[str]) -> str:
    """The part after a document name that says which sections are cited."""
    return SPANS[f"{match.group(1)}.md"].match(text, match.end()).group(0)


def _citations() -> list[Citation]:
    found = []
    for path in _scanned_files():
        text = _read(path)
        for match in NAME.finditer(text):
            document = f"{match.group(1)}.md"
            span = _span(text, match)
            sections, headings = _sections(span, DOCUMENTS[document][1])
            line = text.count("\n", 0, match.start()) + 1
            cited = (match.group(0) + span).strip()
            found.append(Citation(path, line, document, " ".join(cited.split()), sections, headings))
    return found


def _headings(document: str) -> tuple[set[str], list[str]]:
    """The section ids and the heading texts of a document, code blocks left out."""
    path, _ = DOCUMENTS[document]
    heading_id = re.compile(r"^§?([A-F](?:\.\d+)*|\d+(?:\.\d+)*)\.?(?:\s|$)")
    ids: set[str] = set()
    texts: list[str] = []
    fenced = False
    for line in _read(path).splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        heading = re.match(r"^#{1,6}\s+(.+?)\s*#*\s*$", line)
        if fenced or not heading:
            continue
        title = heading.group(1)
        texts.append(title)
        number = heading_id.match(title)
        if number:
            ids.add(number.group(1))
    return ids, texts


CITATIONS = _citations()


@pytest.mark.parametrize("document", sorted(DOCUMENTS))
def test_documents_exist_with_numbered_headings(document):
    path, _ = DOCUMENTS[document]
    assert path.is_file(), f"{path.relative_to(ROOT)} is missing"
    ids, _ = _headings(document)
    assert len(ids) >= 10, f"{document}: too few numbered headings ({sorted(ids)})"


def test_grammar_of_a_citation():
    """The parser reads the forms the code uses."""
    text = "x (formats.md §1.9-1.11, §1.13; protocol.md C.2, C.4.7; requests B.4 and A.1 (frame)) y"
    spans = [(m.group(1), _span(text, m)) for m in NAME.finditer(text)]
    assert _sections(spans[0][1], FORMATS_ID) == (("1.9", "1.10", "1.11", "1.13"), ())
    assert _sections(spans[1][1], PROTOCOL_ID) == (("C.2", "C.4.7", "B.4", "A.1"), ())
    quoted = 'formats.md "IndexFile" and formats.md §1-§3'
    spans = [_span(quoted, m) for m in NAME.finditer(quoted)]
    assert _sections(spans[0], FORMATS_ID) == ((), ("IndexFile",))
    assert _sections(spans[1], FORMATS_ID) == (("1", "2", "3"), ())
    assert _sections(" A and B.", PROTOCOL_ID) == (("A", "B"), ())
    assert not OLD_NAME.search("formats.md protocol.md docs/formats.md")


def test_every_cited_section_is_a_heading():
    assert CITATIONS, "no citation of docs/formats.md or docs/protocol.md found"
    headings = {document: _headings(document) for document in DOCUMENTS}
    missing = []
    for citation in CITATIONS:
        ids, texts = headings[citation.document]
        absent = [s for s in citation.sections if s not in ids]
        absent += [f'"{h}"' for h in citation.headings if not any(h in text for text in texts)]
        if absent:
            names = ", ".join(absent)
            missing.append(f"{citation.where()} -> no heading {names} in docs/{citation.document}")
    assert not missing, "\n".join(missing)


def test_both_documents_are_cited():
    cited = {citation.document for citation in CITATIONS if citation.sections or citation.headings}
    assert cited == set(DOCUMENTS)


def test_no_citation_of_the_old_names():
    old = []
    for path in _scanned_files():
        for number, line in enumerate(_read(path).splitlines(), 1):
            if OLD_NAME.search(line):
                old.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not old, "cite docs/formats.md and docs/protocol.md instead:\n" + "\n".join(old)
