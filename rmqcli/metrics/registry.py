"""Instruments and their Prometheus text, as a 5.1.1 broker's OpenTelemetry 1.26.0 exporter writes
them (``metrics.md §2``).

A ``Meter`` holds counters and histograms recorded as events happen (every attribute set kept
until the broker stops, at most ``CARDINALITY`` per instrument) and gauges whose callback runs at
each scrape. ``render`` writes them in format 0.0.4 or OpenMetrics: the ``target_info`` and
``otel_scope_info`` blocks first, then per family ``# TYPE`` before ``# HELP``, every sample with
``otel_scope_name`` first and the other labels sorted by key, values as Java prints a double, and
the scrape time (milliseconds; seconds with three decimals in OpenMetrics). A family with no
point is left out.
"""

from __future__ import annotations

import bisect
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal

log = logging.getLogger(__name__)

CARDINALITY = 2000  # the SDK's attribute sets per instrument; more are dropped (logged once)
SCOPE = "broker-meter"
Labels = tuple[tuple[str, str], ...]
Point = tuple[Mapping[str, object], float]


def java_double(value: float) -> str:
    """``Double.toString``: ``50.0``, ``0.5``, ``2.7509530624E10``, ``1.0E-4``, ``NaN``, ``Infinity``
    (the shortest digits that give the double back, as ``repr``)."""
    value = float(value)
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    power = len(digits) + int(exponent) - 1  # the decimal exponent of the first digit
    minus = "-" if sign else ""
    if 1e-3 <= abs(value) < 1e7:
        if power >= 0:
            whole, frac = text[: power + 1].ljust(power + 1, "0"), text[power + 1 :]
        else:
            whole, frac = "0", "0" * (-power - 1) + text
        return f"{minus}{whole}.{frac or '0'}"
    return f"{minus}{text[0]}.{text[1:] or '0'}E{power}"


def _labels(attrs: Mapping[str, object]) -> Labels:
    return tuple(sorted((k, _text(v)) for k, v in attrs.items() if v is not None))


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@dataclass
class _Instrument:
    name: str
    help: str
    common: Labels
    points: dict[Labels, object] = field(default_factory=dict)
    dropped: bool = False

    def _key(self, attrs: Mapping[str, object]) -> Labels | None:
        key = _labels({**dict(self.common), **attrs})
        if key not in self.points and len(self.points) >= CARDINALITY:
            if not self.dropped:
                log.warning(
                    "metric %s has exceeded the maximum allowed cardinality (%d)", self.name, CARDINALITY
                )
                self.dropped = True
            return None
        return key


class Counter(_Instrument):
    kind = "counter"

    def add(self, value: float = 1, **attrs: object) -> None:
        key = self._key(attrs)
        if key is not None:
            self.points[key] = self.points.get(key, 0) + value  # type: ignore[operator]

    def collect(self) -> Iterable[tuple[Labels, float]]:
        return list(self.points.items())  # type: ignore[arg-type]


class Histogram(_Instrument):
    """Explicit buckets (inclusive upper bounds, ``le``); the sum is a long, as ``ofLongs``."""

    kind = "histogram"

    def __init__(self, name: str, help: str, common: Labels, boundaries: tuple[float, ...]):
        super().__init__(name, help, common)
        self.boundaries = boundaries

    def record(self, value: float, **attrs: object) -> None:
        key = self._key(attrs)
        if key is None:
            return
        point = self.points.get(key)
        if point is None:
            point = self.points[key] = [0, 0, [0] * (len(self.boundaries) + 1)]
        point[0] += 1  # type: ignore[index]
        point[1] += int(value)  # type: ignore[index]
        point[2][bisect.bisect_left(self.boundaries, value)] += 1  # type: ignore[index]


class Gauge(_Instrument):
    """An observable gauge: ``callback()`` gives its points at each scrape."""

    kind = "gauge"

    def __init__(self, name: str, help: str, common: Labels, callback: Callable[[], Iterable[Point]]):
        super().__init__(name, help, common)
        self.callback = callback

    def collect(self) -> Iterable[tuple[Labels, float]]:
        found: dict[Labels, float] = {}
        try:
            for attrs, value in self.callback():
                key = _labels({**dict(self.common), **attrs})
                if key in found or len(found) < CARDINALITY:
                    found[key] = float(value)
        except Exception:  # a callback's failure costs its family, never the scrape
            log.exception("metric %s: its callback failed", self.name)
        return list(found.items())


class Meter:
    """The instruments of one broker, with the labels every series carries (``common``)."""

    def __init__(self, common: Mapping[str, object], scope: str = SCOPE):
        self.common = _labels(common)
        self.scope = scope
        self.instruments: list[_Instrument] = []

    def counter(self, name: str, help: str, **extra: object) -> Counter:
        return self._add(Counter(name, help, self._with(extra)))

    def histogram(self, name: str, help: str, boundaries: tuple[float, ...], **extra: object) -> Histogram:
        return self._add(Histogram(name, help, self._with(extra), boundaries))

    def gauge(self, name: str, help: str, callback: Callable[[], Iterable[Point]], **extra: object) -> Gauge:
        return self._add(Gauge(name, help, self._with(extra), callback))

    def _with(self, extra: Mapping[str, object]) -> Labels:
        return _labels({**dict(self.common), **extra})

    def _add(self, instrument):  # type: ignore[no-untyped-def]
        self.instruments.append(instrument)
        return instrument

    def render(self, now_ms: int, *, openmetrics: bool = False, names: frozenset[str] | None = None) -> str:
        """The exposition of one scrape at ``now_ms``; ``names``: only these families."""
        stamp = f"{now_ms // 1000}.{now_ms % 1000:03d}" if openmetrics else str(now_ms)
        lines = [
            "# TYPE target info",
            "# HELP target Target metadata",
            "target_info 1" if openmetrics else "target_info{} 1",
            "# TYPE otel_scope_info info",
            "# HELP otel_scope_info Scope metadata",
            f'otel_scope_info{{otel_scope_name="{self.scope}"}} 1',
        ]
        scope = f'otel_scope_name="{escape_label(self.scope)}"'
        for instrument in self.instruments:
            if names is not None and instrument.name not in names:
                continue
            samples = self._samples(instrument, scope, stamp)
            if samples:
                lines += [
                    f"# TYPE {instrument.name} {instrument.kind}",
                    f"# HELP {instrument.name} {instrument.help}",
                ]
                lines += samples
        if openmetrics:
            lines.append("# EOF")
        return "\n".join(lines) + "\n"

    def _samples(self, instrument: _Instrument, scope: str, stamp: str) -> list[str]:
        def series(name: str, key: Labels, value: str, le: str | None = None) -> str:
            parts = [scope, *(f'{k}="{escape_label(v)}"' for k, v in key)]
            if le is not None:
                parts.append(f'le="{le}"')
            return f"{name}{{{','.join(parts)}}} {value} {stamp}"

        out: list[str] = []
        if isinstance(instrument, Histogram):
            for key, (count, total, buckets) in list(instrument.points.items()):  # type: ignore[misc]
                out.append(series(f"{instrument.name}_count", key, java_double(count)))
                out.append(series(f"{instrument.name}_sum", key, java_double(total)))
                running = 0
                for bound, n in zip([*instrument.boundaries, None], buckets, strict=True):
                    running += n
                    le = "+Inf" if bound is None else java_double(float(bound))
                    out.append(series(f"{instrument.name}_bucket", key, java_double(running), le))
            return out
        for key, value in instrument.collect():  # type: ignore[attr-defined]
            out.append(series(instrument.name, key, java_double(value)))
        return out
