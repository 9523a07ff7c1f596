"""PULL_MESSAGE (11): ``PullMessageProcessor``, ``DefaultMessageStore.getMessage``,
``PullRequestHoldService`` (protocol.md B.7).

``parse`` checks the request (the group's and topic's names as ``rmqcli.broker.names`` does, which
4.9.8 does not; group, topic, permission, queue id, subscription: from the request
when the SUBSCRIPTION flag is set, else the one the group's heartbeat registered); ``get_message``
maps the queue state to FOUND / NO_MATCHED_MESSAGE / OFFSET_* as the store does; a
``PULL_NOT_FOUND`` with the SUSPEND flag is held (long polling) until a message its filter
matches arrives in the queue, the hold service's check round finds the queue grown, or
``suspendTimeoutMillis`` passes, then re-run (``hold``). The COMMIT_OFFSET flag stores the group's
offset before anything else, except on a slave (``storeOffsetEnable``: a slave's offsets come
from its master, or from consumers' own UPDATE_CONSUMER_OFFSET when the master is down). Every
answer carries ``suggestWhichBrokerId, nextBeginOffset, minOffset, maxOffset`` as strings
(``suggest_broker``); a SUCCESS body is the concatenated stored records (B.8). A slave answers
pulls as a master does, except that it moves no offset (``answer``).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Awaitable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from formats.consumequeue import CQ_UNIT_SIZE
from formats.records import record_properties
from rmqcli.broker.processor.holds import Woken
from rmqcli.broker.processor.offsetmoved import report_offset_moved
from rmqcli.broker.state import is_readable, tag_codes, validate_group, validate_topic
from rmqcli.filter.sql92 import Selector, SelectorError, compiled, is_tag_type
from rmqcli.remoting import headers as hd
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.remoting.server.connection import Connection, Reply
from rmqcli.remoting.server.refusal import FAQ, Refusal, no_property_filter

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext

MAX_FILTER_BYTES = 16000  # DefaultMessageStore.getMessage: max(16000, maxMsgNums * 20) bytes of units


@dataclass
class PullResult:
    """``GetMessageResult`` turned into the response code (B.7 table)."""

    code: int
    status: str
    next_begin_offset: int
    min_offset: int
    max_offset: int
    body: bytes = b""
    behind: int = 0  # CommitLog bytes after the last unit read (``maxOffsetPy - maxPhyOffsetPulling``)
    count: int = 0  # the messages in ``body``


@dataclass
class PullRequest:
    """A parsed pull: the header and the tags codes to match (None: every tag)."""

    header: hd.PullMessageRequestHeader
    codes: set[int] | None
    group: dict  # the subscription group's config (``whichBrokerWhenConsumeSlowly``, ``brokerId``)
    selector: Selector | None = None  # a SQL92 subscription, matched against each message's properties


class PullError(Refusal):
    """A pull the broker refuses: the response code and remark."""


def parse(ctl: BrokerContext, req: RemotingCommand) -> PullRequest:
    h = req.header(hd.PullMessageRequestHeader)
    if not is_readable(ctl.config.broker_permission):
        raise PullError(RS.NO_PERMISSION, f"the broker[{ctl.config.broker_ip1}] pulling message is forbidden")
    problem = validate_group(h.consumer_group) or validate_topic(h.topic)
    if problem:  # 4.9.8 checks neither; the group would be created, ``topic@group`` committed
        raise PullError(RS.SYSTEM_ERROR, problem)
    group = ctl.groups.find(h.consumer_group)
    if group is None:
        raise PullError(
            RS.SUBSCRIPTION_GROUP_NOT_EXIST,
            f"subscription group [{h.consumer_group}] does not exist, {FAQ.strip()}",
        )
    if not group.get("consumeEnable", True):
        raise PullError(RS.NO_PERMISSION, f"subscription group no permission, {h.consumer_group}")
    topic = ctl.topics.get(h.topic)
    if topic is None:
        raise PullError(RS.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist, apply first please! {FAQ.strip()}")
    if not is_readable(topic["perm"]):
        raise PullError(RS.NO_PERMISSION, f"the topic[{h.topic}] pulling message is forbidden")
    if h.queue_id < 0 or h.queue_id >= topic["readQueueNums"]:
        raise PullError(
            RS.SYSTEM_ERROR,
            f"queueId[{h.queue_id}] is illegal, topic:[{h.topic}] topicConfig.readQueueNums:"
            f"[{topic['readQueueNums']}] consumer:[{h.consumer_group}]",
        )
    carried = bool(h.sys_flag & hd.PULL_FLAG_SUBSCRIPTION)
    if carried:
        expression_type, expression = h.expression_type, h.subscription
    else:
        sub = ctl.clients.subscription(h.consumer_group, h.topic)
        if ctl.clients.consumers.get(h.consumer_group) is None:
            raise PullError(RS.SUBSCRIPTION_NOT_EXIST, f"the consumer's group info not exist{FAQ}")
        if sub is None:
            raise PullError(RS.SUBSCRIPTION_NOT_EXIST, f"the consumer's subscription not exist{FAQ}")
        if sub.sub_version < h.sub_version:
            raise PullError(RS.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest")
        expression_type, expression = sub.expression_type, sub.sub_string
    if is_tag_type(expression_type):
        return PullRequest(h, tag_codes(expression), group)
    if carried and not expression:  # FilterAPI.build: "Expression can't be null!"
        raise PullError(RS.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")
    selector = None
    try:
        selector = compiled(expression, expression_type)
    except SelectorError:
        if not carried:  # the filter data ConsumerFilterManager registered with the heartbeat
            raise PullError(
                RS.FILTER_DATA_NOT_EXIST,
                "The broker's consumer filter data is not exist!Your expression may be wrong!",
            ) from None
        # a carried one: ConsumerFilterManager.build gives null, and 4.9.8 then filters nothing
    if not ctl.config.enable_property_filter:
        raise PullError(RS.SYSTEM_ERROR, no_property_filter(expression_type))
    return PullRequest(h, None, group, selector)


def fetch(ctl: BrokerContext, pull: PullRequest) -> PullResult:
    """``get_message``, unless an admin reset the queue's offset for the group
    (``useServerSideResetOffset``): then PULL_OFFSET_MOVED to the reset offset, once (5.1.1's
    OFFSET_RESET; the reset is taken whatever the setting, as 5.1.1 does)."""
    h = pull.header
    reset = ctl.offsets.take_reset(h.topic, h.consumer_group, h.queue_id)
    if reset is None or not ctl.config.use_server_side_reset_offset:
        return get_message(ctl, pull)
    low, high = ctl.store.min_offset(h.topic, h.queue_id), ctl.store.max_offset(h.topic, h.queue_id)
    return PullResult(RS.PULL_OFFSET_MOVED, "OFFSET_RESET", reset, low, high)


def get_message(ctl: BrokerContext, pull: PullRequest) -> PullResult:
    """``DefaultMessageStore.getMessage`` and the status -> response-code mapping of B.7."""
    h = pull.header
    store = ctl.store
    topic, queue_id, offset = h.topic, h.queue_id, h.queue_offset
    low, high = store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)

    def result(code: int, status: str, next_offset: int, body: bytes = b"", behind: int = 0) -> PullResult:
        return PullResult(code, status, next_offset, low, high, body, behind)

    if high == 0:
        return result(RS.PULL_NOT_FOUND if offset == 0 else RS.PULL_OFFSET_MOVED, "NO_MESSAGE_IN_QUEUE", 0)
    if offset < low:
        return result(RS.PULL_OFFSET_MOVED, "OFFSET_TOO_SMALL", low)
    if offset == high:
        return result(RS.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE", offset)
    if offset > high:  # 4.9.x corrects to the max offset (3.x/4.0-4.2 used the min when it was 0)
        return result(RS.PULL_OFFSET_MOVED, "OFFSET_OVERFLOW_BADLY", high)
    max_msgs = max(1, min(h.max_msg_nums, ctl.config.max_transfer_count_in_memory))
    codes, selector = pull.codes, pull.selector
    want = max(MAX_FILTER_BYTES, h.max_msg_nums * CQ_UNIT_SIZE) // CQ_UNIT_SIZE  # decoded lazily, as used
    chunks: list[bytes] = []
    size = 0
    scanned = 0
    empty_status = "NO_MATCHED_MESSAGE"  # the last reason a unit gave nothing, while nothing was found
    found_units = False
    read = store.read
    last_physical = 0
    for physical, unit_size, tags_code in store.unit_tuples(topic, queue_id, offset, want):
        found_units = True
        last_physical = physical
        if len(chunks) >= max_msgs or (chunks and size + unit_size > ctl.config.max_transfer_bytes_in_memory):
            break
        scanned += 1
        if codes is not None and tags_code not in codes:
            empty_status = "NO_MATCHED_MESSAGE"
            continue
        data = read(physical, unit_size)
        if data is None:
            empty_status = "MESSAGE_WAS_REMOVING"
            continue
        if selector is not None and not selector.matches(record_properties(data)):
            empty_status = "NO_MATCHED_MESSAGE"  # ExpressionMessageFilter.isMatchedByCommitLog
            continue
        chunks.append(data)
        size += unit_size
    if not found_units:
        per_file = store.units_per_file(topic, queue_id)
        return result(RS.PULL_NOT_FOUND, "OFFSET_FOUND_NULL", offset + per_file - offset % per_file)
    next_offset = offset + scanned
    behind = ctl.writer.max_offset - last_physical
    if chunks:
        store.get_count += len(chunks)
        return replace(result(RS.SUCCESS, "FOUND", next_offset, b"".join(chunks), behind), count=len(chunks))
    return result(RS.PULL_RETRY_IMMEDIATELY, empty_status, next_offset, behind=behind)


def suggest_broker(ctl: BrokerContext, pull: PullRequest, res: PullResult) -> int:
    """``suggestWhichBrokerId``: with ``slaveReadEnable``, the group's ``whichBrokerWhenConsumeSlowly``
    (1) when the consumer is more than ``accessMessageInMemoryMaxRatio`` of this machine's memory
    behind (``isSuggestPullingFromSlave``), else the group's ``brokerId`` (0); without it, the master."""
    if not ctl.config.slave_read_enable:
        return 0
    if res.behind > in_memory_bytes(ctl.config.is_slave):
        return int(pull.group.get("whichBrokerWhenConsumeSlowly", 1))
    return int(pull.group.get("brokerId", 0))


@functools.cache
def in_memory_bytes(slave: bool) -> int:
    """``TOTAL_PHYSICAL_MEMORY_SIZE * accessMessageInMemoryMaxRatio / 100``: 40 %, 30 % on a slave
    (``BrokerStartup`` lowers it by 10)."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 62  # unknown: never suggest
    return memory * (30 if slave else 40) // 100


def answer(ctl: BrokerContext, req: RemotingCommand, pull: PullRequest, res: PullResult) -> RemotingCommand:
    """The response to ``pull``; a PULL_OFFSET_MOVED leaves its OFFSET_MOVED_EVENT first. A slave
    without ``offsetCheckInSlave`` corrects no offset: it answers PULL_RETRY_IMMEDIATELY instead,
    suggesting the group's ``brokerId`` (``PullMessageProcessor``, "none correction"). The pull's
    end is the group's pull offset (``tryCommitOffset``), and messages found are counted out
    (``rmqcli.broker.metrics``)."""
    h = pull.header
    ctl.offsets.commit_pull(h.consumer_group, h.topic, h.queue_id, res.next_begin_offset)
    if res.count:
        ctl.metrics.message_out(h.topic, h.consumer_group, res.count, len(res.body))
    if res.code == RS.PULL_OFFSET_MOVED:
        if ctl.config.is_slave and not ctl.config.offset_check_in_slave:
            return respond(
                req, replace(res, code=RS.PULL_RETRY_IMMEDIATELY), int(pull.group.get("brokerId", 0))
            )
        report_offset_moved(ctl, pull.header, res.next_begin_offset)
    return respond(req, res, suggest_broker(ctl, pull, res))


def respond(req: RemotingCommand, res: PullResult, suggest: int = 0) -> RemotingCommand:
    header = hd.PullMessageResponseHeader(
        suggest_which_broker_id=suggest,
        next_begin_offset=res.next_begin_offset,
        min_offset=res.min_offset,
        max_offset=res.max_offset,
    )
    return req.response(res.code, res.status, header=header, body=res.body)


async def hold(ctl: BrokerContext, req: RemotingCommand, pull: PullRequest, timeout_ms: int) -> Reply:
    """Long polling (``PullRequestHoldService.notifyMessageArriving``): the pull is run again once a
    message its filter matches arrives in the queue, or at the service's first check round after
    the queue grew past the pull's offset (a round does not look at the filter), or when its time
    is up. A pull without a filter matches every arrival."""
    h = pull.header
    deadline = time.monotonic() + timeout_ms / 1000
    checked = h.queue_offset  # the arrivals before this offset were matched against the filter
    filtered = pull.codes is not None or pull.selector is not None
    while True:
        now = time.monotonic()
        if now >= deadline:
            break
        until = min(deadline, ctl.holds.next_check(now)) if filtered else deadline
        woken = await ctl.holds.wait(h.topic, h.queue_id, until - now)
        if woken is Woken.RELEASED:  # the group's master is back (HoldService.release_all)
            break
        if woken is Woken.TIMEOUT:
            if ctl.store.max_offset(h.topic, h.queue_id) > h.queue_offset:
                break  # a check round (``checkHoldRequest``) answers a pull whose queue grew
            continue
        if filtered:
            newest = ctl.store.max_offset(h.topic, h.queue_id)
            matched = arrival_matches(ctl, pull, checked, newest)
            checked = max(checked, newest)
            if not matched:
                continue
        res = fetch(ctl, pull)
        if res.code != RS.PULL_NOT_FOUND:
            return answer(ctl, req, pull, res)
    return answer(ctl, req, pull, fetch(ctl, pull))


def arrival_matches(ctl: BrokerContext, pull: PullRequest, start: int, end: int) -> bool:
    """Whether a unit in ``[start, end)`` of the pull's queue passes its filter: the tags code
    (``isMatchedByConsumeQueue``), then the SQL92 expression on the message's properties
    (``isMatchedByCommitLog``), as each arrival is matched in 4.9.8."""
    h = pull.header
    store = ctl.store
    while start < end:
        units = 0
        chunk = min(end - start, MAX_FILTER_BYTES // CQ_UNIT_SIZE)
        for physical, size, tags_code in store.unit_tuples(h.topic, h.queue_id, start, chunk):
            units += 1
            if pull.codes is not None and tags_code not in pull.codes:
                continue
            if pull.selector is None:
                return True
            data = store.read(physical, size)
            if data is not None and pull.selector.matches(record_properties(data)):
                return True
        if units == 0:
            return False
        start += units
    return False


def pull_message(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply | Awaitable[Reply]:
    try:
        pull = parse(ctl, req)
    except PullError as exc:
        return exc.answer(req)
    h = pull.header
    # 4.9.8 takes no commit offset from a pull on a slave; 5.1.1 takes it everywhere (with
    # SlaveActingMaster a consumer commits on the acting master, which clients see as id 0)
    commits_here = not ctl.config.is_slave or ctl.config.acting.enable_slave_acting_master
    if h.sys_flag & hd.PULL_FLAG_COMMIT_OFFSET and commits_here and h.commit_offset >= 0:
        ctl.offsets.commit(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
    res = fetch(ctl, pull)
    if res.code == RS.PULL_NOT_FOUND and h.sys_flag & hd.PULL_FLAG_SUSPEND:
        timeout = (
            h.suspend_timeout_millis
            if ctl.config.long_polling_enable
            else ctl.config.short_polling_time_mills
        )
        if timeout > 0:
            return hold(ctl, req, pull, timeout)
    return answer(ctl, req, pull, res)


HANDLERS = {RC.PULL_MESSAGE: pull_message}
