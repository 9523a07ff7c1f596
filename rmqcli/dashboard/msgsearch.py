"""The Messages page's reads that no mqadmin command answers as the page needs them.

``search``: a topic's messages stored between two times, as rocketmq-dashboard's
``MessageServiceImpl.queryMessageByTopic`` finds them (per readable queue, the offsets of the
begin and end times by SEARCH_OFFSET_BY_TIMESTAMP, pulls in between, the store time checked against
the range, since that search gives the nearest message: ``ConsumeQueue.getOffsetInQueueByTime``)
with ``printMsg``'s pull consumer (``rmqcli.admin.mqclient``), but bounded: queues are read in
turns, each pull asking for the queue's share of what is still wanted, until ``limit`` messages are
kept; what is left unread is counted from the offsets, never read.

``body``: one message's body by its offset message id (VIEW_MESSAGE_BY_ID), as text when it is
UTF-8, else base64, at most ``BODY_SHOWN`` bytes.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rmqcli.errors import NotFoundError, UsageError

if TYPE_CHECKING:
    from rmqcli.admin.mqclient import Message, PullConsumer
    from rmqcli.admin.session import AdminSession
    from rmqcli.remoting.json_body import MessageQueue

LIMIT, MAX_LIMIT = 64, 512  # messages per answer: the default and the most a request may ask
BATCH = 32  # printMsg's pull size
BODY_SHOWN = 64 * 1024  # bytes of a body the page is given


@dataclass
class QueueRead:
    mq: MessageQueue
    low: int  # offset of the begin time
    high: int  # offset of the end time (the message nearest to it, included)
    next: int  # the next offset to read
    done: bool = False


def check_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise UsageError(f"limit: between 1 and {MAX_LIMIT}, not {limit}")
    return limit


ROW_FIELDS = (
    "msg_id offset_msg_id broker_name queue_id queue_offset store_timestamp born_timestamp born_host "
    "store_host tags keys"
).split()


def row(msg: Message) -> dict[str, Any]:
    """What the search table shows of a message (its body only by size), camel-cased as ``--json``."""
    from rmqcli.remoting.javanames import camel

    return {**{camel(f): getattr(msg, f) for f in ROW_FIELDS}, "bodySize": len(msg.body)}


def _read_turn(consumer: PullConsumer, q: QueueRead, want: int, begin: int, end: int) -> list[Message]:
    """One pull of at most ``want`` (and ``BATCH``) messages from ``q``; those stored in range."""
    result = consumer.pull(q.mq, "*", q.next, min(want, BATCH))
    if result.status != "FOUND" or result.next_begin_offset <= q.next:
        q.done = True  # NO_NEW_MSG, OFFSET_ILLEGAL: nothing more in this queue
        return []
    kept = []
    for msg in result.messages:
        if msg.queue_offset > q.high:
            q.next = q.high + 1
            break
        if len(kept) == want:
            break
        q.next = msg.queue_offset + 1
        if begin <= msg.store_timestamp <= end:
            kept.append(msg)
    else:
        q.next = max(q.next, min(result.next_begin_offset, q.high + 1))
    q.done = q.next > q.high
    return kept


def search(session: AdminSession, topic: str, begin: int, end: int, limit: int = LIMIT) -> dict[str, Any]:
    """The messages of ``topic`` stored from ``begin`` to ``end`` (millis, both included), at most
    ``limit``, newest first; ``truncated`` when the range holds offsets left unread (``unread``)."""
    from rmqcli.admin.mqclient import PullConsumer

    topic = topic.strip()
    if not topic:
        raise UsageError("give a topic")
    if end < begin:
        raise UsageError(f"end {end} is before begin {begin}")
    check_limit(limit)
    found: list[dict[str, Any]] = []
    with PullConsumer(session) as consumer:
        reads = []
        for mq in consumer.queues(topic):
            top = consumer.max_offset(mq)
            low = consumer.search_offset(mq, begin)
            high = min(consumer.search_offset(mq, end), top - 1)
            reads.append(QueueRead(mq, low, high, low, done=low > high))
        while len(found) < limit:
            active = [q for q in reads if not q.done]
            if not active:
                break
            share = -(-(limit - len(found)) // len(active))  # this turn's part for each queue
            for q in active:
                want = min(share, limit - len(found))
                if want == 0:
                    break
                found.extend(row(m) for m in _read_turn(consumer, q, want, begin, end))
    unread = sum(q.high - q.next + 1 for q in reads if not q.done)
    found.sort(key=lambda r: (-r["storeTimestamp"], r["brokerName"] or "", r["queueId"], -r["queueOffset"]))
    return {
        "topic": topic,
        "begin": begin,
        "end": end,
        "limit": limit,
        "truncated": unread > 0,
        "unread": unread,
        "queues": [
            {
                "brokerName": q.mq.broker_name,
                "queueId": q.mq.queue_id,
                "beginOffset": q.low,
                "endOffset": q.high,
                "nextOffset": q.next,
            }
            for q in reads
        ],
        "messages": found,
    }


def body(session: AdminSession, offset_msg_id: str) -> dict[str, Any]:
    """The body of the message at ``offset_msg_id`` (store host and CommitLog offset), read only from
    a broker the NameServer lists (``message.find_by_id``'s rule): ``text`` when the shown bytes are
    UTF-8 (a character cut at the bound is left out), else ``base64``."""
    from rmqcli.admin.message import decode_offset_id, listed_broker_addr, view_message

    offset_msg_id = offset_msg_id.strip()
    decoded = decode_offset_id(offset_msg_id)
    if decoded is None:
        raise UsageError(f"{offset_msg_id[:80]!r} is not an offset message id (32 or 56 hex digits)")
    addr = listed_broker_addr(session, decoded[0])
    if addr is None:
        raise NotFoundError(
            f"offset message id {offset_msg_id}: {decoded[0]} is no broker the NameServer lists"
        )
    data = view_message(session, addr, decoded[1]).body
    shown = data[:BODY_SHOWN]
    answer: dict[str, Any] = {"offsetMsgId": offset_msg_id, "size": len(data)}
    try:
        text = shown.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = None
        if len(shown) < len(data) and exc.start >= len(shown) - 3:  # a character cut by the bound
            shown = shown[: exc.start]
            try:
                text = shown.decode("utf-8")
            except UnicodeDecodeError:
                text = None
    if text is not None:
        answer.update(encoding="utf-8", text=text)
    else:
        answer.update(encoding="base64", text=base64.b64encode(shown).decode("ascii"))
    answer.update(shown=len(shown), truncated=len(shown) < len(data))
    return answer
