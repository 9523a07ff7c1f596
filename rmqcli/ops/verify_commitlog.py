"""CommitLog verification: every record checked as ``CommitLog.checkMessageAndReturnSize`` does.

Per file, record starts come from the header-scan hop (``headerscan``), with the consume queues'
offsets as hints; all fixed fields are then gathered and checked at once with numpy (magic, size
bounds, field lengths, recomputed length, PHYSICALOFFSET), body CRCs are computed with
``zlib.crc32`` over memoryview slices in one tight loop (only for ``bodyLen > 0``, as recovery
does with ``checkCRCOnRecover``), and the properties of the file are parsed in bulk
(``verify_props``). Only where the bulk checks find a bad record is it decoded alone
(``decode_record``) for an exact message; the scan then resyncs and goes on. Files must end in a
BLANK record or a zero tail (FORMATS.md §1.10).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from formats import commitlog as fmt
from formats.javahash import string_hash
from rmqcli.ops.verify_common import Collector
from rmqcli.ops.verify_props import index_key_hashes, parse_properties, segment_hashes, to_signed32, tokens
from rmqcli.store.commitlog import RecordError, classify_tail, decode_record, resync
from rmqcli.store.headerscan import chain_from_hints, gather, group_topics, walk
from rmqcli.store.mapped import MappedFile
from rmqcli.store.naming import offset_to_name

_AT = fmt.PREFIX_OFFSETS
_MIN_RECORD = fmt.calc_msg_length(0, 0, 0, 0)
_FIXED_BY_FLAGS = np.array(
    [fmt.HEADER_STRUCTS[f].size if f in fmt.HEADER_STRUCTS else 0 for f in range(fmt.HOST_FLAGS + 1)],
    dtype=np.int64,
)
_BORN_BY_FLAGS = np.array(
    [fmt.host_length(f, fmt.BORNHOST_V6_FLAG) for f in range(fmt.HOST_FLAGS + 1)], dtype=np.int64
)
_BODY_LENGTH_BACK = fmt.AFTER_STORE_HOST_STRUCT.size - fmt.AFTER_STORE_HOST_OFFSETS["body_length"]
_PROPS_LEN_SIZE = fmt.PROPERTIES_LENGTH.sizeof()
_TL_V1 = fmt.topic_length_size(fmt.MAGIC_V1)
_TL_V2 = fmt.topic_length_size(fmt.MAGIC_V2)
_BLANK_BYTES = fmt.END_FILE_MIN_BLANK_LENGTH
_CRC_MASK = 0x7FFFFFFF
_WANTED = [fmt.PROPERTY_TAGS, fmt.PROPERTY_KEYS, fmt.PROPERTY_UNIQ_KEY]


@dataclass
class FileInfo:
    """Where one CommitLog file's data ends and how."""

    mapped: MappedFile
    data_end: int = 0  # position in the file just past the last record (valid or not)
    tail: str = "zeros"  # "blank", "zeros", "end", "garbage"
    records: int = 0
    first_store_timestamp: int | None = None


@dataclass
class RecordTable:
    """Every valid record of the CommitLog, as parallel arrays sorted by position."""

    position: np.ndarray
    total_size: np.ndarray
    queue_id: np.ndarray
    queue_offset: np.ndarray
    sys_flag: np.ndarray
    store_timestamp: np.ndarray
    topic_id: np.ndarray
    tags_code: np.ndarray
    topics: list[str]
    key_record: np.ndarray  # one row per index key: the record it belongs to
    key_hash: np.ndarray
    files: list[FileInfo] = field(default_factory=list)
    valid_end: int = 0  # global offset just past the last valid record (maxPhyOffset)
    bytes: int = 0
    crc_checked: int = 0

    def __len__(self) -> int:
        return len(self.position)

    def locate(self, offsets: np.ndarray) -> np.ndarray:
        """Row of the record starting at each offset, or -1."""
        if not len(self.position):
            return np.full(len(offsets), -1, dtype=np.int64)
        i = np.searchsorted(self.position, offsets)
        i = np.minimum(i, len(self.position) - 1)
        return np.where(self.position[i] == offsets, i, -1)


class _Parts:
    """Per-file column pieces, concatenated at the end."""

    def __init__(self) -> None:
        self.cols: dict[str, list[np.ndarray]] = {}
        self.topic_ids: dict[str, int] = {}
        self.count = 0

    def topic_id(self, topic: str) -> int:
        return self.topic_ids.setdefault(topic, len(self.topic_ids))

    def add(self, **cols: np.ndarray) -> None:
        for k, v in cols.items():
            self.cols.setdefault(k, []).append(v)

    def column(self, name: str, dtype=np.int64) -> np.ndarray:
        parts = self.cols.get(name)
        return np.concatenate(parts).astype(dtype) if parts else np.empty(0, dtype=dtype)


def _clip_gather(arr: np.ndarray, pos: np.ndarray, dtype: str) -> np.ndarray:
    width = np.dtype(dtype).itemsize
    return gather(arr, np.clip(pos, 0, len(arr) - width), dtype).astype(np.int64)


def _check_fields(arr: np.ndarray, starts: np.ndarray, limit: int) -> dict[str, np.ndarray]:
    """All fixed fields of the records at ``starts`` and ``ok`` (checkMessageAndReturnSize passes)."""
    total = _clip_gather(arr, starts + _AT["total_size"], ">i4")
    magic = _clip_gather(arr, starts + _AT["magic_code"], ">i4")
    is_v2 = magic == fmt.MAGIC_V2
    ok = (magic == fmt.MAGIC_V1) | is_v2
    ends = starts + total
    ok &= (total >= _MIN_RECORD) & (ends <= limit)
    sys_flag = _clip_gather(arr, starts + _AT["sys_flag"], ">i4")
    hosts = sys_flag & fmt.HOST_FLAGS
    fixed = _FIXED_BY_FLAGS[hosts]
    body_len = _clip_gather(arr, starts + fixed - _BODY_LENGTH_BACK, ">i4")
    body_start = starts + fixed
    tl_size = np.where(is_v2, _TL_V2, _TL_V1)
    topic_len_at = body_start + body_len
    ok &= (body_len >= 0) & (topic_len_at + tl_size + _PROPS_LEN_SIZE <= ends)
    safe_tl = np.clip(topic_len_at, 0, limit - _TL_V2)
    topic_len = np.where(
        is_v2, gather(arr, safe_tl, ">i2").astype(np.int64), arr[safe_tl].astype(np.int8).astype(np.int64)
    )
    topic_start = topic_len_at + tl_size
    props_len_at = topic_start + topic_len
    ok &= (topic_len >= 0) & (props_len_at + _PROPS_LEN_SIZE <= ends)
    props_len = _clip_gather(arr, props_len_at, ">i2")
    props_start = props_len_at + _PROPS_LEN_SIZE
    ok &= props_start + np.maximum(props_len, 0) == ends
    return {
        "ok": ok,
        "magic": magic,
        "total": total,
        "sys_flag": sys_flag,
        "hosts": hosts,
        "body_start": body_start,
        "body_len": body_len,
        "topic_start": topic_start,
        "topic_len": topic_len,
        "props_start": props_start,
        "props_len": np.maximum(props_len, 0),
    }


class CommitLogVerifier:
    """Scans the CommitLog of a store once and builds the ``RecordTable`` the other checks join on."""

    def __init__(
        self,
        files: list[MappedFile],
        file_size: int,
        problems: Collector,
        *,
        crc: bool = True,
        delay_millis: list[int] | None = None,
        hints: np.ndarray | None = None,
        progress: Callable[[int], None] | None = None,
    ):
        self.files = files
        self.file_size = file_size
        self.p = problems
        self.crc = crc
        self.delay_millis = delay_millis or fmt.DEFAULT_DELAY_MILLIS
        self.hints = hints
        self.progress = progress
        self.parts = _Parts()
        self.crc_checked = 0

    # --- files ------------------------------------------------------------------------------
    def check_files(self) -> None:
        """Sizes equal to the configured size, names continuous (``MappedFileQueue.load``/``checkSelf``)."""
        prev: MappedFile | None = None
        for mf in self.files:
            if mf.size != self.file_size:
                self.p.error(
                    "commitlog-file-size",
                    mf.path,
                    None,
                    f"file is {mf.size} bytes, expected {self.file_size}: the broker refuses to load it",
                )
            if self.file_size and mf.from_offset % self.file_size:
                self.p.error(
                    "commitlog-file-name",
                    mf.path,
                    None,
                    f"start offset {mf.from_offset} is not a multiple of the file size {self.file_size}",
                )
            if prev is not None and mf.from_offset != prev.from_offset + self.file_size:
                expected = prev.from_offset + self.file_size
                kind = "gap" if mf.from_offset > expected else "overlap"
                self.p.error(
                    "commitlog-file-gap",
                    mf.path,
                    None,
                    f"{kind}: previous file {prev.name} ends at {expected}, this one starts at "
                    f"{mf.from_offset} (expected {offset_to_name(expected)})",
                )
            prev = mf

    # --- records ----------------------------------------------------------------------------
    def scan(self) -> RecordTable:
        self.check_files()
        infos = []
        for mf in self.files:
            info = FileInfo(mf)
            if mf.size:
                self._scan_file(info)
            infos.append(info)
            if self.progress is not None:
                self.progress(mf.from_offset + mf.size)
        self._check_file_ends(infos)
        return self._table(infos)

    def _scan_file(self, info: FileInfo) -> None:
        mf = info.mapped
        buf = mf.map(whole=True)
        limit = len(buf)
        base = mf.from_offset
        arr = np.frombuffer(buf, dtype=np.uint8)
        hints = None if self.hints is None or not len(self.hints) else self.hints - base
        pos = 0
        while pos < limit:
            starts = None if hints is None else chain_from_hints(buf, pos, limit, hints)
            if starts is None:
                starts = np.array(walk(buf, pos, limit), dtype=np.int64)
            end, bad = self._records(info, arr, buf, starts, pos, limit)
            if bad is not None:
                pos = self._report_bad(info, buf, bad, limit)
            else:
                pos = self._file_tail(info, arr, buf, end, limit)

    def _records(
        self, info: FileInfo, arr: np.ndarray, buf, starts: np.ndarray, pos: int, limit: int
    ) -> tuple[int, int | None]:
        """Check the chain ``starts``; keep its valid prefix. Returns (data end, bad start or None)."""
        if not len(starts):
            return pos, None
        magic = _clip_gather(arr, starts + _AT["magic_code"], ">i4")
        blank = np.flatnonzero(magic == fmt.BLANK_MAGIC)
        body = starts[: blank[0]] if len(blank) else starts  # a BLANK ends the file's data
        f = _check_fields(arr, body, limit)
        ok = f["ok"]
        n_ok = int(np.argmin(ok)) if not ok.all() else len(body)
        if n_ok:
            self._keep(info, arr, buf, body[:n_ok], {k: v[:n_ok] for k, v in f.items()})
        if n_ok < len(body):
            if f["total"][n_ok] == 0 and f["magic"][n_ok] == 0:
                return int(body[n_ok]), None  # zeros: the data ends here (a hint pointed into them)
            return int(body[n_ok]), int(body[n_ok])
        if len(blank):
            return int(starts[blank[0]]), None
        return int(body[-1] + f["total"][-1]), None

    def _keep(
        self, info: FileInfo, arr: np.ndarray, buf, starts: np.ndarray, f: dict[str, np.ndarray]
    ) -> None:
        """Per-record checks on valid records (CRC, PHYSICALOFFSET, properties) and their columns."""
        mf = info.mapped
        base = mf.from_offset
        n = len(starts)
        phys = _clip_gather(arr, starts + _AT["physical_offset"], ">i8")
        wrong = np.flatnonzero(phys != starts + base)
        for i in wrong.tolist():
            self.p.warning(
                "physical-offset-mismatch",
                mf.path,
                int(starts[i]),
                f"PHYSICALOFFSET field is {int(phys[i])}, the record is at {int(starts[i]) + base}",
            )
        if self.crc:
            self._crc(mf, arr, buf, starts, f)
        store_ts = _clip_gather(arr, starts + fmt.PREFIX_SIZE + _BORN_BY_FLAGS[f["hosts"]], ">i8")
        topic_index, topics = group_topics(arr, f["topic_start"], f["topic_len"])
        if topics is None:
            topics, topic_index = self._topics_slow(mf, buf, starts, f)
        local_ids = np.array([self.parts.topic_id(t) for t in topics], dtype=np.int64)
        topic_id = local_ids[topic_index]
        tags, key_rec, key_hash = self._properties(mf, buf, starts, f, topics, topic_index, store_ts)
        offset = self.parts.count
        self.parts.add(
            position=starts + base,
            total_size=f["total"],
            queue_id=_clip_gather(arr, starts + _AT["queue_id"], ">i4"),
            queue_offset=_clip_gather(arr, starts + _AT["queue_offset"], ">i8"),
            sys_flag=f["sys_flag"],
            store_timestamp=store_ts,
            topic_id=topic_id,
            tags_code=tags,
            key_record=key_rec + offset,
            key_hash=key_hash,
        )
        self.parts.count += n
        info.records += n
        if info.first_store_timestamp is None:
            info.first_store_timestamp = int(store_ts[0])

    def _crc(
        self, mf: MappedFile, arr: np.ndarray, buf, starts: np.ndarray, f: dict[str, np.ndarray]
    ) -> None:
        """``UtilAll.crc32`` of every non-empty body against BODYCRC (``checkCRCOnRecover``)."""
        has_body = np.flatnonzero(f["body_len"] > 0)
        if not len(has_body):
            return
        bs = f["body_start"][has_body]
        be = bs + f["body_len"][has_body]
        crc32 = zlib.crc32
        view = memoryview(buf)
        try:  # map() keeps the loop in C: slice objects, memoryview slices, crc32 calls
            got = np.fromiter(
                map(crc32, map(view.__getitem__, map(slice, bs.tolist(), be.tolist()))),
                dtype=np.int64,
                count=len(bs),
            )
        finally:
            view.release()
        stored = _clip_gather(arr, starts[has_body] + _AT["body_crc"], ">i4")
        self.crc_checked += len(bs)
        for i in np.flatnonzero((got & _CRC_MASK) != stored).tolist():
            pos = int(starts[has_body[i]])
            self.p.error(
                "crc-mismatch",
                mf.path,
                pos,
                f"body CRC {int(got[i]) & _CRC_MASK} != stored BODYCRC {int(stored[i])}: "
                "recovery (checkCRCOnRecover) stops here",
            )

    def _topics_slow(self, mf: MappedFile, buf, starts: np.ndarray, f: dict[str, np.ndarray]):
        topics: dict[str, int] = {}
        index = np.empty(len(starts), dtype=np.int64)
        for i, (s, n) in enumerate(zip(f["topic_start"].tolist(), f["topic_len"].tolist(), strict=True)):
            raw = bytes(buf[s : s + n])
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = raw.decode("utf-8", "replace")
                self.p.warning(
                    "bad-topic",
                    mf.path,
                    int(starts[i]),
                    "topic is not valid UTF-8 (the broker decodes it with replacement characters)",
                )
            index[i] = topics.setdefault(text, len(topics))
        return list(topics), index

    def _properties(
        self,
        mf: MappedFile,
        buf,
        starts: np.ndarray,
        f: dict[str, np.ndarray],
        topics: list[str],
        topic_index: np.ndarray,
        store_ts: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Tags codes and index key hashes of the records, from one bulk parse of their properties."""
        ps = f["props_start"]
        pl = f["props_len"]
        joined = b"".join(map(buf.__getitem__, map(slice, ps.tolist(), (ps + pl).tolist())))
        data = np.frombuffer(joined, dtype=np.uint8)
        bounds = np.zeros(len(starts) + 1, dtype=np.int64)
        np.cumsum(pl, out=bounds[1:])
        parsed = parse_properties(data, bounds, _WANTED)
        for i in parsed.non_ascii.tolist():
            try:
                joined[bounds[i] : bounds[i + 1]].decode("utf-8")
            except UnicodeDecodeError as exc:
                self.p.warning(
                    "bad-properties",
                    mf.path,
                    int(starts[i]),
                    f"properties are not valid UTF-8 ({exc.reason} at byte {exc.start}); the broker "
                    "decodes them with replacement characters",
                )
        # tags code (FORMATS.md §2.2); the schedule topic carries the delivery time instead
        ts, te = parsed.values[fmt.PROPERTY_TAGS]
        present = ts >= 0
        tags = np.where(
            present,
            to_signed32(
                segment_hashes(data, np.where(present, ts, 0), np.where(present, te, 0), parsed.high)[0]
            ),
            0,
        )
        if fmt.SCHEDULE_TOPIC in topics:
            sched = np.flatnonzero(topic_index == topics.index(fmt.SCHEDULE_TOPIC))
            for i in sched.tolist():
                props = fmt.decode_properties(joined[bounds[i] : bounds[i + 1]])
                tags[i] = fmt.dispatch_tags_code(
                    fmt.SCHEDULE_TOPIC, props, int(store_ts[i]), self.delay_millis
                )
        # index keys (FORMATS.md §3.2): UNIQ_KEY, then each KEYS token
        us, ue = parsed.values[fmt.PROPERTY_UNIQ_KEY]
        ks, ke = parsed.values[fmt.PROPERTY_KEYS]
        uniq = np.flatnonzero(us >= 0)
        owner, tok_s, tok_e = tokens(data, ks, ke)
        key_rec = np.concatenate((uniq, owner))
        key_s = np.concatenate((us[uniq], tok_s))
        key_e = np.concatenate((ue[uniq], tok_e))
        prefix = np.array([string_hash(t + "#") & 0xFFFFFFFF for t in topics], dtype=np.uint64)
        hashes = index_key_hashes(prefix[topic_index[key_rec]], data, key_s, key_e, parsed.high)
        return tags, key_rec, hashes

    def _report_bad(self, info: FileInfo, buf, pos: int, limit: int) -> int:
        """Report the record at ``pos`` that failed the bulk checks; return where scanning resumes."""
        mf = info.mapped
        try:
            decode_record(buf, pos, limit)
            reason = "record rejected"  # the bulk checks and decode_record disagree; still bad
        except RecordError as exc:
            reason = str(exc)
        total = int.from_bytes(buf[pos : pos + 4], "big", signed=True) if pos + 4 <= limit else 0
        magic = int.from_bytes(buf[pos + 4 : pos + 8], "big", signed=True) if pos + 8 <= limit else 0
        nxt = resync(buf, pos + 1, limit, mf.from_offset)
        if magic in fmt.MESSAGE_MAGICS and total > limit - pos:
            kind = "truncated-record"
            reason = f"TOTALSIZE {total} runs past the end of the file ({limit - pos} bytes left)"
        elif magic in fmt.MESSAGE_MAGICS and nxt >= limit and _zero_tail_within(buf, pos, total, limit):
            kind = "torn-record"
            reason = f"partially written record ({reason}): its end is zeros"
        elif magic not in fmt.MESSAGE_MAGICS:
            kind = "bad-magic"
        elif "total size" in reason:
            kind = "bad-size"
        else:
            kind = "bad-length"
        self.p.error(kind, mf.path, pos, f"{reason}; recovery stops here and truncates the CommitLog")
        if nxt < limit:
            self.p.warning(
                "resync",
                mf.path,
                nxt,
                f"valid records resume here after {nxt - pos} unreadable bytes (the broker would not "
                "read them)",
            )
        info.tail = "garbage"
        return nxt

    def _file_tail(self, info: FileInfo, arr: np.ndarray, buf, end: int, limit: int) -> int:
        """What follows the last record: a BLANK reaching the file end, zeros, or the file end.

        Returns where scanning goes on (``limit`` when the file is done).
        """
        mf = info.mapped
        tail, blank_size = classify_tail(buf, end, limit)
        info.data_end = end
        info.tail = tail
        if tail == "blank":
            if blank_size != limit - end:
                self.p.warning(
                    "bad-blank",
                    mf.path,
                    end,
                    f"BLANK record size {blank_size} != the {limit - end} bytes left in the file",
                )
            return limit
        if tail == "end":
            return limit
        if tail == "garbage":
            return self._report_bad(info, buf, end, limit)
        rest = arr[end:]
        if not rest.any():
            return limit
        q = end + int(np.argmax(rest != 0))
        nxt = resync(buf, max(q - _MIN_RECORD, end), limit, mf.from_offset)
        if nxt < limit:
            self.p.error(
                "zero-hole",
                mf.path,
                end,
                f"zeros from here to {nxt}, then valid records: recovery stops at the zeros "
                "and abandons everything after",
            )
            info.tail = "garbage"
            return nxt
        self.p.warning(
            "stale-data",
            mf.path,
            q,
            f"non-zero bytes after the data end ({end}): stale data left by a truncation",
        )
        return limit

    def _check_file_ends(self, infos: list[FileInfo]) -> None:
        """A file that is not the last with data must end in a BLANK (FORMATS.md §1.10)."""
        with_data = [i for i, info in enumerate(infos) if info.records]
        last = with_data[-1] if with_data else -1
        for i, info in enumerate(infos):
            mf = info.mapped
            if i < last and info.tail in ("zeros",):
                self.p.error(
                    "missing-blank",
                    mf.path,
                    info.data_end,
                    "data ends here without a BLANK record although later files hold records: "
                    "recovery would truncate the CommitLog here and delete the later files",
                )
            elif i > last and not info.records and info.tail == "zeros" and info.data_end == 0:
                self.p.warning(
                    "preallocated-file",
                    mf.path,
                    0,
                    "empty file after the last record (pre-allocated; a recovering broker deletes it)",
                )

    def _table(self, infos: list[FileInfo]) -> RecordTable:
        parts = self.parts
        position = parts.column("position")
        total = parts.column("total_size")
        valid_end = (
            int(position[-1] + total[-1])
            if len(position)
            else (self.files[0].from_offset if self.files else 0)
        )
        topics = [""] * len(parts.topic_ids)
        for t, i in parts.topic_ids.items():
            topics[i] = t
        return RecordTable(
            position=position,
            total_size=total,
            queue_id=parts.column("queue_id"),
            queue_offset=parts.column("queue_offset"),
            sys_flag=parts.column("sys_flag"),
            store_timestamp=parts.column("store_timestamp"),
            topic_id=parts.column("topic_id"),
            tags_code=parts.column("tags_code"),
            topics=topics,
            key_record=parts.column("key_record"),
            key_hash=parts.column("key_hash"),
            files=infos,
            valid_end=valid_end,
            bytes=int(total.sum()) if len(total) else 0,
            crc_checked=self.crc_checked,
        )


def _zero_tail_within(buf, pos: int, total: int, limit: int) -> bool:
    """Whether the bytes from somewhere inside the record at ``pos`` to its end are all zero."""
    end = min(pos + max(total, _MIN_RECORD), limit)
    last = bytes(buf[max(end - _BLANK_BYTES, pos) : end])
    return not any(last)
