"""SlaveActingMaster (RocketMQ 5.1): a broker group keeps serving while its master is down.

``config`` holds the keys (``enableSlaveActingMaster``, ``enableRemoteEscape``, the heartbeat and
member-group periods); ``group.GroupMembership`` sends the lightweight heartbeat (BROKER_HEARTBEAT,
904), learns the group's live members (GET_BROKER_MEMBER_GROUP, 901) and tells the broker when the
smallest live broker id changes (``onMinBrokerChange``); ``escape.EscapeBridge`` sends what an
acting master would write (delayed messages coming due, resolved half messages) to a writable
master of another group. The NameServer's part is in ``rmqcli.namesrv.server``.
"""
