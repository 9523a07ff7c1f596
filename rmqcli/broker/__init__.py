"""Design note: the Broker behind ``rmq serve`` (DESIGN.md: socket -> remoting -> broker -> store;
RocketMQ's ``broker`` module).

- The core: ``controller`` (the ``BrokerController``: state, processors, services, start and
  stop), ``context`` (``BrokerContext``, the one interface a handler sees, with the per-broker
  state), ``state`` (topics, groups, offsets, clients, locks), ``config`` (the typed view of
  broker.conf, read by ``rmqcli.conf``), ``names`` (topic and group name checks), ``serve`` (the
  process: NameServer, Broker and gRPC endpoint wired together).
- ``processor/``: one module per request family (send, pull, consumer, query, transaction, ...);
  ``admin/``: mqadmin's requests; ``pop/``, ``timer/``: RocketMQ 5's POP and timer messages;
  ``grpc/``: the 5.x gRPC endpoint; ``acl/``, ``ha/`` (replication), ``acting/``
  (SlaveActingMaster); ``services/``: the store engine and its background services.
- Beside it: ``rmqcli.remoting.server`` (connections and dispatch, shared with the NameServer) and
  ``rmqcli.namesrv`` (the NameServer).
"""
