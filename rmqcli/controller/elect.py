"""5.1.1's ``DefaultElectPolicy`` (controller.md §3.5): which broker of a group becomes master.

The in-sync set is tried first; when it gives nobody and unclean election is on (``all_replicas``
given), every registered replica is tried. A try keeps the alive ids; the old master wins when it is
among them and no other id is preferred; a preferred id (``mqadmin electMaster``) wins when it is
among them, and otherwise nobody does in this try; else the candidates' last heartbeats are ordered
by larger epoch, then larger max offset, then smaller election priority, and the first is taken.

That order is a Java ``TreeSet`` over the candidates in ``HashSet`` order, with 5.1.1's comparator
and its ``int`` arithmetic: candidates tied on all three keys merge (the first inserted stays), and
the offset difference is cast to ``int``, so offsets more than 2 GiB apart can compare the wrong way
(``javaorder``). Without a live-info getter (never so in the controller) the first alive id in
``HashSet`` order is taken; without an alive predicate nobody is filtered out.
"""

from __future__ import annotations

from collections.abc import Callable, Set
from dataclasses import dataclass

from rmqcli.controller.heartbeat import BrokerLiveInfo
from rmqcli.controller.javaorder import TreeSet, grown_capacity, hash_set_order, int32

AlivePredicate = Callable[[str | None, str, int], bool]
"""``(clusterName, brokerName, brokerId) -> alive``: ``BrokerValidPredicate``."""
LiveInfoGetter = Callable[[str | None, str, int], BrokerLiveInfo | None]
"""``(clusterName, brokerName, brokerId) -> last heartbeat``: ``BrokerLiveInfoGetter``."""


def compare_live_info(a: BrokerLiveInfo, b: BrokerLiveInfo) -> int:
    """5.1.1's comparator, negative when ``a`` is the better master."""
    if a.epoch == b.epoch:
        if a.max_offset == b.max_offset:
            return int32(a.election_priority - b.election_priority)
        return int32(b.max_offset - a.max_offset)
    return int32(b.epoch - a.epoch)


@dataclass
class DefaultElectPolicy:
    """``alive`` filters the candidates; ``live_info`` gives their last heartbeats."""

    alive: AlivePredicate | None = None
    live_info: LiveInfoGetter | None = None

    def elect(
        self,
        cluster_name: str | None,
        broker_name: str,
        sync_state_set: Set[int] | None,
        all_replicas: Set[int] | None,
        old_master: int | None,
        preferred: int | None,
    ) -> int | None:
        """The new master's id, or None when nobody qualifies."""
        for brokers in (sync_state_set, all_replicas):
            if brokers is not None:
                chosen = self._try(cluster_name, broker_name, brokers, old_master, preferred)
                if chosen is not None:
                    return chosen
        return None

    def _try(
        self,
        cluster_name: str | None,
        broker_name: str,
        brokers: Set[int],
        old_master: int | None,
        preferred: int | None,
    ) -> int | None:
        candidates = hash_set_order(sorted(brokers))
        if self.alive is not None:
            alive = self.alive
            kept = [b for b in candidates if alive(cluster_name, broker_name, b)]
            candidates = hash_set_order(kept, grown_capacity(len(kept)))  # Collectors.toSet()
        if not candidates:
            return None
        if old_master in candidates and (preferred is None or preferred == old_master):
            return old_master
        if preferred is not None:
            return preferred if preferred in candidates else None
        if self.live_info is not None:
            ordered: TreeSet[BrokerLiveInfo] = TreeSet(compare_live_info)
            for broker_id in candidates:
                info = self.live_info(cluster_name, broker_name, broker_id)
                if info is None:
                    raise LookupError(f"no heartbeat of alive broker {broker_name}/{broker_id}")
                ordered.add(info)
            best = ordered.first()
            if best is not None:
                return best.broker_id
        return candidates[0]
