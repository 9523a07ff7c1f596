"""Master-slave replication of the CommitLog, both roles, over RocketMQ 4.9.8's HA protocol.

The frames are declared in ``formats.ha``. ``master.HAMaster`` serves a ``source.CommitLogSource``
on the HA port; ``slave.HASlave`` replicates into an ``appender.CommitLogAppender``;
``reput.ReplicaReput`` builds a slave's consume queues and index from what arrived; ``config``
holds the settings (``MessageStoreConfig``'s ``ha*`` keys, 4.9.8 defaults).
"""
