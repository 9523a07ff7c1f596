"""The AutoSwitchHA frames of RocketMQ 5.1.1's controller mode (docs/controller.md §6).

Specified by ``store/ha/autoswitch/AutoSwitchHAClient.java`` (``sendHandshakeHeader``,
``reportSlaveOffset``) and ``AutoSwitchHAConnection.java`` (``buildHandshakeBuffer``,
``buildTransferHeaderBuffer``). Raw TCP on ``haListenPort``, big-endian, no remoting frames. Every
header starts with the sender's ``HAConnectionState`` ordinal.
"""

from __future__ import annotations

import construct as cs

from formats.derive import compile_struct

# HAConnectionState ordinals (§6.1)
READY, HANDSHAKE, TRANSFER, SUSPEND, SHUTDOWN = 0, 1, 2, 3, 4

# Every header's first field: the receiver reads it alone to learn which header follows (§6.2).
STATE_STRUCT = compile_struct(cs.Struct("state" / cs.Int32sb))
STATE_SIZE = STATE_STRUCT.size  # 4

# --- slave -> master --------------------------------------------------------------------------
SlaveHandshake = cs.Struct(
    "state" / cs.Int32sb,  # HANDSHAKE
    "sync_from_last_file" / cs.Int16sb,  # 1 or 0
    "async_learner" / cs.Int16sb,  # 1 or 0
    "broker_id" / cs.Int64sb,  # the slave's controller broker id
)
SLAVE_HANDSHAKE_STRUCT = compile_struct(SlaveHandshake)
SLAVE_HANDSHAKE_SIZE = SLAVE_HANDSHAKE_STRUCT.size  # 16
SLAVE_HANDSHAKE_REST = SLAVE_HANDSHAKE_SIZE - STATE_SIZE  # what follows the state word

SlaveReport = cs.Struct(
    "state" / cs.Int32sb,  # TRANSFER
    "max_offset" / cs.Int64sb,  # the slave's max offset (first: where to start; then: its ack)
)
SLAVE_REPORT_STRUCT = compile_struct(SlaveReport)
SLAVE_REPORT_SIZE = SLAVE_REPORT_STRUCT.size  # 12
SLAVE_REPORT_REST = SLAVE_REPORT_SIZE - STATE_SIZE

# --- master -> slave --------------------------------------------------------------------------
HandshakeAnswer = cs.Struct(
    "state" / cs.Int32sb,  # HANDSHAKE
    "body_size" / cs.Int32sb,  # 12 x the epoch entries that follow
    "max_offset" / cs.Int64sb,  # the master's CommitLog max offset (the last epoch's end)
    "last_epoch" / cs.Int32sb,  # -1 without entries
)
HANDSHAKE_ANSWER_STRUCT = compile_struct(HandshakeAnswer)
HANDSHAKE_ANSWER_SIZE = HANDSHAKE_ANSWER_STRUCT.size  # 20

EpochEntryWire = cs.Struct(
    "epoch" / cs.Int32sb,
    "start_offset" / cs.Int64sb,
)
EPOCH_ENTRY_STRUCT = compile_struct(EpochEntryWire)
EPOCH_ENTRY_SIZE = EPOCH_ENTRY_STRUCT.size  # 12
MAX_EPOCH_ENTRIES = 1000  # AutoSwitchHAConnection's handshake buffer: 12,000 bytes of entries

TransferHeader = cs.Struct(
    "state" / cs.Int32sb,  # TRANSFER
    "body_size" / cs.Int32sb,  # 0: a heartbeat
    "offset" / cs.Int64sb,  # the body's first byte (a heartbeat: the next offset to send, -1 before)
    "epoch" / cs.Int32sb,  # the epoch the master is sending (§6.5: the last chunk of N says N+1)
    "epoch_start" / cs.Int64sb,  # that epoch's start offset
    "confirm_offset" / cs.Int64sb,  # the master's confirm offset (§5.7)
)
TRANSFER_HEADER_STRUCT = compile_struct(TransferHeader)
TRANSFER_HEADER_SIZE = TRANSFER_HEADER_STRUCT.size  # 36

# --- limits -------------------------------------------------------------------------------------
MAX_BODY_SIZE = 4 * 1024 * 1024 - TRANSFER_HEADER_SIZE
"""AutoSwitchHAClient reads into a 4 MiB buffer (``READ_MAX_BUFFER_SIZE``): no larger body is a push."""
