"""The mqadmin commands of ``rmq``: their declarations, the path they run through, their text.

Design note: one module per family of mqadmin commands (``topic``, ``broker``, ``export``,
``group``, ``message``, ``acl``, after the packages of mqadmin's ``SubCommand`` classes). A family
module holds only declarations: one ``AdminCommand`` per command, from which ``registry.build``
makes the click command that parses its flags, calls one function of ``rmqcli/admin/`` (named
through a ``Lazy`` handle) and renders the result as mqadmin's text or ``--json``. Beside them:
``registry`` (``AdminCommand``, ``Opt``, ``FAMILIES``, ``declared``, ``build``, ``run_admin``),
``format``, ``format_groups`` and ``format_messages`` (mqadmin's text, character for character)
and ``commands`` (``rmq help CMD`` and the listing of a bare ``rmq``).

A new mqadmin command is its code plus one declaration: the function in ``rmqcli/admin/`` (takes
the session and plain values, returns data, never prints), its text in a ``format*`` module, and
its ``AdminCommand`` in the family module; ``rmq --help``, the listings, the man pages (``make
man``) and ``--json`` all come from that declaration. A new family module is named once, in
``registry.FAMILIES``, the one list of these modules (``rmqcli/cli/commands.py`` reads it through
``registry.declared``).

Nothing is imported here: ``rmq --help`` imports ``registry`` and the family modules (plain
data), and the renderers and admin operations only when a command runs.
"""
