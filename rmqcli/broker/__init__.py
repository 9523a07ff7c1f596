"""The embedded NameServer and Broker behind ``rmq serve`` (DESIGN.md: socket -> remoting -> broker -> store).

``connection`` frames bytes into commands and back (protocol.md A.1, A.6); ``namesrv`` is the route
table (B.2); the broker is one module per request family (``send``, ``pull``, ``consumer``,
``query``, ``admin``), each a table of ``code -> handler`` whose handlers parse the custom header
and apply it to the broker state (``state``) and the store engine (``messagestore``);
``controller`` ties them together and ``serve`` runs the process.
"""
