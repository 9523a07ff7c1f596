"""EndTransaction (the 5.1 proxy's ``EndTransactionActivity`` + ``TransactionProcessor``): the
half message a gRPC producer stored is committed or rolled back by the broker's own END_TRANSACTION
processor (``rmqcli.broker.processor.transaction``), in-process.

The producer group is the topic (gRPC producers have none of their own); the half message's commit
log and queue offsets come from what SendMessage kept for the transaction id (taken once). A blank
transaction id is INVALID_TRANSACTION_ID; an unknown one INTERNAL_SERVER_ERROR "cannot found
transaction data" (the proxy's TRANSACTION_DATA_NOT_FOUND); a resolution other than COMMIT or
ROLLBACK is UNKNOWN, which the broker ignores. The broker's answer is not waited on (the proxy sends
END_TRANSACTION oneway): a resolved transaction is OK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from rmqcli.broker.grpc import convert
from rmqcli.broker.grpc import status as st
from rmqcli.broker.grpc.context import CallContext
from rmqcli.broker.grpc.producer import CallChannel, Producer
from rmqcli.broker.processor import transaction
from rmqcli.remoting import headers as hd
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC

if TYPE_CHECKING:
    from rmqcli.remoting.server.connection import Connection

COMMIT, ROLLBACK = 1, 2  # TransactionResolution
SOURCE_SERVER_CHECK = 2  # TransactionSource
UNKNOWN = 0  # MessageSysFlag.TRANSACTION_NOT_TYPE: END_TRANSACTION leaves it unanswered


def end_transaction(stubs: Any, producer: Producer, ctx: CallContext, request: Any) -> Any:
    d = stubs.definition
    topic = request.topic.name
    convert.check_topic(topic)
    if not request.transaction_id.strip():
        raise st.GrpcStatusError(st.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
    resolution = {COMMIT: transaction.COMMIT, ROLLBACK: transaction.ROLLBACK}.get(request.resolution, UNKNOWN)
    data = producer.transactions.pop((topic, request.transaction_id), None)
    if data is None:
        raise st.GrpcStatusError(st.INTERNAL_SERVER_ERROR, "cannot found transaction data")
    header = hd.EndTransactionRequestHeader(
        producer_group=topic,
        tran_state_table_offset=data.queue_offset,
        commit_log_offset=data.commit_log_offset,
        commit_or_rollback=resolution,
        from_transaction_check=request.source == SOURCE_SERVER_CHECK,
        msg_id=request.message_id,
        transaction_id=request.transaction_id,
        topic=topic,
    )
    command = RemotingCommand.request(RC.END_TRANSACTION, header, oneway=True)
    transaction.end_transaction(producer.ctl, command, cast("Connection", CallChannel(ctx)))
    return stubs.service.EndTransactionResponse(status=st.make(d, st.OK))
