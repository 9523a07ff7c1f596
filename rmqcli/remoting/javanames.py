"""Java property names of Python field names, the one rule every JSON and header key follows.

A RocketMQ bean property or ``CommandCustomHeader`` field is camelCase (``brokerAddr``); the same
field here is snake_case (``broker_addr``). The remoting codecs (``headers``, ``json_body``) and the
CLI's ``--json`` output all name keys with ``camel``. Standard library only: cheap to import.
"""

from __future__ import annotations


def camel(name: str) -> str:
    """``broker_addr`` -> ``brokerAddr``: the Java name of a snake_case Python name."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)
