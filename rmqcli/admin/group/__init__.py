"""Subscription group, connection, offset and stats commands of mqadmin: updateSubGroup,
deleteSubGroup, getConsumerConfig, consumerProgress, consumerConnection, producerConnection,
consumerStatus, producer, resetOffsetByTime, skipAccumulatedMessage, cloneGroupOffset, statsAll,
brokerConsumeStats (protocol.md C.2, C.4.5, C.4.7, C.5; requests B.3, B.4; bodies B.9).

One module a job, all of them importable from here: ``subscription`` (the groups' configs),
``clients`` (connections and running info of a group's clients), ``producers`` (every producer
a broker knows), ``progress`` (consume stats and progress), ``offsets`` (resetting and cloning
offsets), ``stats`` (statsAll, brokerConsumeStats).
"""

from rmqcli.admin.group.clients import *  # noqa: F403
from rmqcli.admin.group.offsets import *  # noqa: F403
from rmqcli.admin.group.producers import *  # noqa: F403
from rmqcli.admin.group.progress import *  # noqa: F403
from rmqcli.admin.group.stats import *  # noqa: F403
from rmqcli.admin.group.subscription import *  # noqa: F403
