"""Prometheus text and its HTTP endpoint, shared by ``rmq serve``'s metrics
(``rmqcli.broker.metrics``) and ``rmq exporter`` (``rmqcli.exporter``): ``registry`` (instruments
and the OpenTelemetry 1.26.0 exposition of a 5.1.1 broker), ``http`` (the endpoint)."""
