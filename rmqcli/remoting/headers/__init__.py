"""Typed custom headers: the ``CommandCustomHeader`` classes of PROTOCOL.md B.2-B.7, one module a
family, all of them importable from here (``from rmqcli.remoting import headers as hd; hd.X``).

``base`` declares how a header is made (``header``, ``req``, ``opt``, ``CommandHeader``; A.5);
``namesrv`` holds the NameServer's (B.2), ``send`` the sends (B.3, B.6), ``consume`` pulls, offsets
and queries (B.3, B.7), ``admin`` the admin and ACL requests (B.4, B.5). Importing them is cheap:
a class gets its ``__init__`` and its decoder on first use.
"""

from rmqcli.remoting.headers.admin import *  # noqa: F403
from rmqcli.remoting.headers.base import *  # noqa: F403
from rmqcli.remoting.headers.consume import *  # noqa: F403
from rmqcli.remoting.headers.namesrv import *  # noqa: F403
from rmqcli.remoting.headers.send import *  # noqa: F403
