"""The resources of a request that names a stored message by its CommitLog offset (issue 41): its
permission follows the message, not the request code. 4.9.8's ``parse`` checks none of these.

* VIEW_MESSAGE_BY_ID (33, ``offset``): SUB on the message's topic (a retry or DLQ message's group).
* CONSUMER_SEND_MSG_BACK (36, ``offset``): the message it copies must be readable: SUB on its topic.
* END_TRANSACTION (37, ``commitLogOffset``): a commit or rollback writes into the half message's real
  topic (``REAL_TOPIC``): PUB on it. (The producer group must also be the half's, as 4.9.8's
  ``EndTransactionProcessor.checkPrepareMessage`` checks; ``rmqcli.broker.processor.transaction``.)

A message in a POP retry topic ``%RETRY%G_T`` also needs SUB on G and the permission on T
(``ownership.pop_retry_resources``). A message in a system topic that holds other topics'
messages stays an admin's (``ownership.admin_topic``). An offset where no message starts needs
nothing here: the handler answers its own error.
"""

from __future__ import annotations

from collections.abc import Callable

from formats.commitlog import PROPERTY_REAL_TOPIC
from formats.records import Record
from rmqcli.broker.acl.ownership import Names, owning_group, pop_retry_resources
from rmqcli.broker.acl.permissions import PUB, SUB
from rmqcli.remoting.codec import RemotingCommand
from rmqcli.remoting.codes import RequestCode as RC

Lookup = Callable[[int], Record | None]
"""``MessageStore.look_message``: the record at a CommitLog offset, None where none starts."""

OFFSET_FIELDS = {
    RC.VIEW_MESSAGE_BY_ID: ("offset", SUB),
    RC.CONSUMER_SEND_MSG_BACK: ("offset", SUB),
    RC.END_TRANSACTION: ("commitLogOffset", PUB),
}


def message_resources(request: RemotingCommand, look: Lookup, names: Names | None = None) -> dict[str, int]:
    """The topic (and group) of the message ``request`` names, with the permission it needs;
    ``names``: the broker's groups, to read a POP retry topic by (None: every reading)."""
    wanted = OFFSET_FIELDS.get(request.code)
    if wanted is None:
        return {}
    field, perm = wanted
    try:
        offset = int(request.ext_fields.get(field, ""))
    except ValueError:
        return {}
    record = look(offset) if offset >= 0 else None
    if record is None:
        return {}
    topic = record.topic
    if request.code == RC.END_TRANSACTION:
        topic = record.properties.get(PROPERTY_REAL_TOPIC) or topic
    needed = {topic: perm}
    group = owning_group(topic)
    if group is not None:
        needed.setdefault(group, SUB)
    for resource, wanted_perm in pop_retry_resources(topic, perm, names).items():
        needed.setdefault(resource, wanted_perm)
    return needed
