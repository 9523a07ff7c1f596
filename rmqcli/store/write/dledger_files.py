"""The text files of a DLedger log, written as DLedger 0.3.1.2 writes them.

``DLedgerMmapFileStore.persistCheckPoint`` stores ``endIndex`` and ``committedIndex`` with
``IOUtils.properties2String`` (``key=value`` lines, ``committedIndex`` first as the broker's files
show) and ``IOUtils.string2File``, which keeps the previous content in ``checkpoint.bak``.
"""

from __future__ import annotations

from formats import dledger as dfmt


def checkpoint_text(old: bytes | None, committed: int, end: int) -> bytes:
    """``old`` with ``committedIndex`` and ``endIndex`` set (their lines kept in place, others as they
    are); without ``old``, the two lines in the broker's order."""
    values = {dfmt.COMMITTED_INDEX_KEY: committed, dfmt.END_INDEX_KEY: end}
    lines = old.decode("latin-1").splitlines() if old else []
    out = []
    for line in lines:
        key = line.split("=", 1)[0].strip()
        if key in values:
            out.append(f"{key}={values.pop(key)}")
        else:
            out.append(line)
    out += [f"{k}={v}" for k, v in values.items()]
    return "".join(line + "\n" for line in out).encode("latin-1")


def read_index_values(text: bytes) -> dict[str, int]:
    """The numeric values of a checkpoint text (keys whose value is not a number are left out)."""
    out = {}
    for line in text.decode("latin-1").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            try:
                out[key.strip()] = int(value.strip())
            except ValueError:
                pass
    return out
