"""Design note: the broker's request processors, one module per request family, as RocketMQ's
``broker/processor`` (protocol.md B.3 to B.7).

Each module is a table of ``code -> handler``; a handler parses its custom header, applies it to
the broker through ``BrokerContext`` (``rmqcli.broker.context``, the one interface a handler sees)
and answers. ``controller`` registers the tables.

- ``send`` (SEND_MESSAGE 10, V2 310, batches 320) and ``sendlane`` (the fast path of a plain send);
  ``sendback`` (CONSUMER_SEND_MSG_BACK 36: retry and DLQ); ``transaction`` (half messages,
  END_TRANSACTION, the check service);
- ``pull`` (PULL_MESSAGE 11), ``holds`` (the long-polling pulls waiting for a message),
  ``offsetmoved`` (the OFFSET_MOVED_EVENT a master writes with PULL_OFFSET_MOVED);
- ``consumer`` (heartbeats, consumer lists, offsets, queue locks); ``query`` (queue offsets and
  message lookups).

Other families live in packages of their own beside this one: ``admin`` (mqadmin's requests),
``pop``, ``timer``, ``acl``, ``ha``, ``acting``. A new family is a new module here with its table,
plus one line in ``controller``.
"""
