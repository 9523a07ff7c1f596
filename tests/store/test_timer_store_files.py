"""The timer files as ``rmqcli.store.timer_write`` writes them and ``rmqcli.store.timer`` reads them
back (5.1.1's layouts, ``formats.timer``): units chained per slot, a blank where a unit does not fit
(``TimerLog.append``), the checkpoint's fields, fastjson metrics, and recovery stopping at a bad unit.
The real broker's own files are read in test_timer_store_real.py."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from formats import timer as tfmt
from rmqcli.errors import CorruptDataError
from rmqcli.store.timer import TimerLog, TimerWheel, read_timer_checkpoint, read_timer_metrics
from rmqcli.store.timer_write import TimerFileWriter

PREC = 1000
NOW = 1_795_000_000_000
FILE = 3 * tfmt.UNIT_SIZE + tfmt.MIN_BLANK_LEN + 10  # three units, then a blank


def test_golden_constants() -> None:
    assert (tfmt.UNIT_SIZE, tfmt.SLOT_SIZE, tfmt.MIN_BLANK_LEN) == (52, 32, 16)
    assert tfmt.WHEEL_LENGTH == 2 * 7 * 86400 * 32 == 38_707_200  # the real broker's timerwheel size
    assert tfmt.BLANK_MAGIC_CODE == struct.unpack(">i", struct.pack(">I", 0xBBCCDDEE ^ (1880681586 + 8)))[0]
    assert tfmt.last_unit_offset(100 * 1024 * 1024) == 104857532  # TimerLog.getOffsetForLastUnit
    assert tfmt.magic_ok(tfmt.MAGIC_DEFAULT | tfmt.MAGIC_DELETE) and not tfmt.magic_ok(0x10)


def write(root: Path) -> list[int]:
    (root / tfmt.TIMERLOG_DIR).mkdir(parents=True)
    (root / tfmt.TIMERLOG_DIR / f"{0:020d}").write_bytes(b"\0" * FILE)  # the file size the writer takes
    w = TimerFileWriter(root, PREC)
    positions = [
        w.enqueue(NOW + 5000, NOW, 100, 200, "A", False)[0],
        w.enqueue(NOW + 6000, NOW, 300, 200, "B", False)[0],
        w.enqueue(NOW + 5000, NOW, 500, 200, "A", False)[0],
        w.enqueue(NOW + 5000, NOW, 700, 200, "A", True)[0],  # a marker: the next file
    ]
    w.flush(NOW, 4, {"A": 1, "B": 1})
    w.close()
    return positions


def test_written_files_read_back(tmp_path: Path) -> None:
    positions = write(tmp_path)
    assert positions == [0, 52, 104, FILE]  # the fourth after a blank
    log = TimerLog(tmp_path / tfmt.TIMERLOG_DIR)
    scan = log.scan(0)
    log.close()
    assert scan.bad is None and scan.end == FILE + tfmt.UNIT_SIZE
    units = {u.pos: u for u in scan.units}
    assert [units[p].offset_py for p in positions] == [100, 300, 500, 700]
    assert units[104].prev_pos == 0 and units[0].prev_pos == -1 and units[FILE].prev_pos == 104
    assert units[FILE].magic == tfmt.MAGIC_DEFAULT | tfmt.MAGIC_DELETE
    assert units[0].topic_hash == 65  # "A".hashCode()
    blank = (tmp_path / tfmt.TIMERLOG_DIR / f"{0:020d}").read_bytes()[156:172]
    assert tfmt.BLANK_STRUCT.unpack(blank) == (FILE - 156, 0, tfmt.BLANK_MAGIC_CODE)
    wheel = TimerWheel(tmp_path / tfmt.WHEEL_FILE, PREC)
    live = {slot_ms: (first, last, num) for _i, slot_ms, first, last, num in wheel.live(NOW)}
    wheel.close()
    assert live == {NOW + 5000: (0, FILE, 1), NOW + 6000: (52, 52, 1)}  # 3 timers less a marker
    ckpt = read_timer_checkpoint(tmp_path / tfmt.CHECKPOINT_FILE)
    assert ckpt is not None and (tmp_path / tfmt.CHECKPOINT_FILE).stat().st_size == 4096
    assert (ckpt.last_read_time_ms, ckpt.last_timer_log_flush_pos) == (NOW, FILE + 52)
    assert (ckpt.last_timer_queue_offset, ckpt.master_timer_queue_offset) == (4, 4)
    assert read_timer_metrics(tmp_path / tfmt.METRICS_FILE) == {"A": 1, "B": 1}
    document = json.loads((tmp_path / tfmt.METRICS_FILE).read_text())
    assert list(document) == ["dataVersion", "timingCount"]


def test_recovery_stops_at_a_bad_unit_and_goes_on_after_the_last_good_one(tmp_path: Path) -> None:
    write(tmp_path)
    path = tmp_path / tfmt.TIMERLOG_DIR / f"{0:020d}"
    data = bytearray(path.read_bytes())
    data[52 + 12 : 52 + 16] = struct.pack(">i", 0x40)  # the second unit's magic
    path.write_bytes(bytes(data))
    log = TimerLog(tmp_path / tfmt.TIMERLOG_DIR)
    scan = log.scan(0)
    log.close()
    assert scan.end == 52 and scan.bad == (52, "size 52, magic 0x40")
    # the checkpoint names the second file: recovery reads from the first (one file back)
    w = TimerFileWriter(tmp_path, PREC)
    assert w.end == 52
    assert w.enqueue(NOW + 7000, NOW, 900, 200, "A", False)[0] == 52
    w.close()


def test_wheel_of_the_wrong_length(tmp_path: Path) -> None:
    (tmp_path / tfmt.WHEEL_FILE).write_bytes(b"\0" * 64)
    with pytest.raises(CorruptDataError, match="timer wheel length 64 != expected 38707200"):
        TimerWheel(tmp_path / tfmt.WHEEL_FILE, PREC)


def test_the_timer_precision_is_the_broker_confs(pristine: Path, tmp_path: Path) -> None:
    """verify and dump-timer read the files by ``timerPrecisionMs`` of ``--config`` (the wheel's slot)."""
    from rmqcli.store import Store

    conf = tmp_path / "broker.conf"
    conf.write_text("timerPrecisionMs=500\n")
    assert Store.open(pristine, conf).timer_precision_ms == 500
    assert Store.open(pristine).timer_precision_ms == 1000  # 5.1.1's default without a broker.conf
