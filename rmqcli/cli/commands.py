"""Every ``rmq`` subcommand: its name and where it is declared, in listing order.

Nothing is imported here: ``rmq CMD`` imports the one module that declares CMD (``main.RmqGroup``),
so an admin command's start-up does not pay for sixty others. A store command is a typer
function, an mqadmin command an ``AdminCommand`` (``admin_registry``), ``pipeline`` a typer app.
``tests/test_cli.py`` checks that every entry resolves.
"""

from __future__ import annotations

from typing import Any

STORE = {
    "dump-commitlog": "dump_commitlog:dump_commitlog",
    "dump-cq": "dump_queue:dump_cq",
    "dump-index": "dump_index:dump_index",
    "dump-checkpoint": "dump_misc:dump_checkpoint",
    "dump-config": "dump_misc:dump_config",
    "stats": "stats:stats",
    "verify": "verify:verify",
    "recover": "repair:recover",
    "truncate": "repair:truncate",
    "rebuild": "repair:rebuild",
    "backups": "backup:backups",
    "restore-backup": "backup:restore_backup",
    "serve": "serve:serve",
}

# mqadmin's commands: ``AdminCommand`` declarations in ``admin_<family>.py``
ADMIN = {
    "updateTopic": "admin_topic:update_topic",
    "deleteTopic": "admin_topic:delete_topic",
    "updateBrokerConfig": "admin_broker:update_broker_config",
    "updateTopicPerm": "admin_topic:update_topic_perm",
    "topicRoute": "admin_topic:topic_route",
    "topicStatus": "admin_topic:topic_status",
    "topicClusterList": "admin_topic:topic_cluster_list",
    "brokerStatus": "admin_broker:broker_status",
    "clusterList": "admin_broker:cluster_list",
    "topicList": "admin_topic:topic_list",
    "updateKvConfig": "admin_broker:update_kv_config",
    "deleteKvConfig": "admin_broker:delete_kv_config",
    "wipeWritePerm": "admin_broker:wipe_write_perm",
    "addWritePerm": "admin_broker:add_write_perm",
    "updateOrderConf": "admin_topic:update_order_conf",
    "cleanExpiredCQ": "admin_broker:clean_expired_cq",
    "deleteExpiredCommitLog": "admin_broker:delete_expired_commit_log",
    "cleanUnusedTopic": "admin_broker:clean_unused_topic",
    "allocateMQ": "admin_topic:allocate_mq",
    "getNamesrvConfig": "admin_broker:get_namesrv_config",
    "updateNamesrvConfig": "admin_broker:update_namesrv_config",
    "getBrokerConfig": "admin_broker:get_broker_config",
    "updateSubGroup": "admin_group:update_sub_group",
    "deleteSubGroup": "admin_group:delete_sub_group",
    "brokerConsumeStats": "admin_group:broker_consume_stats",
    "producerConnection": "admin_group:producer_connection",
    "consumerConnection": "admin_group:consumer_connection",
    "consumerProgress": "admin_group:consumer_progress",
    "consumerStatus": "admin_group:consumer_status",
    "cloneGroupOffset": "admin_group:clone_group_offset",
    "resetOffsetByTime": "admin_group:reset_offset_by_time",
    "skipAccumulatedMessage": "admin_group:skip_accumulated_message",
    "statsAll": "admin_group:stats_all",
    "getConsumerConfig": "admin_group:get_consumer_config",
    "queryMsgById": "admin_message:query_msg_by_id",
    "queryMsgByKey": "admin_message:query_msg_by_key",
    "queryMsgByUniqueKey": "admin_message:query_msg_by_unique_key",
    "queryMsgByOffset": "admin_message:query_msg_by_offset",
    "printMsg": "admin_message:print_msg",
    "printMsgByQueue": "admin_message:print_msg_by_queue",
    "sendMsgStatus": "admin_message:send_msg_status",
    "checkMsgSendRT": "admin_message:check_msg_send_rt",
    "queryCq": "admin_message:query_cq",
    "sendMessage": "admin_message:send_message",
    "consumeMessage": "admin_message:consume_message",
    "updateAclConfig": "admin_acl:update_acl_config",
    "deleteAclConfig": "admin_acl:delete_acl_config",
    "clusterAclConfigVersion": "admin_acl:cluster_acl_config_version",
    "updateGlobalWhiteAddr": "admin_acl:update_global_white_addr",
}

OTHER = {"help": "admin_commands:help_command"}
GROUPS = {"pipeline": "pipeline:app"}  # typer sub-apps

ALL = {**STORE, **ADMIN, **OTHER, **GROUPS}


def resolve(name: str) -> Any:
    """The declaration of command ``name``, its module imported now."""
    import importlib

    module, attr = ALL[name].split(":")
    return getattr(importlib.import_module(f"rmqcli.cli.{module}"), attr)
