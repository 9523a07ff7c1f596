"""What a request handler may use of the broker: ``BrokerContext``, and the ``Handler`` signature.

Every processor module (``send``, ``pull``, ``query``, ``consumer``, ``sendback``, ``transaction``,
``acl.handlers``, ``admin``) registers ``Handler`` functions in its ``HANDLERS`` table,
``{request code: handler}``; ``controller.BrokerController.dispatch`` calls the one registered for a
request's code (protocol.md B.3, B.4) with itself as the context. The services that act for the
broker (``schedule.ScheduleService``, ``transaction.TransactionCheckService``, ``sendlane.SendLane``)
are built over the same context. ``acknowledged`` makes the handler of a request that only asks for
an action.

Design note: handlers see the broker through this narrow interface, not through
``BrokerController``. The members are exactly what the handlers touch: the configuration, the open
store (``writer`` and the ``store`` over it), the state managers of ``state``, the held pulls, the
put/get rates, the ACL, the HA side, and three controller services (``addr``, ``persist``,
``register_all``). Each member's type
comes from the module that defines it, and none of those imports the controller or a handler, so
the processors depend on the parts they use and the controller depends on the processors, never
the other way round (no import cycle, not even a type-only one). ``BrokerController`` satisfies the
protocol structurally; a test can hand a handler any object with these members. A handler that
needs something new adds it here first, which keeps what the processors share visible in one place.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar, cast

from rmqcli.broker.acl.setup import BrokerAcl
from rmqcli.broker.acting.escape import EscapeBridge
from rmqcli.broker.acting.group import GroupMembership
from rmqcli.broker.config import BrokerConfig
from rmqcli.broker.ha.member import Replication
from rmqcli.broker.metrics.api import NoMetrics
from rmqcli.broker.processor.holds import HoldService
from rmqcli.broker.services.messagestore import MessageStore
from rmqcli.broker.services.retention import RetentionService
from rmqcli.broker.services.tps import Stats
from rmqcli.broker.state import (
    ClientManager,
    ConsumerOffsetManager,
    LockManager,
    SubscriptionGroupManager,
    TopicConfigManager,
)
from rmqcli.remoting.client import RemotingClient
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.server.connection import Connection, Reply
from rmqcli.store.write.writer import StoreWriter

T = TypeVar("T")


class BrokerParts:
    """The per-broker state a part makes on first use, one of each type: POP's service
    (``pop.service``), the timer's (``timer.service``), the consumers' request modes
    (``pop.assignment``), the configuration's data version (``admin.config``). The controller
    holds one, so that state lives and goes with its broker, not in a registry of the part's module
    keyed by broker; the part's module keeps the type (``get(PopService, ...)``), so this module
    need not import it."""

    def __init__(self) -> None:
        self._made: dict[type, object] = {}

    def get(self, kind: type[T], make: Callable[[], T]) -> T:
        """The broker's ``kind``, made by ``make`` the first time."""
        found = self._made.get(kind)
        if found is None:
            found = self._made[kind] = make()
        return cast(T, found)


class BrokerContext(Protocol):
    """The broker as its request handlers and services (schedule, transaction check, send lane) see it."""

    config: BrokerConfig  # the broker's settings (``broker.properties`` and the command line)
    writer: StoreWriter  # the open store: commit log, dispatcher, config state, clock
    store: MessageStore  # appends, reads and flushes over ``writer``
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    offsets: ConsumerOffsetManager
    clients: ClientManager  # online producers and consumers
    locks: LockManager  # queue locks of orderly consumers
    holds: HoldService  # long-polling pulls
    stats: Stats  # put/get rates
    acl: BrokerAcl | None  # None when ``aclEnable`` is off
    ha: Replication  # the HA side of the broker's role (master port or slave client)
    defer_dispatch: bool  # True when the server dispatches sends after answering them
    membership: GroupMembership | None  # the live members of the group (SlaveActingMaster only)
    remoting: RemotingClient  # the broker's client: name servers, its group's members
    escape: EscapeBridge  # where the broker's own puts go when it is not its group's master
    retention: RetentionService  # the clean-up rounds (CleanCommitLogService, CleanConsumeQueueService)
    parts: BrokerParts  # POP, the timer, request modes, the configuration's version: made on first use
    metrics: NoMetrics  # the 5.1.1 broker meter (rmqcli.broker.metrics); a no-op when metrics are off

    @property
    def addr(self) -> str:
        """``brokerIP1:listenPort``, the address the broker registers."""
        ...

    @property
    def special_services_running(self) -> bool:
        """Delayed delivery and the transaction check run here (a master, or an acting slave)."""
        ...

    def persist(self) -> None:
        """Write the topics, subscription groups, consumer and delay offsets now."""
        ...

    async def register_all(self, only_topic: str | None = None) -> None:
        """REGISTER_BROKER to every name server now (``registerBrokerAll``); with ``only_topic``,
        that topic alone (``registerIncrementBrokerData``)."""
        ...


Handler = Callable[[BrokerContext, RemotingCommand, Connection], "Reply | Awaitable[Reply]"]


def acknowledged(action: Callable[[BrokerContext], object]) -> Handler:
    """The handler of a request that only asks for ``action`` (the admin clean-ups): run it, answer
    SUCCESS without a header or body, whatever the action returns."""

    def handle(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
        action(ctl)
        return req.response()

    handle.__name__ = handle.__qualname__ = action.__name__
    return handle
