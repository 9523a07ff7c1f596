"""Quorum queue locks (``lockInStrictMode``; ``AdminBrokerProcessor.lockBatchMQ`` of RocketMQ 5.1.1).

In strict mode a LOCK_BATCH_MQ (41) that does not say ``onlyThisBroker`` locks locally, then asks
every other live member of the group (the member group of SlaveActingMaster) to lock the queues it
got, with ``onlyThisBroker=true``, one second each and two in all; a queue is granted when
``totalReplicas / 2 + 1`` members (this one included) hold it for the client. Queues locked here
but short of that stay locked here, as in 5.1.1. UNLOCK_BATCH_MQ (42) in strict mode goes to every
member, this one included, and is answered at once. With ``totalReplicas`` 1 the quorum is 1.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from rmqcli.errors import RmqError
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext

log = logging.getLogger(__name__)

PEER_TIMEOUT = 1.0
TOTAL_TIMEOUT = 2.0


def strict(ctl: BrokerContext, body: jb.LockBatchRequestBody) -> bool:
    return ctl.config.acting.lock_in_strict_mode and not body.only_this_broker


def _key(mq: jb.MessageQueue) -> tuple[str, str, int]:
    return mq.topic, mq.broker_name, mq.queue_id


def _members(ctl: BrokerContext) -> dict[int, str]:
    return dict(ctl.membership.members) if ctl.membership is not None else {}


async def quorum_lock(ctl: BrokerContext, body: jb.LockBatchRequestBody, locked: list) -> list:
    """The queues of ``locked`` (locked here) that a majority of the group holds for the client."""
    quorum = ctl.config.acting.total_replicas // 2 + 1
    if quorum <= 1 or not locked:
        return locked if quorum <= 1 else []
    votes = {_key(mq): 1 for mq in locked}
    forward = jb.encode(
        jb.LockBatchRequestBody(
            client_id=body.client_id, consumer_group=body.consumer_group, mq_set=locked, only_this_broker=True
        )
    )
    peers = [addr for bid, addr in _members(ctl).items() if bid != ctl.config.broker_id]

    async def ask(addr: str) -> list:
        answer = await ctl.remoting.invoke(
            addr, RemotingCommand.request(RC.LOCK_BATCH_MQ, None, forward), PEER_TIMEOUT
        )
        if answer.code != RS.SUCCESS:
            return []
        return jb.decode(jb.LockBatchResponseBody, answer.body).lock_ok_mq_set

    tasks = [asyncio.ensure_future(ask(addr)) for addr in peers]
    if tasks:
        done, pending = await asyncio.wait(tasks, timeout=TOTAL_TIMEOUT)
        for task in pending:
            task.cancel()
        for task in done:
            if task.exception() is not None:
                if not isinstance(task.exception(), RmqError | ValueError):
                    log.warning("quorum lock: a peer's answer failed: %s", task.exception())
                continue
            for mq in task.result():
                if _key(mq) in votes:
                    votes[_key(mq)] += 1
    return [mq for mq in locked if votes[_key(mq)] >= quorum]


def unlock_everywhere(ctl: BrokerContext, body: jb.LockBatchRequestBody) -> None:
    """UNLOCK_BATCH_MQ with ``onlyThisBroker=true`` to every member, this one included (answers
    are not waited for)."""
    forward = jb.encode(
        jb.LockBatchRequestBody(
            client_id=body.client_id,
            consumer_group=body.consumer_group,
            mq_set=body.mq_set,
            only_this_broker=True,
        )
    )
    members = _members(ctl) or {ctl.config.broker_id: ctl.addr}
    for addr in members.values():
        request = RemotingCommand.request(RC.UNLOCK_BATCH_MQ, None, forward)
        task = asyncio.ensure_future(ctl.remoting.invoke(addr, request, PEER_TIMEOUT))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # answers are not needed
