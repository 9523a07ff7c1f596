"""Name server resolution, one connection pool per command, cluster and broker lookup (protocol.md C.1).

``resolve_namesrv`` follows mqadmin: ``-n`` (a ``;``-separated list), else ``NAMESRV_ADDR``.
``AdminSession`` owns one ``SyncClient`` for the whole command; requests to the name servers go to
the first one that answers (the next one is tried when a connection fails, as Java's client does).
Request headers are the typed classes of ``rmqcli.remoting.headers`` (B.2-B.7), cheap to import.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from rmqcli.errors import BrokerError, NetworkError, NotFoundError, UsageError
from rmqcli.remoting.codes import RequestCode

if TYPE_CHECKING:
    from rmqcli.remoting.acl import Credentials
    from rmqcli.remoting.client import SyncClient
    from rmqcli.remoting.codec import RemotingCommand
    from rmqcli.remoting.json_body import BrokerData, ClusterInfo, TopicRouteData

NAMESRV_ENV = "NAMESRV_ADDR"
NAMESRV_HINT = (
    "No name server address, please set it: -n/--namesrvAddr "
    "(eg: '192.168.0.1:9876;192.168.0.2:9876') or the NAMESRV_ADDR environment variable"
)
UNKNOWN_CLUSTER = "Make sure the specified clusterName exists or the name server connected to is correct."
MASTER_ID = 0
DEFAULT_TIMEOUT = 5.0


def split_addresses(text: str | None) -> list[str]:
    """``a:1;b:2`` as a list, blanks dropped (C.1)."""
    if not text:
        return []
    return [part.strip() for part in text.split(";") if part.strip()]


def resolve_namesrv(option: str | None, environ: Mapping[str, str] | None = None) -> list[str]:
    """The name servers to talk to: ``-n`` first, then ``NAMESRV_ADDR``; none is a ``UsageError``."""
    from rmqcli.remoting.client import parse_address

    env = os.environ if environ is None else environ
    addresses = split_addresses(option) or split_addresses(env.get(NAMESRV_ENV))
    if not addresses:
        raise UsageError(NAMESRV_HINT)
    for addr in addresses:
        parse_address(addr)  # a malformed address is a usage error, before any connection
    return addresses


class AdminSession:
    """What one mqadmin command needs: the name server list and one reusable ``SyncClient``
    (signing every request when ``credentials`` are given)."""

    def __init__(
        self, namesrv: list[str], timeout: float = DEFAULT_TIMEOUT, credentials: Credentials | None = None
    ):
        self.namesrv = list(namesrv)
        self.timeout = timeout
        self.credentials = credentials
        self._client: SyncClient | None = None
        self._cluster_info: ClusterInfo | None = None
        self.extra_fields: dict[str, str] = {}  # added to every request (a pull consumer's ReqT)

    @property
    def client(self) -> SyncClient:
        if self._client is None:
            from rmqcli.remoting.client import SyncClient

            self._client = SyncClient(credentials=self.credentials)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> AdminSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- requests --------------------------------------------------------------------------
    def request(self, code: int, header: Any = None, body: bytes = b"") -> RemotingCommand:
        from rmqcli.remoting.codec import RemotingCommand

        request = RemotingCommand.request(code, header, body)
        request.ext_fields.update(self.extra_fields)
        return request

    def call(
        self,
        addr: str,
        code: int,
        header: Any = None,
        body: bytes = b"",
        ok: Iterable[int] = (0,),
        timeout: float | None = None,
    ):
        """One request to ``addr``; a response code outside ``ok`` raises ``BrokerError`` (A.6)."""
        from rmqcli.remoting.client import expect

        response = self.client.invoke(addr, self.request(code, header, body), timeout or self.timeout)
        return expect(response, addr, *ok)

    def call_namesrv(self, code: int, header: Any = None, body: bytes = b"", ok: Iterable[int] = (0,)):
        """One request to the first reachable name server."""
        error: NetworkError | None = None
        for addr in self.namesrv:
            try:
                return self.call(addr, code, header, body, ok)
            except NetworkError as exc:
                error = exc
        assert error is not None
        raise error

    def call_many(self, calls: list[tuple[str, int, Any, bytes]]) -> list[RemotingCommand | NetworkError]:
        """Several requests at once (one per broker); each result is a response or its NetworkError."""
        return self.client.invoke_all(
            [(addr, self.request(code, header, body)) for addr, code, header, body in calls], self.timeout
        )

    def call_each(
        self, addrs: list[str], code: int, header: Any = None, body: bytes = b""
    ) -> list[RemotingCommand | NetworkError | BrokerError]:
        """The same request to every address at once, each answer checked as ``call`` checks it:
        the response, or the ``NetworkError`` / ``BrokerError`` that address met, in ``addrs`` order."""
        from rmqcli.remoting.client import expect

        out: list[RemotingCommand | NetworkError | BrokerError] = []
        for addr, response in zip(
            addrs, self.call_many([(a, code, header, body) for a in addrs]), strict=True
        ):
            try:
                out.append(response if isinstance(response, NetworkError) else expect(response, addr))
            except BrokerError as exc:
                out.append(exc)
        return out

    # --- lookups ---------------------------------------------------------------------------
    def cluster_info(self) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO (106), fetched once per session (B.2, B.9)."""
        if self._cluster_info is None:
            from rmqcli.remoting import json_body as jb

            response = self.call_namesrv(RequestCode.GET_BROKER_CLUSTER_INFO)
            self._cluster_info = jb.decode_or_empty(jb.ClusterInfo, response.body)
        return self._cluster_info

    def broker_names_of_cluster(self, cluster: str) -> list[str]:
        """``CommandUtil.fetchBrokerNameByClusterName``; an unknown cluster is ``NotFoundError``."""
        names = self.cluster_info().cluster_addr_table.get(cluster)
        if not names:
            raise NotFoundError(f"[error] {UNKNOWN_CLUSTER} (cluster {cluster!r})")
        return sorted(names)

    def master_addrs_of_cluster(self, cluster: str) -> list[str]:
        """``CommandUtil.fetchMasterAddrByClusterName``: the brokerId-0 address of each broker."""
        table = self.cluster_info().broker_addr_table
        addrs = []
        for name in self.broker_names_of_cluster(cluster):
            data = table.get(name)
            if data is not None and MASTER_ID in data.broker_addrs:
                addrs.append(data.broker_addrs[MASTER_ID])
        return addrs

    def all_addrs_of_cluster(self, cluster: str | None) -> list[str]:
        """Every master and slave address of ``cluster`` (all clusters when None)."""
        info = self.cluster_info()
        names = self.broker_names_of_cluster(cluster) if cluster else sorted(info.broker_addr_table)
        addrs = []
        for name in names:
            data = info.broker_addr_table.get(name)
            if data is not None:
                addrs.extend(data.broker_addrs[i] for i in sorted(data.broker_addrs))
        return addrs

    def broker_name_of_addr(self, addr: str) -> str:
        """``CommandUtil.fetchBrokerNameByAddr``."""
        for name, data in self.cluster_info().broker_addr_table.items():
            if addr in data.broker_addrs.values():
                return name
        raise NotFoundError(f"no broker with address {addr} is registered in the name server")

    def route(self, topic: str) -> TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC (105); TOPIC_NOT_EXIST becomes a ``BrokerError``."""
        from rmqcli.remoting import headers as hd
        from rmqcli.remoting import json_body as jb

        header = hd.GetRouteInfoRequestHeader(topic=topic)
        response = self.call_namesrv(RequestCode.GET_ROUTEINFO_BY_TOPIC, header)
        return jb.decode(jb.TopicRouteData, response.body)


def master_addr(broker_addrs: Mapping[int, str]) -> str | None:
    """The master address of a ``BrokerData``, else its lowest-id address (``selectBrokerAddr``)."""
    if MASTER_ID in broker_addrs:
        return broker_addrs[MASTER_ID]
    return broker_addrs[min(broker_addrs)] if broker_addrs else None


def masters(datas: Iterable[BrokerData]) -> list[tuple[BrokerData, str]]:
    """Each broker with its ``master_addr``, in order; a broker without any address is left out."""
    return [(data, addr) for data in datas if (addr := master_addr(data.broker_addrs))]


def target_addrs(session: AdminSession, broker_addr: str | None, cluster: str | None) -> list[str]:
    """``-b`` (one address) or ``-c`` (every master of the cluster); neither is a ``UsageError``."""
    if broker_addr:
        return [broker_addr.strip()]
    if cluster:
        return session.master_addrs_of_cluster(cluster.strip())
    raise UsageError("one of -b/--brokerAddr or -c/--clusterName is required")
