"""QUERY_ASSIGNMENT (400) and SET_MESSAGE_REQUEST_MODE (401): ``QueryAssignmentProcessor`` and
``MessageRequestModeManager`` of RocketMQ 5.1.1, which switch a 5.x push consumer to POP.

A consumer with ``clientRebalance=false`` asks the broker which queues it gets and in which mode
(``MessageQueueAssignment``: queue + ``PULL``/``POP``). The mode of a (topic, group) is what
SET_MESSAGE_REQUEST_MODE (``mqadmin setConsumeMode``) stored, else PULL (``defaultMessageRequestMode``);
a retry topic is always PULL. POP with ``popShareQueueNum`` <= 0 (or >= consumers - 1) gives every
consumer one queue per broker with queue id -1 (a POP of every queue); PULL, or POP sharing fewer
queues, allocates as the strategy named (``AVG``, ``AVG_BY_CIRCLE``). The queues are this broker's
(rmq serve is one broker). Modes persist in ``config/messageRequestMode.json``
(``{"messageRequestModeMap":{topic:{group:{...}}}}``) through the store's config writer.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from formats import fastjson
from formats.names import RETRY_PREFIX
from rmqcli.broker.state import validate_group, validate_topic
from rmqcli.errors import CorruptDataError
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC
from rmqcli.remoting.codes import ResponseCode as RS
from rmqcli.remoting.server.connection import Connection, Reply
from rmqcli.store.configfiles import load_config
from rmqcli.store.store import CONFIG_DIR

if TYPE_CHECKING:
    from rmqcli.broker.context import BrokerContext

log = logging.getLogger(__name__)

FILE_NAME = "messageRequestMode.json"
MODES = ("PULL", "POP")
MAX_BODY = 64 * 1024
MAX_ENTRIES = 100_000


class Modes:
    """``MessageRequestModeManager``: topic -> group -> ``SetMessageRequestModeRequestBody``."""

    def __init__(self, ctl: BrokerContext):
        self.ctl = ctl
        self.table: dict[str, dict[str, dict[str, Any]]] = {}
        try:
            data = load_config(ctl.writer.root / CONFIG_DIR, FILE_NAME).data
        except CorruptDataError as exc:
            log.warning("%s: %s; starting without request modes", FILE_NAME, exc)
            data = {}
        table = data.get("messageRequestModeMap") or {}
        if isinstance(table, dict):
            for topic, groups in table.items():
                if isinstance(groups, dict):
                    for group, body in groups.items():
                        if isinstance(body, dict) and body.get("mode") in MODES:
                            self.table.setdefault(str(topic), {})[str(group)] = body

    def get(self, topic: str, group: str) -> dict[str, Any] | None:
        return self.table.get(topic, {}).get(group)

    def put(self, topic: str, group: str, body: dict[str, Any]) -> None:
        self.table.setdefault(topic, {})[group] = body
        text = fastjson.dumps({"messageRequestModeMap": self.table}, pretty=True)
        self.ctl.store.config_writer.write_now({FILE_NAME: text})  # persisted before the answer


def modes(ctl: BrokerContext) -> Modes:
    """The broker's request modes, loaded on first use (``BrokerContext.parts``)."""
    return ctl.parts.get(Modes, lambda: Modes(ctl))


def _body(req: RemotingCommand) -> dict[str, Any] | None:
    if not req.body or len(req.body) > MAX_BODY:
        return None
    try:
        data = json.loads(req.body)
    except (ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def set_mode(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    body = _body(req)
    if body is None:
        return req.response(RS.SYSTEM_ERROR, "SetMessageRequestModeRequestBody is missing or not JSON")
    topic, group = str(body.get("topic") or ""), str(body.get("consumerGroup") or "")
    problem = validate_topic(topic) or validate_group(group)
    if problem:
        return req.response(RS.SYSTEM_ERROR, problem)
    if topic.startswith(RETRY_PREFIX):
        return req.response(RS.NO_PERMISSION, "retry topic is not allowed to set mode")
    mode = body.get("mode", "PULL")
    share = body.get("popShareQueueNum", 0)
    if mode not in MODES or not isinstance(share, int) or isinstance(share, bool):
        return req.response(RS.SYSTEM_ERROR, f"bad mode {mode!r} or popShareQueueNum {share!r}")
    m = modes(ctl)
    if m.get(topic, group) is None and sum(len(g) for g in m.table.values()) >= MAX_ENTRIES:
        return req.response(RS.SYSTEM_ERROR, "too many request modes")
    m.put(topic, group, {"consumerGroup": group, "mode": mode, "popShareQueueNum": share, "topic": topic})
    return req.response()


def _averagely(index: int, mqs: list[tuple[str, str, int]], n_cids: int) -> list[tuple[str, str, int]]:
    """``AllocateMessageQueueAveragely``."""
    mod = len(mqs) % n_cids
    if len(mqs) <= n_cids:
        size = 1
    else:
        size = len(mqs) // n_cids + (1 if mod > 0 and index < mod else 0)
    start = index * size if mod > 0 and index < mod else index * size + mod
    count = min(size, len(mqs) - start)
    return [mqs[(start + i) % len(mqs)] for i in range(max(count, 0))]


def _by_circle(index: int, mqs: list[tuple[str, str, int]], n_cids: int) -> list[tuple[str, str, int]]:
    """``AllocateMessageQueueAveragelyByCircle``."""
    return [mq for i, mq in enumerate(mqs) if i % n_cids == index]


STRATEGIES = {"AVG": _averagely, "AVG_BY_CIRCLE": _by_circle}


def _allocate(
    strategy: Any, cid: str, mqs: list[tuple[str, str, int]], cids: list[str], mode: str, share: int
) -> list[tuple[str, str, int]] | None:
    if cid not in cids:
        return []
    index = cids.index(cid)
    if mode != "POP":
        return strategy(index, mqs, len(cids))
    if share <= 0 or share >= len(cids) - 1:  # allocate4Pop: every queue, as queue id -1
        return sorted({(topic, broker, -1) for topic, broker, _ in mqs})
    if len(cids) <= len(mqs):
        result = strategy(index, mqs, len(cids))
        for i in range(1, share + 1):
            result += strategy((index + i) % len(cids), mqs, len(cids))
        return result
    return [mqs[index % len(mqs)]]


def query_assignment(ctl: BrokerContext, req: RemotingCommand, conn: Connection) -> Reply:
    body = _body(req)
    if body is None:
        return req.response(RS.SYSTEM_ERROR, "QueryAssignmentRequestBody is missing or not JSON")
    topic, group = str(body.get("topic") or ""), str(body.get("consumerGroup") or "")
    cid, model = str(body.get("clientId") or ""), body.get("messageModel", "CLUSTERING")
    problem = validate_topic(topic) or validate_group(group)
    if problem:
        return req.response(RS.SYSTEM_ERROR, problem)
    chosen = modes(ctl).get(topic, group)
    if chosen is None:
        chosen = {"mode": "PULL", "popShareQueueNum": -1}
    mode, share = chosen["mode"], int(chosen.get("popShareQueueNum", 0))
    if topic.startswith(RETRY_PREFIX):
        mode = "PULL"
    config = ctl.topics.get(topic)
    queues: list[tuple[str, str, int]] | None = None
    if config is not None:
        mqs = sorted((topic, ctl.config.broker_name, q) for q in range(config["readQueueNums"]))
        if model == "BROADCASTING":
            queues = mqs
        else:
            info = ctl.clients.consumers.get(group)
            strategy = STRATEGIES.get(str(body.get("strategyName")))
            if info is not None and strategy is not None and mqs:
                queues = _allocate(strategy, cid, mqs, sorted(info.channels), mode, share)
    assignments = None
    if queues is not None:
        assignments = [
            {"messageQueue": {"brokerName": b, "queueId": q, "topic": t}, "mode": mode} for t, b, q in queues
        ]
    out = {"messageQueueAssignments": assignments} if assignments is not None else {}
    return req.response(body=json.dumps(out, separators=(",", ":")).encode())


HANDLERS = {RC.QUERY_ASSIGNMENT: query_assignment, RC.SET_MESSAGE_REQUEST_MODE: set_mode}
