"""Master-slave replication (HA) frames of Apache RocketMQ 4.9.x.

Specified by ``store/ha/HAService.java`` (``HAClient``) and ``store/ha/HAConnection.java``
(``ReadSocketService``, ``WriteSocketService``). The HA port speaks no remoting frames: two raw,
big-endian streams over one TCP connection.

* slave -> master: one 8-byte word per report, the slave's max physical CommitLog offset
  (``HAClient.reportSlaveMaxOffset``). The first report is the offset the slave asks the master
  to push from; every later one acknowledges what it has appended.
* master -> slave: a 12-byte header (start offset, body size) followed by ``body size`` bytes of
  the master's CommitLog from ``start offset`` (``WriteSocketService``). A body never crosses
  a CommitLog file (``CommitLog.getData`` selects from one mapped file), and holds at most
  ``haTransferBatchSize`` bytes. A header with size 0 is the heartbeat.
"""

from __future__ import annotations

import construct as cs
from construct import this

from formats.derive import compile_struct

# --- slave -> master --------------------------------------------------------------------------
SlaveReport = cs.Struct(
    "max_offset" / cs.Int64sb,  # HAClient.reportOffset: getMaxPhyOffset() of the slave
)
SLAVE_REPORT_STRUCT = compile_struct(SlaveReport)
SLAVE_REPORT_SIZE = SLAVE_REPORT_STRUCT.size  # 8

# --- master -> slave --------------------------------------------------------------------------
TransferHeader = cs.Struct(
    "start_offset" / cs.Int64sb,  # physical CommitLog offset of the body's first byte
    "body_size" / cs.Int32sb,  # 0: a heartbeat
)
TRANSFER_HEADER_STRUCT = compile_struct(TransferHeader)
TRANSFER_HEADER_SIZE = TRANSFER_HEADER_STRUCT.size  # 12 (WriteSocketService.headerSize = 8 + 4)

Transfer = cs.Struct(
    "start_offset" / cs.Int64sb,
    "body_size" / cs.Rebuild(cs.Int32sb, cs.len_(this.body)),
    "body" / cs.Bytes(this.body_size),
)
"""A whole push; build from ``dict(start_offset=..., body=...)`` (``body=b""`` is a heartbeat)."""

# --- limits of the 4.9.8 peers -----------------------------------------------------------------
MASTER_READ_BUFFER_SIZE = 1024 * 1024
"""``HAConnection.ReadSocketService.READ_MAX_BUFFER_SIZE``: where the master gathers reports."""
SLAVE_READ_BUFFER_SIZE = 4 * 1024 * 1024
"""``HAService.HAClient.READ_MAX_BUFFER_SIZE``: a 4.9.8 slave holds a whole push in this buffer, so
no master can push more than this minus the header in one frame."""
MAX_BODY_SIZE = SLAVE_READ_BUFFER_SIZE - TRANSFER_HEADER_SIZE
"""The largest body a 4.9.8 slave can ever take; a header announcing more is not an HA push."""
