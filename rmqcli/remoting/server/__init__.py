"""Design note: the server side of the remoting protocol, shared by the NameServer and the Broker
(RocketMQ's ``NettyRemotingServer`` and what its processors share; protocol.md A.1, A.6, A.7).

- ``connection``: listeners, one ``Connection`` per socket (frames in, commands out, oneway and
  response flags), the dispatch of a request code to its handler, and the answers every server
  gives (REQUEST_CODE_NOT_SUPPORTED, SYSTEM_ERROR on a handler's failure).
- ``refusal``: a request a processor refuses, as its response code and remark.
- ``bodies``: the request bodies a processor reads at once, decoded with a clear refusal.

Nothing here knows the broker or the NameServer: they import this package, never the reverse.
"""
