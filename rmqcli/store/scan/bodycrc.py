"""Body CRCs of a batch of records, checked against their stored BODYCRC (formats.md §1.6).

``CommitLog.checkMessageAndReturnSize`` with ``checkCRCOnRecover``: ``UtilAll.crc32`` of the body,
masked to 31 bits, against the record's BODYCRC; records with an empty body are not checked.
Used by the bulk recovery (which stops at the first mismatch) and by ``rmq verify`` (which
reports every one).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from isal.isal_zlib import crc32

from rmqcli.store.scan.headerscan import HeaderBatch

CRC_MASK = 0x7FFFFFFF  # UtilAll.crc32: & 0x7FFFFFFF


class BodyCrcs(NamedTuple):
    """The checked records of a batch and what their bodies hash to."""

    rows: np.ndarray  # indexes (in the batch) of the records with a body
    computed: np.ndarray  # their bodies' CRCs, masked as stored
    stored: np.ndarray  # their BODYCRC fields
    bad: np.ndarray  # positions in ``rows`` where the two differ

    def first_bad(self, default: int) -> int:
        """The batch index of the first record whose CRC differs; ``default`` when none does."""
        return int(self.rows[self.bad[0]]) if len(self.bad) else default


def check_body_crcs(buf, batch: HeaderBatch, count: int | None = None) -> BodyCrcs:  # type: ignore[no-untyped-def]
    """The CRCs of the non-empty bodies among the first ``count`` records (all: ``None``) of
    ``batch``, read from ``buf`` (the file the batch was scanned from)."""
    assert batch.body_length is not None and batch.body_start is not None and batch.body_crc is not None
    n = len(batch) if count is None else count
    rows = np.flatnonzero(batch.body_length[:n] > 0)
    start = batch.body_start[rows]
    stop = start + batch.body_length[rows]
    view = memoryview(buf)
    try:  # map() keeps the loop in C: slice objects, memoryview slices, crc32 calls
        computed = np.fromiter(
            map(crc32, map(view.__getitem__, map(slice, start.tolist(), stop.tolist()))),
            dtype=np.int64,
            count=len(rows),
        )
    finally:
        view.release()
    computed &= CRC_MASK
    stored = batch.body_crc[rows]
    return BodyCrcs(rows, computed, stored, np.flatnonzero(computed != stored))
