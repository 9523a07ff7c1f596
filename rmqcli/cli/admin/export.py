"""mqadmin's export commands (``tools.command.export``): exportConfigs, exportMetadata,
exportMetrics.

Each writes mqadmin's file (fastjson's pretty JSON) and prints mqadmin's line: ``export <path>
success``, without a newline except for exportMetadata ``-c``, after CommandUtil's ``[error] ...``
(no newline either) when ``-c`` names no cluster. ``--json`` prints the exported document instead.
Exit codes where mqadmin only prints a stack trace (and exits 0): exportMetrics of an unknown
cluster exits 3 (not found); a file that cannot be written exits 1; a broker that cannot be
reached 5, one that answers an error 6.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from rmqcli.cli.admin.registry import (
    AdminCommand,
    Args,
    Lazy,
    broker_addr,
    broker_or_cluster,
    cluster_name,
    opt,
    required,
    without_broker,
)

exports = Lazy("rmqcli.admin.export")

CLUSTER = required("cluster_name", "--clusterName", "-c", "choose a cluster to export")


def _path_help(name: str) -> str:
    return f"export {name} path | default /tmp/rocketmq/export"


def done_text(result: Any, args: Args | None = None) -> str:
    """``export %s success`` (``%n`` only where mqadmin has it), after the ``[error]`` lead."""
    if result.path is None:
        return ""  # exportMetadata -b without -t or -g: mqadmin prints nothing
    return f"{result.lead}export {result.path} success" + ("\n" if result.newline else "")


def configs_text(result: Any, args: Args) -> str:
    """exportConfigs' line; the keys a broker did not report are named on stderr (mqadmin fails
    on them with a NullPointerException; rmq exports the others)."""
    for name, keys in exports.missing_config_keys(result).items():
        sys.stderr.write(f"rmq: warning: broker {name} does not report {', '.join(keys)}\n")
    return done_text(result)


def _document(result: Any, args: Args) -> Any:
    return exports.json_value(result.document)


def _cluster_export(name: str, description: str, what: str, text: Callable[[Any, Args], str]) -> AdminCommand:
    """exportConfigs, exportMetrics: ``export_<what>`` of the cluster ``-c`` into ``-f`` (default
    ``<what>.json``); ``--json`` prints the document."""
    return AdminCommand(
        name,
        description,
        "export",
        (CLUSTER, opt("file_path", "--filePath", "-f", _path_help(f"{what}.json"))),
        call=lambda s, a: getattr(exports, f"export_{what}")(s, a.cluster_name, a.file_path),
        text=text,
        data=_document,
    )


export_configs = _cluster_export("exportConfigs", "export configs", "configs", configs_text)

export_metadata = AdminCommand(
    "exportMetadata",
    "export metadata",
    "export",
    (
        cluster_name("choose a cluster to export"),
        broker_addr("choose a broker to export"),
        opt("file_path", "--filePath", "-f", _path_help("metadata.json")),
        opt("topic", "--topic", "-t", "only export topic metadata", bool, False),
        opt("group", "--subscriptionGroup", "-g", "only export subscriptionGroup metadata", bool, False),
        opt("special", "--specialTopic", "-s", "need retryTopic and dlqTopic", bool, False),
    ),
    call=lambda s, a: exports.export_metadata(
        s, a.broker_addr, a.cluster_name, a.file_path, a.topic, a.group, a.special
    ),
    text=done_text,
    data=_document,
    check=broker_or_cluster,
    namesrv=without_broker,
)

export_metrics = _cluster_export("exportMetrics", "export metrics", "metrics", done_text)
