"""``producer``: every producer a broker knows, GET_ALL_PRODUCER_INFO (328) to ``-b``
(``MQClientAPIImpl.getAllProducerInfo``; body ``ProducerTableInfo``, 4.9.8)."""

from __future__ import annotations

from rmqcli.admin.session import AdminSession
from rmqcli.remoting.codes import RequestCode
from rmqcli.remoting.json_body import bean, prop

__all__ = ["ProducerInfo", "ProducerTableInfo", "all_producer_info", "ordered", "producer_info_string"]


@bean
class ProducerInfo:
    """``ProducerInfo``: one producer instance as the broker saw its last heartbeat."""

    client_id: str = prop("")
    remote_ip: str = prop("", name="remoteIP")
    language: str = prop("JAVA")
    version: int = prop(0)
    last_update_timestamp: int = prop(0)


@bean
class ProducerTableInfo:
    """``ProducerTableInfo``: producer group -> its instances."""

    data: dict[str, list[ProducerInfo]] = prop(factory=dict)


def producer_info_string(p: ProducerInfo) -> str:
    """``ProducerInfo.toString()`` (no space after the first comma, as 4.9.8 writes it)."""
    return (
        f"clientId={p.client_id},remoteIP={p.remote_ip}, language={p.language}, version={p.version}, "
        f"lastUpdateTimestamp={p.last_update_timestamp}"
    )


def all_producer_info(session: AdminSession, broker_addr: str) -> ProducerTableInfo:
    """``getAllProducerInfo``: 328 with an empty header to ``broker_addr``, groups ``ordered``."""
    from rmqcli.remoting import json_body as jb

    response = session.call(broker_addr.strip(), RequestCode.GET_ALL_PRODUCER_INFO)
    return ordered(jb.decode_or_empty(ProducerTableInfo, response.body))


def ordered(table: ProducerTableInfo) -> ProducerTableInfo:
    """The groups in the order mqadmin prints them: the ``HashMap`` fastjson decodes the body into
    (wire order within a bucket); a null table or list is empty."""
    from formats.javahash import hashmap_order

    data = table.data or {}
    table.data = {group: data[group] or [] for group in hashmap_order(list(data))}
    return table
