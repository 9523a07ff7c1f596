"""Options and helpers shared by the mqadmin commands (PROTOCOL.md C.1, C.2).

Light at import time: typer and the standard library only; the admin operations, the codec and
the JSON beans are imported inside the command bodies.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer import _click as click
from typer.core import TyperOption

if TYPE_CHECKING:
    from rmqcli.admin.session import AdminSession

NAMESRV_HELP = "Name server address list, eg: '192.168.0.1:9876;192.168.0.2:9876'"

NamesrvOpt = Annotated[str | None, typer.Option("--namesrvAddr", "-n", help=NAMESRV_HELP)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON instead of mqadmin's text.")]
TopicOpt = Annotated[str, typer.Option("--topic", "-t", help="topic name")]
BrokerAddrOpt = Annotated[str | None, typer.Option("--brokerAddr", "-b", help="broker address (host:port)")]
ClusterNameOpt = Annotated[str | None, typer.Option("--clusterName", "-c", help="cluster name")]
ClusterOpt = Annotated[str | None, typer.Option("--cluster", "-c", help="cluster name")]

# Command descriptions: mqadmin's ``commandDesc()`` strings, in its registration order (C.2).
DESCRIPTIONS: dict[str, str] = {
    "updateTopic": "Update or create topic",
    "deleteTopic": "Delete topic from broker and NameServer.",
    "updateBrokerConfig": "Update broker's config",
    "updateTopicPerm": "Update topic perm",
    "topicRoute": "Examine topic route info",
    "topicStatus": "Examine topic Status info",
    "topicClusterList": "get cluster info for topic",
    "brokerStatus": "Fetch broker runtime status data",
    "clusterList": "List all of clusters",
    "topicList": "Fetch all topic list from name server",
    "updateKvConfig": "Create or update KV config.",
    "deleteKvConfig": "Delete KV config.",
    "wipeWritePerm": "Wipe write perm of broker in all name server you defined in the -n param",
    "addWritePerm": "Add write perm of broker in all name server you defined in the -n param",
    "updateOrderConf": "Create or update or delete order conf",
    "cleanExpiredCQ": "Clean expired ConsumeQueue on broker.",
    "deleteExpiredCommitLog": "Delete expired CommitLog files",
    "cleanUnusedTopic": "Clean unused topic on broker.",
    "allocateMQ": "Allocate MQ",
    "getNamesrvConfig": "Get configs of name server.",
    "updateNamesrvConfig": "Update configs of name server.",
    "getBrokerConfig": "Get broker config by cluster or special broker!",
    "updateSubGroup": "Update or create subscription group",
    "deleteSubGroup": "Delete subscription group from broker.",
    "brokerConsumeStats": "Fetch broker consume stats data",
    "producerConnection": "Query producer's socket connection and client version",
    "consumerConnection": "Query consumer's socket connection, client version and subscription",
    "consumerProgress": "Query consumers's progress, speed",
    "consumerStatus": "Query consumer's internal data structure",
    "cloneGroupOffset": "clone offset from other group.",
    "resetOffsetByTime": "Reset consumer offset by timestamp(without client restart).",
    "skipAccumulatedMessage": "Skip all messages that are accumulated (not consumed) currently",
    "statsAll": "Topic and Consumer tps stats",
    "getConsumerConfig": "Get consumer config by subscription group name!",
    "queryMsgById": "Query Message by Id",
    "queryMsgByKey": "Query Message by Key",
    "queryMsgByUniqueKey": "Query Message by Unique key",
    "queryMsgByOffset": "Query Message by offset",
    "printMsg": "Print Message Detail",
    "printMsgByQueue": "Print Message Detail",
    "sendMsgStatus": "send msg to broker.",
    "checkMsgSendRT": "check message send response time",
    "queryCq": "Query cq command.",
    "sendMessage": "Send a message",
    "consumeMessage": "Consume message",
    "updateAclConfig": "Update acl config yaml file in broker",
    "deleteAclConfig": "Delete Acl Config Account in broker",
    "clusterAclConfigVersion": "List all of acl config version information in cluster",
    "updateGlobalWhiteAddr": "Update global white address for acl Config File in broker",
}

# mqadmin's full registration order (C.2), so the listing keeps its order as commands are added.
MQADMIN_ORDER = (
    "updateTopic deleteTopic updateSubGroup deleteSubGroup updateBrokerConfig updateTopicPerm topicRoute "
    "topicStatus topicClusterList brokerStatus queryMsgById queryMsgByKey queryMsgByUniqueKey "
    "queryMsgByOffset queryMsgTraceById printMsg printMsgByQueue sendMsgStatus brokerConsumeStats "
    "producerConnection consumerConnection consumerProgress consumerStatus cloneGroupOffset producer "
    "clusterList topicList updateKvConfig deleteKvConfig wipeWritePerm addWritePerm resetOffsetByTime "
    "skipAccumulatedMessage updateOrderConf cleanExpiredCQ deleteExpiredCommitLog cleanUnusedTopic "
    "startMonitoring statsAll allocateMQ checkMsgSendRT clusterRT getNamesrvConfig updateNamesrvConfig "
    "getBrokerConfig getConsumerConfig queryCq sendMessage consumeMessage updateAclConfig deleteAclConfig "
    "clusterAclConfigVersion updateGlobalWhiteAddr"
).split()


def java_bool(text: str | None) -> bool:
    """``Boolean.parseBoolean(value.trim())``."""
    return text is not None and text.strip().lower() == "true"


CREDENTIAL_FLAGS: dict[str, str | None] = {}
"""``--access-key``/``--secret-key`` of the running admin command (set by ``with_credentials``)."""


def with_credentials(command: click.core.Command) -> click.core.Command:
    """Give an admin command ``--access-key``/``--secret-key``: its requests are signed (plain ACL)."""
    access_help = (
        "ACL access key to sign requests with (else $RMQ_ACCESS_KEY, else $ROCKETMQ_HOME/conf/tools.yml)"
    )
    command.params.append(TyperOption(param_decls=["--access-key", "sign_access_key"], help=access_help))
    command.params.append(
        TyperOption(
            param_decls=["--secret-key", "sign_secret_key"], help="ACL secret key (else $RMQ_SECRET_KEY)"
        )
    )
    callback = command.callback
    assert callback is not None

    def run(
        *args: Any, sign_access_key: str | None = None, sign_secret_key: str | None = None, **kwargs: Any
    ) -> Any:
        CREDENTIAL_FLAGS.update(access_key=sign_access_key, secret_key=sign_secret_key)
        return callback(*args, **kwargs)

    command.callback = run
    return command


@contextmanager
def session(namesrv: str | None, *, need_namesrv: bool = True) -> Iterator[AdminSession]:
    """One ``AdminSession`` (one client, connections reused, requests signed when credentials are
    given) for the whole command."""
    from rmqcli.admin.credentials import resolve_credentials
    from rmqcli.admin.session import AdminSession, resolve_namesrv

    addresses = resolve_namesrv(namesrv) if need_namesrv else []
    credentials = resolve_credentials(CREDENTIAL_FLAGS.get("access_key"), CREDENTIAL_FLAGS.get("secret_key"))
    with AdminSession(addresses, credentials=credentials) as s:
        yield s


def write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def emit_json(obj: Any) -> None:
    from rmqcli.cli.render import camel_dict

    write(json.dumps(camel_dict(obj), ensure_ascii=False, indent=2) + "\n")
