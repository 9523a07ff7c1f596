"""``rmq exporter``: a cluster's metrics for Prometheus with apache/rocketmq-exporter's families
(``metrics.md §4``): ``families`` (names, help texts, labels, the runtime table's keys),
``collect`` (one scrape: a bounded round of admin requests, and its text), ``run`` (the process
and its HTTP endpoint, ``rmqcli.metrics.http``)."""
