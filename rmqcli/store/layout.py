"""Which CommitLog layout a store has: RocketMQ's ``commitlog/``, or DLedger CommitLog mode.

DLedger mode (``enableDLegerCommitLog=true``; ``formats.dledger``) keeps the log in
``<storePathRootDir>/dledger-<dLegerSelfId>/`` (``DLedgerConfig.getDefaultPath``), its entries in
``data/`` unless ``storePathDLedgerCommitLog`` names another directory. It is known from the
broker.conf when one is given, else from the one ``dledger-*`` directory of the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from formats import dledger as dfmt
from formats.javatext import parse_boolean
from rmqcli.errors import NotFoundError, UsageError
from rmqcli.store.naming import is_offset_name

ENABLE_KEY = "enableDLegerCommitLog"
SELF_ID_KEY = "dLegerSelfId"
ROOT_KEY = "storePathRootDir"
DATA_PATH_KEY = "storePathDLedgerCommitLog"


@dataclass(frozen=True)
class DLedgerLayout:
    """Where a DLedger-mode store keeps its log."""

    self_id: str
    home: Path  # dledger-<selfId>/
    data_dir: Path

    @property
    def index_dir(self) -> Path:
        return self.home / dfmt.INDEX_DIR

    def require(self) -> None:
        """``NotFoundError`` unless the data directory exists."""
        if not self.data_dir.is_dir():
            raise NotFoundError(f"{self.home.parent}: not a RocketMQ store (no {self.data_dir})")


def find_dledger(root: Path, conf: Mapping[str, str]) -> DLedgerLayout | None:
    """The DLedger layout of the store at ``root`` (``None``: RocketMQ's own ``commitlog/``).

    ``conf``: the broker.conf properties (empty without one). ``UsageError`` when the store holds
    several ``dledger-*`` directories and no ``dLegerSelfId`` says which is this broker's, or both
    a CommitLog with files and a DLedger log (a store switched to DLedger mode, not read yet).
    """
    if ENABLE_KEY in conf:
        if not parse_boolean(conf[ENABLE_KEY]):
            return None
        self_id = conf.get(SELF_ID_KEY, "").strip()
        if not self_id:
            raise UsageError(f"broker.conf: {ENABLE_KEY}=true needs {SELF_ID_KEY} (n0, n1, ...)")
        home = root / (dfmt.DIR_PREFIX + self_id)
        if not home.is_dir() and conf.get(ROOT_KEY):
            home = Path(conf[ROOT_KEY]) / (dfmt.DIR_PREFIX + self_id)
    else:
        homes = sorted(p for p in root.glob(dfmt.DIR_PREFIX + "*") if p.is_dir() and dfmt.self_id_of(p.name))
        if not homes:
            return None
        if len(homes) > 1:
            names = ", ".join(p.name for p in homes)
            raise UsageError(
                f"{root}: several DLedger logs ({names}): --config broker.conf with {SELF_ID_KEY} says which"
            )
        home = homes[0]
        self_id = dfmt.self_id_of(home.name) or ""
    data = Path(conf[DATA_PATH_KEY]) if conf.get(DATA_PATH_KEY) else home / dfmt.DATA_DIR
    _refuse_mixed(root)
    return DLedgerLayout(self_id, home, data)


def _refuse_mixed(root: Path) -> None:
    """A store with CommitLog files too was switched to DLedger mode (``DLedgerCommitLog`` reads
    the old files below ``dividedCommitlogOffset``): not read yet."""
    old = root / "commitlog"
    if old.is_dir() and any(is_offset_name(p.name) for p in old.iterdir()):
        raise UsageError(
            f"{root}: commitlog/ files and a DLedger log (a store switched to DLedger mode): not read yet"
        )
