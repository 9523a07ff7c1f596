"""The bodies of the revive topic's messages: ``PopCheckPoint`` (tag ``ck``) and ``AckMsg`` (tag
``ack``), fastjson with their short keys (RocketMQ 5.1.1 ``store/.../pop/PopCheckPoint.java``,
``AckMsg.java``; research notes issue21 §2, §7).

fastjson writes a bean's properties sorted by name, null ones left out, and the ck's computed
getter ``reviveTime`` too: ``{"bm":0,"bn":"broker-a","c":"GP","d":[0,1,2],"it":10000,"n":3,
"pt":...,"q":0,"reviveTime":...,"ro":0,"so":0,"t":"TopicP"}``. Reading takes the short keys (and
fastjson's long alternates), and refuses anything malformed (``CheckpointError``): the revive
topic is writable by clients, so its bodies are untrusted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

MAX_NUM = 32  # a ck covers at most one POP's messages (MAX_POP_NUMS); ``n`` is a Java byte
MAX_BODY = 64 * 1024


class CheckpointError(ValueError):
    """A revive-topic body that is no ck / ack."""


@dataclass(slots=True)
class PopCheckPoint:
    start_offset: int  # so
    pop_time: int  # pt
    invisible_time: int  # it
    num: int  # n
    queue_id: int  # q
    topic: str  # t: the topic popped (normal or pop-retry)
    group: str  # c
    broker_name: str | None = None  # bn
    bit_map: int = 0  # bm: bit i = i-th message acked
    revive_offset: int = 0  # ro: the ck's offset in its revive queue (set when read back)
    diff: list[int] | None = field(default=None)  # d: queue offset - start offset, per message

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    def ack_offset(self, index: int) -> int:
        """``ackOffsetByIndex``: the queue offset of the ``index``-th message."""
        if not self.diff:
            return self.start_offset + index
        return self.start_offset + self.diff[index]

    def index_of_ack(self, ack_offset: int) -> int:
        """``indexOfAck``: -1 when the offset is not one of the ck's."""
        delta = ack_offset - self.start_offset
        if not self.diff:
            return delta if 0 <= delta < self.num else -1
        try:
            return self.diff.index(delta)
        except ValueError:
            return -1

    def merge_key(self) -> str:
        return _merge_key(self)

    def to_json(self) -> str:
        diff = None if self.diff is None else list(self.diff)
        return _bean_json(
            bm=self.bit_map, bn=self.broker_name, c=self.group, d=diff, it=self.invisible_time, n=self.num,
            pt=self.pop_time, q=self.queue_id, reviveTime=self.revive_time, ro=self.revive_offset,
            so=self.start_offset, t=self.topic,
        )  # fmt: skip


@dataclass(slots=True)
class AckMsg:
    ack_offset: int  # ao
    start_offset: int  # so: the ck's
    group: str  # c
    topic: str  # t
    queue_id: int  # q
    pop_time: int  # pt: the ck's
    broker_name: str | None = None  # bn

    def merge_key(self) -> str:
        return _merge_key(self)

    def to_json(self) -> str:
        bean = {"ao": self.ack_offset, "bn": self.broker_name, "c": self.group, "pt": self.pop_time,
                "q": self.queue_id, "so": self.start_offset, "t": self.topic}  # fmt: skip
        if None in bean.values():  # _bean_json's rule; every ack of the broker has them all
            bean = {key: value for key, value in bean.items() if value is not None}
        return _compact(bean)  # its properties in name order already


def _merge_key(body: PopCheckPoint | AckMsg) -> str:
    """The key under which revive merges an ack into its ck (``mergeKey``)."""
    return f"{body.topic}{body.group}{body.queue_id}{body.start_offset}{body.pop_time}"


def _bean_json(**properties: object) -> str:
    """fastjson of a bean: its properties sorted by name, the null ones left out."""
    return _compact({key: properties[key] for key in sorted(properties) if properties[key] is not None})


# ``fastjson.dumps`` of a map with string keys (and numbers, strings and lists of numbers for
# values, as every bean here has) is ``json``'s compact form: that encoder, made once
_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def ck_unique_id(ck: PopCheckPoint) -> str:
    """``genCkUniqueId``: ``topic@queueId@startOffset@group@popTime@brokerName@ck``."""
    return f"{ck.topic}@{ck.queue_id}@{ck.start_offset}@{ck.group}@{ck.pop_time}@{ck.broker_name}@ck"


def ack_unique_id(ack: AckMsg) -> str:
    """``genAckUniqueId``: ``topic@queueId@ackOffset@group@popTime@brokerName@ack``."""
    return f"{ack.topic}@{ack.queue_id}@{ack.ack_offset}@{ack.group}@{ack.pop_time}@{ack.broker_name}@ack"


def _object(raw: bytes) -> dict:
    if len(raw) > MAX_BODY:
        raise CheckpointError("body too large")
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CheckpointError("not a JSON object")
    return data


def _get(data: dict, keys: tuple[str, ...], kind: type, default: object = None) -> object:
    for key in keys:
        if key in data and data[key] is not None:
            value = data[key]
            if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
                raise CheckpointError(f"{key} is not a number")
            if kind is int and not -(1 << 63) <= value < (1 << 63):
                raise CheckpointError(f"{key} is out of range")
            if kind is str and not isinstance(value, str):
                raise CheckpointError(f"{key} is not a string")
            return value
    if default is None:
        raise CheckpointError(f"{keys[0]} is missing")
    return default


def decode_ck(raw: bytes) -> PopCheckPoint:
    data = _object(raw)
    num = int(_get(data, ("n", "num"), int))  # type: ignore[arg-type]
    if not 0 <= num <= MAX_NUM:
        raise CheckpointError(f"n={num} is out of range")
    diff = data.get("d", data.get("queueOffsetDiff"))
    if diff is not None:
        if not isinstance(diff, list) or len(diff) != num:
            raise CheckpointError("d does not list one diff per message")
        if not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < (1 << 31) for x in diff):
            raise CheckpointError("d holds a bad diff")
    bn = data.get("bn", data.get("brokerName"))
    return PopCheckPoint(
        start_offset=int(_get(data, ("so", "startOffset"), int)),  # type: ignore[arg-type]
        pop_time=int(_get(data, ("pt", "popTime"), int)),  # type: ignore[arg-type]
        invisible_time=int(_get(data, ("it", "invisibleTime"), int)),  # type: ignore[arg-type]
        num=num,
        queue_id=int(_get(data, ("q", "queueId"), int)),  # type: ignore[arg-type]
        topic=str(_get(data, ("t", "topic"), str)),
        group=str(_get(data, ("c", "cid"), str)),
        broker_name=bn if isinstance(bn, str) else None,
        bit_map=int(_get(data, ("bm", "bitMap"), int, 0)),  # type: ignore[arg-type]
        revive_offset=int(_get(data, ("ro", "reviveOffset"), int, 0)),  # type: ignore[arg-type]
        diff=list(diff) if diff is not None else None,
    )


def decode_ack(raw: bytes) -> AckMsg:
    data = _object(raw)
    bn = data.get("bn", data.get("brokerName"))
    return AckMsg(
        ack_offset=int(_get(data, ("ao", "ackOffset"), int)),  # type: ignore[arg-type]
        start_offset=int(_get(data, ("so", "startOffset"), int)),  # type: ignore[arg-type]
        group=str(_get(data, ("c", "consumerGroup"), str)),
        topic=str(_get(data, ("t", "topic"), str)),
        queue_id=int(_get(data, ("q", "queueId"), int)),  # type: ignore[arg-type]
        pop_time=int(_get(data, ("pt", "popTime"), int)),  # type: ignore[arg-type]
        broker_name=bn if isinstance(bn, str) else None,
    )
