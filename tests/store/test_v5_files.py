"""RocketMQ 5's controller-mode files without a broker: ``epochFileCheckpoint`` as 5.1.1's
``CheckpointFile`` writes and reads it, ``brokerIdentity``, and what ``rmq`` makes of a 4.9.8
store (its checkpoint has no confirmPhyOffset: it reads exactly as before)."""

from __future__ import annotations

import json

import pytest

from formats import epoch as efmt
from rmqcli.store import Store
from rmqcli.store.epochs import read_epochs
from tests.support.cli import run_rmq
from tests.support.realfixtures import REAL_ROOT

# CheckpointFile's own javadoc example (5.1.1 common/utils/CheckpointFile.java)
JAVADOC = "2\n773307083\n7-7000\n8-8000\n"


def test_epoch_file_as_the_javadoc_shows_it():
    entries = [efmt.EpochEntry(7, 7000), efmt.EpochEntry(8, 8000)]
    assert efmt.build_epoch_file(entries) == JAVADOC
    parsed = efmt.parse_epoch_file(JAVADOC)
    assert parsed.entries == entries and parsed.crc_ok and parsed.count_ok


@pytest.mark.parametrize(
    ("text", "crc_ok", "count_ok"),
    [
        ("2\n773307084\n7-7000\n8-8000\n", False, True),  # CRC off by one
        ("2\n0\n7-7000\n8-8000\n", True, True),  # 0: NOT_CHECK_CRC_MAGIC_CODE
        ("3\n773307083\n7-7000\n8-8000\n", True, False),
        (
            "1\n" + str(efmt.java_crc32(b"7-7000\nnoise\n")) + "\n7-7000\nnoise\n",
            True,
            True,
        ),  # no entry, in the CRC
    ],
)
def test_epoch_file_checks(text, crc_ok, count_ok):
    parsed = efmt.parse_epoch_file(text)
    assert (parsed.crc_ok, parsed.count_ok) == (crc_ok, count_ok)


@pytest.mark.parametrize("text", ["", "2\n", "x\n1\n", "1\n1\n7-x\n"])
def test_epoch_file_syntax_errors(text):
    with pytest.raises(efmt.EpochSyntaxError):
        efmt.parse_epoch_file(text)


def test_identity():
    ident = efmt.parse_identity("DefaultCluster#broker-a#2")
    assert (ident.cluster, ident.broker_name, ident.broker_id) == ("DefaultCluster", "broker-a", 2)
    with pytest.raises(ValueError):
        efmt.parse_identity("DefaultCluster#broker-a")


def test_bak_stands_in_for_a_damaged_file(tmp_path):
    (tmp_path / efmt.EPOCH_FILE).write_text("2\n1\n7-7000\n8-8000\n")
    (tmp_path / (efmt.EPOCH_FILE + ".bak")).write_text(efmt.build_epoch_file([efmt.EpochEntry(7, 7000)]))
    epochs = read_epochs(tmp_path)
    assert epochs.main.problem and "CRC" in epochs.main.problem
    assert epochs.source == tmp_path / (efmt.EPOCH_FILE + ".bak") and epochs.entries == [
        efmt.EpochEntry(7, 7000)
    ]


@pytest.mark.real
def test_a_4x_store_has_no_confirm_bound():
    """4.9.8 wrote 24 bytes of checkpoint (confirmPhyOffset reads 0) and no controller files: every
    record counts, as before."""
    store = Store.open(REAL_ROOT / "basic-1" / "store")
    try:
        assert not store.controller_mode and store.confirm_bound() is None
        assert store.checkpoint().confirm_phy_offset == 0
    finally:
        store.close()
    out = json.loads(run_rmq("stats", str(REAL_ROOT / "basic-1" / "store"), "--json").stdout)
    assert "confirm" not in out and "unconfirmed" not in out
