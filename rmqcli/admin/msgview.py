"""What ``queryMsgById``, ``queryMsgByOffset`` and ``queryMsgByUniqueKey`` print of a message beside
the message itself: the file its body is written to (``createBodyFile``) and the consumer groups'
tracks (``DefaultMQAdminExtImpl.messageTrackDetail``; protocol.md C.4.6).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from rmqcli.admin.mqclient import Message
from rmqcli.admin.session import AdminSession
from rmqcli.errors import BrokerError, NetworkError
from rmqcli.remoting.codes import ResponseCode

BODY_DIR = os.path.join("rocketmq", "msgbodys")


@dataclass
class MessageTrack:
    consumer_group: str
    track_type: str = "UNKNOWN"
    exception_desc: str | None = None

    def java_string(self) -> str:
        return (
            f"MessageTrack [consumerGroup={self.consumer_group}, trackType={self.track_type}, "
            f"exceptionDesc={'null' if self.exception_desc is None else self.exception_desc}]"
        )


@dataclass
class MessageView:
    """A message as printed by ``queryMsgById``/``queryMsgByOffset``/``queryMsgByUniqueKey``."""

    message: Message
    body_path: str
    tracks: list[MessageTrack] | None = None
    tracks_error: str | None = None


def write_body(msg: Message, index: int = 0, directory: str | None = None) -> str:
    """``createBodyFile``: the body under ``<tmpdir>/rocketmq/msgbodys/<msgId>[_<index>]``."""
    import tempfile

    base = os.path.join(directory or tempfile.gettempdir(), BODY_DIR)
    os.makedirs(base, exist_ok=True)
    path = os.path.join(base, msg.msg_id + (f"_{index}" if index > 0 else ""))
    with open(path, "wb") as fh:
        fh.write(msg.body)
    return path


def _code_desc(exc: BrokerError) -> tuple[int | None, str]:
    """``CODE:<n> DESC:<remark>`` pieces of an error raised by ``expect`` (``addr: NAME(n): remark``)."""
    import re

    match = re.search(r"\((\d+)\)(?::\s*(.*))?$", str(exc))
    if not match:
        return None, str(exc)
    return int(match.group(1)), match.group(2) or ""


def _failed(track: MessageTrack, exc: BrokerError) -> None:
    """A broker's error answer as mqadmin records it, ``CODE:<n> DESC:<remark>``; CONSUMER_NOT_ONLINE
    also marks the track NOT_ONLINE."""
    code, desc = _code_desc(exc)
    if code == ResponseCode.CONSUMER_NOT_ONLINE:
        track.track_type = "NOT_ONLINE"
    track.exception_desc = f"CODE:{code} DESC:{desc}"


def message_tracks(session: AdminSession, msg: Message) -> list[MessageTrack]:
    """``messageTrackDetail``: groups from QUERY_TOPIC_CONSUME_BY_WHO (300), each group's
    connection (203) and, for push consumers, whether its offset passed the message (208)."""
    from rmqcli.admin import group as groups

    tracks = []
    for name in groups.consuming_groups(session, msg.topic, session.route(msg.topic)):
        track = MessageTrack(consumer_group=name)
        tracks.append(track)
        try:
            conn = groups.consumer_connection(session, name)
        except groups.ConsumerNotOnline as exc:
            track.exception_desc = f"org.apache.rocketmq.client.exception.MQClientException: {exc}"
            continue
        except BrokerError as exc:
            _failed(track, exc)
            continue
        except NetworkError as exc:
            track.exception_desc = str(exc)
            continue
        if conn.consume_type == "CONSUME_ACTIVELY":
            track.track_type = "PULL"
        elif conn.consume_type == "CONSUME_PASSIVELY":
            try:
                consumed = _consumed(session, msg, name)
            except groups.ConsumerNotOnline as exc:
                track.track_type = "NOT_ONLINE"
                not_online = int(ResponseCode.CONSUMER_NOT_ONLINE)
                track.exception_desc = f"CODE:{not_online} DESC:{str(exc).split(': ', 1)[-1]}"
                continue
            except BrokerError as exc:
                _failed(track, exc)
                continue
            if consumed:
                track.track_type = "CONSUMED"
                sub = conn.subscription_table.get(msg.topic)
                if (
                    sub is not None
                    and sub.tags_set
                    and msg.tags not in sub.tags_set
                    and "*" not in sub.tags_set
                ):
                    track.track_type = "CONSUMED_BUT_FILTERED"
            else:
                track.track_type = "NOT_CONSUME_YET"
    return tracks


def _consumed(session: AdminSession, msg: Message, group: str) -> bool:
    from rmqcli.admin import group as groups

    stats = groups.consume_stats(session, group)
    table = session.cluster_info().broker_addr_table
    for row in stats.rows:
        if row.topic == msg.topic and row.queue_id == msg.queue_id:
            data = table.get(row.broker_name)
            if data is not None and data.broker_addrs.get(0) == msg.store_host:
                if row.consumer_offset > msg.queue_offset:
                    return True
    return False


def view(session: AdminSession, msg: Message, index: int = 0, tracks: bool = True) -> MessageView:
    """The message with its body file and, unless ``tracks`` is false, its consumer tracks."""
    view = MessageView(message=msg, body_path=write_body(msg, index))
    if tracks:
        try:
            view.tracks = message_tracks(session, msg)
        except (BrokerError, NetworkError) as exc:
            view.tracks_error = str(exc)
    return view
