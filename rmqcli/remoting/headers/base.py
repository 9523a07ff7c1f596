"""How a typed custom header is declared, built, written and read (protocol.md A.5).

Each header is a class of keyword-only fields (``header``, ``req``, ``opt``). A field's wire key is
its Java field name (the camelCase of the Python name unless given), its kind says how Java
converts it (A.5): ``str``, ``int`` (``Integer``), ``long``, ``bool`` (``"true"``/``"false"``;
``Boolean.parseBoolean`` when reading, so C++'s ``"1"`` reads as false, B.6), ``float``. ``None``
fields are omitted. Fields that are Java primitives or have a Java default keep that default here,
so they are always sent, as Java does.
Required fields (``@CFNotNull``) missing on decode raise ``HeaderError`` with Java's message.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar, dataclass_transform

from formats.javatext import INT_RANGE, LONG_RANGE, parse_boolean, parse_integer
from rmqcli.errors import HeaderError  # defined with the other errors, also importable from here
from rmqcli.remoting.javanames import camel

__all__ = ["JAVA_RANGES", "CommandHeader", "HeaderError", "header", "opt", "req"]

JAVA_RANGES = {"int": INT_RANGE, "long": LONG_RANGE}


class _Field:
    """What ``req`` / ``opt`` declare about one header field."""

    __slots__ = ("kind", "key", "required", "default")

    def __init__(self, kind: str, key: str | None, required: bool, default: Any) -> None:
        self.kind, self.key, self.required, self.default = kind, key, required, default


_REQUIRED = object()  # the default of a field without one (a required constructor argument)


def req(kind: str = "str", key: str | None = None) -> Any:
    """A ``@CFNotNull`` field: a constructor argument, required on decode."""
    return _Field(kind, key, True, _REQUIRED)


def opt(kind: str = "str", key: str | None = None, default: Any = None) -> Any:
    """An optional field; ``default`` mirrors a Java primitive or initialiser (always sent)."""
    return _Field(kind, key, False, default)


def _to_str(kind: str, value: Any) -> str:
    if kind == "bool":
        return "true" if value else "false"
    if kind == "float":
        return repr(float(value))
    if kind in ("int", "long"):
        return str(int(value))
    return str(value)


def _parse(kind: str, text: str) -> Any:
    """``Integer.parseInt`` / ``Long.parseLong`` / ``Boolean.parseBoolean`` / ``Double.parseDouble``."""
    if kind == "str":
        return text
    if kind == "bool":
        return parse_boolean(text)
    if kind in ("int", "long"):
        return parse_integer(text, JAVA_RANGES[kind])
    if kind == "float":
        return float(text.strip())
    raise TypeError(kind)


def _parse_int(text: str) -> int:
    if text.isascii() and text.isdigit():  # the common case: no sign, no range check below 2**31
        value = int(text)
        if value <= JAVA_RANGES["int"][1]:
            return value
    return _parse("int", text)


def _parse_long(text: str) -> int:
    if text.isascii() and text.isdigit():
        value = int(text)
        if value <= JAVA_RANGES["long"][1]:
            return value
    return _parse("long", text)


def _parser(kind: str) -> Callable[[str], Any] | None:
    """The ``_parse`` of one kind as a function of the text (``None`` for strings, kept as sent)."""
    if kind == "str":
        return None
    if kind == "int":
        return _parse_int
    if kind == "long":
        return _parse_long
    return functools.partial(_parse, kind)


H = TypeVar("H", bound="CommandHeader")


class CommandHeader:
    """Base of every typed header: ``to_ext_fields`` / ``from_ext_fields`` (A.5).

    ``header`` declares a subclass from its ``req`` / ``opt`` fields; what a dataclass would make
    at import time (``__init__``, the decoder) is made on a class's first use instead, so that
    importing the 60-odd headers costs little (``python -X importtime``).
    """

    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]  # compared by value, so unhashable (as a dataclass)
    _fields: ClassVar[tuple[tuple[str, _Field], ...]] = ()
    _wire: ClassVar[tuple[tuple[str, str, str, bool], ...]] = ()

    def __init__(self, **values: Any) -> None:
        """Keyword arguments only; the class's own ``__init__`` is generated on the first call."""
        cls = type(self)
        init = _initializer(cls)
        type.__setattr__(cls, "__init__", init)
        init(self, **values)

    def __repr__(self) -> str:
        values = ", ".join(f"{name}={getattr(self, name)!r}" for name, _ in self._fields)
        return f"{type(self).__qualname__}({values})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name, _ in self._fields)

    @classmethod
    def wire_fields(cls) -> tuple[tuple[str, str, str, bool], ...]:
        """``(python name, wire key, kind, required)`` in declaration order."""
        if not cls.__dict__.get("_wire"):
            wire = tuple((name, f.key or camel(name), f.kind, f.required) for name, f in cls._fields)
            type.__setattr__(cls, "_wire", wire)
        return cls._wire

    def to_ext_fields(self) -> dict[str, str]:
        """``makeCustomHeaderToNet``: every non-null field as a string, in declaration order."""
        ext: dict[str, str] = {}
        for name, key, kind, _ in self.wire_fields():
            value = getattr(self, name)
            if value is not None:
                ext[key] = _to_str(kind, value)
        return ext

    @classmethod
    def from_ext_fields(cls: type[H], ext: Mapping[str, str] | None) -> H:
        """``decodeCommandCustomHeader``: missing required fields and unparsable required values
        raise ``HeaderError``; an unparsable optional value is dropped (Java logs it)."""
        decode = cls.__dict__.get("_decode")
        if decode is None:
            decode = _decoder(cls)
            type.__setattr__(cls, "_decode", decode)
        return decode(ext or {})


_DIGITS = {"int": 9, "long": 18}  # this many plain digits always fit the Java type


def _decoder(cls: type[H]) -> Callable[[Mapping[str, str]], H]:
    """``from_ext_fields`` of one class as straight-line code (a header is decoded per request).

    Every field is read with one lookup; plain decimal digits short enough to fit the Java type
    are converted inline, anything else goes through the kind's parser (``_parse``). Missing or
    unparsable optional fields keep their defaults.
    """
    lines = ["def decode(ext):", "    get = ext.get", "    obj = new(cls)"]
    env: dict[str, Any] = {"new": object.__new__, "cls": cls, "HeaderError": HeaderError}
    defaults = {name: f.default for name, f in cls._fields}
    for name, key, kind, required in cls.wire_fields():
        parse = _parser(kind)
        env[f"p_{name}"] = parse
        env[f"d_{name}"] = defaults[name]
        lines.append(f"    text = get({key!r})")
        missing = f"raise HeaderError({f'the custom field <{key}> is null'!r})" if required else None
        if parse is None:
            value = "text"
        elif kind in _DIGITS:
            fits = f"text.isascii() and text.isdigit() and len(text) <= {_DIGITS[kind]}"
            value = f"int(text) if {fits} else p_{name}(text)"
        else:
            value = f"p_{name}(text)"
        if required:
            lines.append(f"    if text is None: {missing}")
            if parse is None:
                lines.append(f"    obj.{name} = text")
            else:
                bad = f"the custom field <{key}> is not a valid {kind}: "
                lines += [
                    "    try:",
                    f"        obj.{name} = {value}",
                    "    except ValueError:",
                    f"        raise HeaderError({bad!r} + repr(text)) from None",
                ]
        elif parse is None:
            lines.append(f"    obj.{name} = d_{name} if text is None else text")
        else:
            lines += [
                f"    obj.{name} = d_{name}",
                "    if text is not None:",
                "        try:",
                f"            obj.{name} = {value}",
                "        except ValueError:",
                "            pass",
            ]
    lines.append("    return obj")
    exec("\n".join(lines), env)  # noqa: S102 - code generated from the class's own field table
    return env["decode"]


def _initializer(cls: type[H]) -> Callable[..., None]:
    """The keyword-only ``__init__`` of one class, as a dataclass would write it."""
    env: dict[str, Any] = {}
    params, body = [], []
    for name, f in cls._fields:
        if f.default is _REQUIRED:
            params.append(name)
        else:
            env[f"d_{name}"] = f.default
            params.append(f"{name}=d_{name}")
        body.append(f"    self.{name} = {name}")
    code = f"def __init__(self, *, {', '.join(params)}):\n" + ("\n".join(body) or "    pass")
    exec(code, env)  # noqa: S102 - code generated from the class's own field table
    init = env["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


@dataclass_transform(kw_only_default=True, field_specifiers=(req, opt))
def header(cls: type[H]) -> type[H]:
    """Declare a header class: keyword-only fields (``req`` / ``opt``) in slots."""
    fields = tuple((name, cls.__dict__[name]) for name in cls.__dict__.get("__annotations__", {}))
    namespace = {k: v for k, v in cls.__dict__.items() if k not in dict(fields)}
    namespace.pop("__dict__", None)
    namespace.pop("__weakref__", None)
    namespace["__slots__"] = tuple(name for name, _ in fields)
    namespace["_fields"] = fields
    return type(cls)(cls.__name__, cls.__bases__, namespace)
