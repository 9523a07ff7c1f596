"""Which CommitLog layout a store has: RocketMQ's ``commitlog/``, or DLedger CommitLog mode.

DLedger mode (``enableDLegerCommitLog=true``; ``formats.dledger``) keeps the log in
``<storePathRootDir>/dledger-<dLegerSelfId>/`` (``DLedgerConfig.getDefaultPath``), its entries in
``data/`` unless ``storePathDLedgerCommitLog`` names another directory. It is known from the
broker.conf when one is given, else from the one ``dledger-*`` directory of the store.

A store a broker wrote first as a plain broker and then in DLedger mode (``enableDLegerCommitLog``
set on an existing store) keeps its old ``commitlog/`` files too: 4.9.8's ``DLedgerCommitLog``
reads them below ``dividedCommitlogOffset`` and the DLedger entries from there on
(``DLedgerLayout.mixed``; ``rmqcli.store.read.dledger``).
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
    mixed: bool = False  # the store's commitlog/ holds files too: the log below dividedCommitlogOffset

    @property
    def index_dir(self) -> Path:
        return self.home / dfmt.INDEX_DIR

    def refuse_mixed(self, what: str) -> None:
        """``UsageError`` naming ``what`` when the store has an old CommitLog below the DLedger log."""
        if self.mixed:
            raise UsageError(
                f"{self.home.parent}: commitlog/ files below a DLedger log (a store switched to DLedger "
                f"mode): {what} does not take such a store"
            )

    def require(self) -> None:
        """``NotFoundError`` unless the data directory exists."""
        if not self.data_dir.is_dir():
            raise NotFoundError(f"{self.home.parent}: not a RocketMQ store (no {self.data_dir})")


def find_dledger(
    root: Path, conf: Mapping[str, str], commitlog_dirs: list[Path] | None = None
) -> DLedgerLayout | None:
    """The DLedger layout of the store at ``root`` (``None``: RocketMQ's own ``commitlog/``).

    ``conf``: the broker.conf properties (empty without one). ``UsageError`` when the store holds
    several ``dledger-*`` directories and no ``dLegerSelfId`` says which is this broker's. The old
    CommitLog of a store switched to DLedger mode is in ``commitlog_dirs`` (``commitlog/``).
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
    old = commitlog_dirs if commitlog_dirs is not None else [root / "commitlog"]
    return DLedgerLayout(self_id, home, data, has_files(old))


def has_files(dirs: list[Path]) -> bool:
    """Whether the CommitLog directories hold files: in DLedger mode, the log a store switched to
    it wrote before (``DLedgerCommitLog.recover``)."""
    return any(d.is_dir() and any(is_offset_name(p.name) for p in d.iterdir()) for d in dirs)
