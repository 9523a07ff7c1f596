"""Design note: the NameServer that ``rmq serve`` runs beside its broker (RocketMQ's
``namesrv`` module: ``RouteInfoManager``, ``KVConfigManager``, ``DefaultRequestProcessor``;
protocol.md B.2).

- ``server``: the route tables and KV config in memory, and one handler per request code
  (register/unregister broker, routes, cluster info, KV config, write permission, its own config).

It sits on the shared server plumbing of ``rmqcli.remoting.server`` and knows nothing of the
broker: a broker process reaches it over a socket, as a Java broker does.
"""
