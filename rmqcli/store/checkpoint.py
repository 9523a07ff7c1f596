"""Read and write the 4 KiB ``checkpoint`` file (formats.md §4, ``StoreCheckpoint.java``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from formats import checkpoint as ckpt_fmt
from rmqcli.errors import CorruptDataError, NotFoundError


@dataclass
class Checkpoint:
    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    master_flushed_offset: int = 0
    confirm_phy_offset: int = 0

    @property
    def min_timestamp(self) -> int:
        return ckpt_fmt.min_timestamp(self.physic_msg_timestamp, self.logics_msg_timestamp)

    @property
    def min_timestamp_index(self) -> int:
        return ckpt_fmt.min_timestamp_index(
            self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp
        )

    def to_bytes(self) -> bytes:
        return ckpt_fmt.CheckpointPage.build(asdict(self))

    @classmethod
    def from_bytes(cls, data: bytes, path: str = "checkpoint") -> Checkpoint:
        if len(data) < ckpt_fmt.FIELDS_STRUCT.size:
            raise CorruptDataError(f"checkpoint is {len(data)} bytes, expected {ckpt_fmt.PAGE_SIZE}", path, 0)
        return cls(*ckpt_fmt.FIELDS_STRUCT.unpack_from(data, 0))


def read_checkpoint(path: Path) -> Checkpoint:
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise NotFoundError(f"{path}: no checkpoint file") from exc
    return Checkpoint.from_bytes(data, str(path))
