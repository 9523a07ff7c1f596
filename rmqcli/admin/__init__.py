"""mqadmin operations as functions over the remoting client (protocol.md C.5).

Each operation takes an ``AdminSession`` (one ``SyncClient`` per command, connections reused) and
returns dataclasses; nothing here prints. ``rmqcli.cli.admin`` renders them as mqadmin does.
"""
