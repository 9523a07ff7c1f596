"""File names of a RocketMQ store (``UtilAll.offset2FileName``, ``timeMillisToHumanString``), and
the one place a directory name is made from a topic name (``ConsumeQueue``'s
``storePath/topic/queueId``)."""

from __future__ import annotations

import functools
import os
import time
from functools import lru_cache
from pathlib import Path

from rmqcli.errors import UnsafeNameError

OFFSET_NAME_DIGITS = 20
INDEX_NAME_FORMAT = "%Y%m%d%H%M%S"
CONSUMEQUEUE_DIR = "consumequeue"
NAME_MAX = 255  # bytes in one file name (NAME_MAX of Linux; ext4, xfs, btrfs, tmpfs)


def offset_to_name(offset: int) -> str:
    """A file's global start offset, zero-padded to 20 digits."""
    return f"{offset:0{OFFSET_NAME_DIGITS}d}"


def is_offset_name(name: str) -> bool:
    return len(name) == OFFSET_NAME_DIGITS and name.isdigit()


def index_file_name(millis: int, *, utc: bool = False) -> str:
    """``yyyyMMddHHmmssSSS`` of ``millis`` in local time (as the broker names index files)."""
    seconds, ms = divmod(millis, 1000)
    stamp = time.gmtime(seconds) if utc else time.localtime(seconds)
    return time.strftime(INDEX_NAME_FORMAT, stamp) + f"{ms:03d}"


def is_index_name(name: str) -> bool:
    return len(name) == 17 and name.isdigit()


# --- topic names as directory names ---------------------------------------------------------------
@lru_cache(maxsize=4096)
def topic_dir_problem(topic: str) -> str | None:
    """Why ``topic`` cannot be one directory name under ``consumequeue/`` (None: it can).

    A broker's ``ConsumeQueue`` opens ``new File(storePath + File.separator + topic)``; a name that
    is empty, ``.`` or ``..``, or holds a separator would put the queue somewhere else (a parent
    directory, outside the store). A NUL, a name the filesystem encoding cannot encode (a lone
    surrogate) or one longer than ``NAME_MAX`` bytes makes the filesystem refuse it. ``\\`` is a
    separator on Windows, where a store may be copied. Anything else POSIX allows in a file name
    (spaces, newlines, other control characters) is kept: it neither escapes nor fails, and a
    broker writes such queues.
    """
    if not topic:
        return "the name is empty"
    if topic in (".", ".."):
        return "'.' is consumequeue/ itself" if topic == "." else "'..' is the store directory"
    for sep in ("/", "\\"):
        if sep in topic:
            return f"it contains {sep!r}, a path separator"
    if "\0" in topic:
        return "it contains a NUL character, which no file name can hold"
    try:
        size = len(os.fsencode(topic))
    except UnicodeEncodeError:
        return "it cannot be encoded as a file name (a lone surrogate)"
    if size > NAME_MAX:
        return f"it is {size} bytes long; a file name holds at most {NAME_MAX}"
    return None


def is_safe_topic_dir(topic: str) -> bool:
    """Whether ``topic`` may name a directory under ``consumequeue/`` (``topic_dir_problem``)."""
    return topic_dir_problem(topic) is None


@functools.lru_cache(maxsize=256)
def _real(base: str) -> Path:
    return Path(base).resolve()


def _inside(base: str, parts: tuple[str, ...], topic: str) -> Path:
    """``base`` joined with ``parts``, once its resolved form is checked to lie below ``base``'s
    (symbolic links followed).

    The parts are plain components (``topic_dir_problem`` allows no separator and no ``.``/``..``),
    so only a symbolic link among them can lead elsewhere: without one the path is inside, and only
    then is it resolved (``realpath`` costs a system call per component)."""
    probe = base
    for part in parts:
        probe = os.path.join(probe, part)
        if os.path.islink(probe):
            break
    else:
        return Path(probe)
    path = Path(base, *parts)
    real_base = _real(base)
    real = path.resolve()
    if real_base not in real.parents:
        raise UnsafeNameError(topic, f"{path} resolves to {real}, outside {real_base}")
    return path


def topic_dir(root: Path | str, topic: str) -> Path:
    """``root/consumequeue/<topic>``; ``UnsafeNameError`` for a name that cannot be one directory
    there (``topic_dir_problem``) or whose path resolves outside ``root/consumequeue``."""
    problem = topic_dir_problem(topic)
    if problem is not None:
        raise UnsafeNameError(topic, problem)
    return _inside(os.path.join(root, CONSUMEQUEUE_DIR), (topic,), topic)


def consume_queue_dir(root: Path | str, topic: str, queue_id: int) -> Path:
    """``root/consumequeue/<topic>/<queueId>``, checked as ``topic_dir`` checks it."""
    problem = topic_dir_problem(topic)
    if problem is not None:
        raise UnsafeNameError(topic, problem)
    return _inside(os.path.join(root, CONSUMEQUEUE_DIR), (topic, str(int(queue_id))), topic)
