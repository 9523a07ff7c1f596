"""The broker.conf keys of the broker's metrics (5.1.1 ``BrokerConfig``, ``metrics.md §1.1``).

``metricsExporterType``: ``DISABLE`` (the default) or ``PROM`` (Prometheus text on
``metricsPromExporterHost`` (empty: ``brokerIP1``) : ``metricsPromExporterPort``, default 5557);
``OTLP_GRPC`` and ``LOG`` are not implemented (named at start; metrics stay off). A number is the
enum's ordinal. ``metricsLabel`` (``k:v,k:v``) and ``metricsInDelta`` (the label
``aggregation="delta"``) label every series.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqcli.conf.keys import setting

EXPORTER_TYPES = ("DISABLE", "OTLP_GRPC", "PROM", "LOG")


@dataclass(frozen=True)
class MetricsConfig:
    exporter_type: str = setting("metricsExporterType")
    prom_host: str = setting("metricsPromExporterHost")
    prom_port: int = setting("metricsPromExporterPort")
    label: str = setting("metricsLabel")
    in_delta: bool = setting("metricsInDelta")

    @property
    def exporter(self) -> str:
        """The exporter's name (an ordinal given as a number named)."""
        value = str(self.exporter_type)
        return EXPORTER_TYPES[int(value)] if value.isdigit() else value

    @property
    def prom(self) -> bool:
        return self.exporter == "PROM"

    def _parsed_labels(self) -> tuple[dict[str, str], list[str]]:
        """``metricsLabel`` read once: its pairs and the entries that are not a pair."""
        found: dict[str, str] = {}
        bad: list[str] = []
        for entry in self.label.split(","):
            parts = entry.split(":")
            if len(parts) != 2:
                if entry.strip():
                    bad.append(entry)
            elif parts[0].strip():
                found[parts[0].strip()] = parts[1].strip()
        return found, bad

    def labels(self) -> dict[str, str]:
        """``metricsLabel``'s pairs: a pair without exactly one ``:`` is skipped (as 5.1.1 does,
        with a warning: ``bad_labels``)."""
        return self._parsed_labels()[0]

    def bad_labels(self) -> list[str]:
        return self._parsed_labels()[1]
