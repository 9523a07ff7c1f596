"""A controller-mode broker's identity files (5.1.1 ``BrokerMetadata``, ``TempBrokerMetadata``;
docs/controller.md §5.3, §7.2): ``brokerIdentity`` = ``cluster#brokerName#brokerId``, and
``brokerIdentity-temp`` with ``#registerCheckCode`` while the id is being applied for.

5.1.1 deletes the old file and writes the new one in place; rmq writes beside and renames (no
``.bak``, as 5.1.1 leaves none after its delete)."""

from __future__ import annotations

from pathlib import Path

from formats import epoch as efmt
from rmqcli.durable import replace_file
from rmqcli.store.epochs import read_identity

SEP = efmt.IDENTITY_SEPARATOR


def identity_text(identity: efmt.BrokerIdentity) -> str:
    """``encodeToStr``."""
    parts = [identity.cluster, identity.broker_name, str(identity.broker_id)]
    if identity.register_check_code is not None:
        parts.append(identity.register_check_code)
    return SEP.join(parts)


def temp_path(path: Path) -> Path:
    """``storePathBrokerIdentity + "-temp"``."""
    return path.with_name(path.name + "-temp")


def read(path: Path) -> efmt.BrokerIdentity | None:
    """The file's identity; None when absent or incomplete (5.1.1's ``isLoaded`` false)."""
    found = read_identity(path)
    if found is None or not found.cluster or not found.broker_name:
        return None
    return found


def write(path: Path, identity: efmt.BrokerIdentity) -> None:
    replace_file(path, identity_text(identity).encode())


def remove(path: Path) -> None:
    path.unlink(missing_ok=True)
