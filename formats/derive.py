"""Derive fast ``struct.Struct`` forms from Construct declarations.

Hot loops read fixed-size prefixes millions of times; Construct's parser is too slow there, so
this module turns a ``Struct`` of fixed-size members (format fields, fixed-length ``Bytes`` and
nested structs of those) into the equivalent ``struct.Struct`` at import time. The layout is
still declared once, in Construct.

Design note: the Construct declarations in ``formats/`` are the single source of every layout
(field order, widths, byte order, each named as formats.md names it); the fast forms that hot
paths use (``struct.Struct`` here, field offsets, the numpy dtypes of the bulk scans) are
derived from them, never typed by hand, so a layout cannot be fixed in one form and left wrong
in another. This is what to keep and follow: a new format is a declaration in ``formats/``
plus whatever compiled form it needs, derived by a function like these.
"""

from __future__ import annotations

import struct

import construct as cs


def _unwrap(sub: cs.Construct) -> cs.Construct:
    while isinstance(sub, cs.Renamed):
        sub = sub.subcon
    return sub


def flat_fields(schema: cs.Struct, prefix: str = "") -> list[tuple[str, str, int]]:
    """``(dotted name, struct code, size)`` of every leaf of a fixed-size ``schema``."""
    leaves: list[tuple[str, str, int]] = []
    for sub in schema.subcons:
        inner = _unwrap(sub)
        name = prefix + sub.name
        if isinstance(inner, cs.Struct):
            leaves.extend(flat_fields(inner, name + "."))
        elif isinstance(inner, cs.FormatField):
            if inner.fmtstr[0] != ">":
                raise TypeError(f"{name}: RocketMQ layouts are big-endian")
            leaves.append((name, inner.fmtstr[1:], inner.length))
        elif isinstance(inner, cs.Bytes) and isinstance(inner.length, int):
            leaves.append((name, f"{inner.length}s", inner.length))
        else:
            raise TypeError(f"{name}: not a fixed-size field")
    return leaves


def compile_struct(schema: cs.Struct) -> struct.Struct:
    """A big-endian ``struct.Struct`` with the leaves of ``schema``, in declaration order."""
    return struct.Struct(">" + "".join(code for _, code, _ in flat_fields(schema)))


def field_offsets(schema: cs.Struct) -> dict[str, int]:
    """Byte offset of every leaf of a fixed-size ``schema`` (dotted names), plus ``"_size"``."""
    offsets: dict[str, int] = {}
    pos = 0
    for name, _, size in flat_fields(schema):
        offsets[name] = pos
        pos += size
    offsets["_size"] = pos
    return offsets


def field_struct(schema: cs.Struct, name: str) -> struct.Struct:
    """The compiled form of the one member ``name`` of ``schema`` (a scan that reads one field)."""
    members = [sub for sub in schema.subcons if sub.name == name]
    if len(members) != 1:
        raise KeyError(f"{name}: not a member of the schema")
    return compile_struct(cs.Struct(*members))
