"""What ``rmq dashboard`` was started with, shared by its endpoints."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rmqcli.remoting.acl import Credentials


@dataclass(frozen=True)
class DashboardSettings:
    namesrv: list[str]  # empty: no cluster pages (stores only)
    stores: list[Path] = field(default_factory=list)  # the only directories the store pages open
    allow_writes: bool = False
    credentials: Credentials | None = None
    timeout: float = 3.0  # seconds per admin request
    lag_interval: float = 5.0  # seconds between two samples of a watched group's lag
