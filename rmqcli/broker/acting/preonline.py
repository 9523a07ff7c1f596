"""A returning master's pre-online under SlaveActingMaster (``BrokerPreOnlineService`` of 5.1.1).

While a master was away its acting slave took consumer offsets (commits of consumers that pulled
from it) and moved the delay offsets (the delayed messages it sent on). Before the master
registers as writable it asks each live member of its group for them, GET_ALL_CONSUMER_OFFSET (43)
and GET_ALL_DELAY_OFFSET (45), and keeps, queue by queue and level by level, the larger offset of
the two, so no consumer reads a message again and no delayed message is sent twice. (5.1.1 takes
a member's whole table when its data version is not older; rmq compares the offsets themselves.)
It also takes the queue locks the acting slave granted to orderly consumers (``take_locks``), so
that another consumer cannot lock those queues on it while their holder still consumes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from rmqcli.broker.state import LockManager
from rmqcli.errors import RmqError
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.store.write.config import BrokerConfigState

TIMEOUT = 3.0
Invoke = Callable[[str, RemotingCommand, float], Awaitable[RemotingCommand]]


async def take_locks(locks: LockManager, members: dict[int, str], invoke: Invoke) -> int:
    """The queue locks the members granted (RMQ_GET_QUEUE_LOCKS, rmq's own request: a Java broker
    does not answer it, and 5.1.1 moves no locks), adopted here unless held here; how many."""
    taken = 0
    for addr in members.values():
        answer = await invoke(addr, RemotingCommand.request(RC.RMQ_GET_QUEUE_LOCKS), TIMEOUT)
        if answer.code != RS.SUCCESS:
            continue
        for lock in jb.decode(jb.QueueLockTable, answer.body).locks:
            taken += locks.adopt(lock.consumer_group, lock.mq, lock.client_id, lock.age_millis / 1000)
    return taken


async def take_offsets(state: BrokerConfigState, members: dict[int, str], invoke: Invoke) -> int:
    """Merge the members' consumer and delay offsets into ``state`` (the larger wins); the number
    of offsets that moved. ``RmqError`` when a member cannot be asked (the caller tries again)."""
    moved = 0
    for broker_id in sorted(members):
        addr = members[broker_id]
        offsets = await _body(invoke, addr, RC.GET_ALL_CONSUMER_OFFSET)
        for key, queues in jb.decode(jb.ConsumerOffsetSerializeWrapper, offsets).offset_table.items():
            ours = state.consumer_offsets.setdefault(key, {})
            for queue_id, offset in queues.items():
                if offset > ours.get(queue_id, -1):
                    ours[queue_id] = offset
                    moved += 1
        answer = await invoke(addr, RemotingCommand.request(RC.GET_ALL_DELAY_OFFSET), TIMEOUT)
        if answer.code == RS.SUCCESS and answer.body:  # else "No delay offset in this broker"
            for level, offset in jb.decode(jb.DelayOffsetSerializeWrapper, answer.body).offset_table.items():
                if offset > state.delay_offsets.get(level, -1):
                    state.delay_offsets[level] = offset
                    moved += 1
    return moved


async def _body(invoke: Invoke, addr: str, code: int) -> bytes:
    answer = await invoke(addr, RemotingCommand.request(code), TIMEOUT)
    if answer.code != RS.SUCCESS:
        raise RmqError(f"{addr}: {answer.describe()} {answer.remark or ''}".rstrip())
    return answer.body or b""
