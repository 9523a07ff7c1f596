"""Typed custom headers: the ``CommandCustomHeader`` classes of protocol.md B.2-B.7, all importable
from here (``from rmqcli.remoting import headers as hd; hd.X``).

``base`` declares how a header is made (``header``, ``req``, ``opt``, ``CommandHeader``; A.5);
``catalogue`` declares every header, family by family. Importing them is cheap: a class gets its
``__init__`` and its decoder on first use.
"""

from rmqcli.remoting.headers.base import *  # noqa: F403
from rmqcli.remoting.headers.catalogue import *  # noqa: F403
