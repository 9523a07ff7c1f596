"""Every ``rmq`` subcommand: its name and where it is declared, in listing order.

Nothing is imported here: ``rmq CMD`` for a store command imports the one module that declares
it (``main.RmqGroup``). A store command is a typer function, ``pipeline`` a typer app, and an
mqadmin command an ``AdminCommand``: its declaration in ``admin/<family>.py`` is its only entry
(``admin.registry.declared`` finds them all; they are plain data, and no command is built until it
is asked for). ``tests/cli/test_cli.py`` checks that every entry resolves.
"""

from __future__ import annotations

from typing import Any

STORE = {
    "dump-commitlog": "dump_commitlog:dump_commitlog",
    "dump-cq": "dump_queue:dump_cq",
    "dump-index": "dump_index:dump_index",
    "dump-checkpoint": "dump_misc:dump_checkpoint",
    "dump-epoch": "dump_misc:dump_epoch",
    "dump-config": "dump_misc:dump_config",
    "dump-timer": "dump_timer:dump_timer",
    "stats": "stats:stats",
    "verify": "verify:verify",
    "diff-stores": "diff_stores:diff_stores",
    "recover": "repair:recover",
    "truncate": "repair:truncate",
    "rebuild": "repair:rebuild",
    "clean": "repair:clean",
    "offset": "ids:offset",
    "lag": "reports:lag",
    "delay-report": "reports:delay_report",
    "tx-report": "reports:tx_report",
    "backups": "backup:backups",
    "restore-backup": "backup:restore_backup",
    "serve": "serve:serve",
    "controller": "controller:controller",
    "exporter": "exporter:exporter",
    "dashboard": "dashboard:dashboard",
}

# How ``rmq`` and each group of subcommands is set up: ``-h`` for help, plain text, and the help
# when run without a subcommand (``main.app``, ``common.command_group``).
GROUP_SETTINGS: dict[str, Any] = {
    "no_args_is_help": True,
    "rich_markup_mode": None,
    "context_settings": {"help_option_names": ["-h", "--help"]},
}

OTHER = {"help": "admin.commands:help_command"}
GROUPS = {"msgid": "ids:msgid_app", "offsets": "offsets:app", "pipeline": "pipeline:app"}  # typer sub-apps


def admin() -> dict[str, str]:
    """mqadmin's commands, ``name -> "module:attr"`` in ``rmq --help``'s order: every
    ``AdminCommand`` the ``admin/<family>.py`` modules declare (``admin.registry.declared``)."""
    from rmqcli.cli.admin.registry import declared

    return declared()


def find(name: str) -> str | None:
    """Where command ``name`` is declared (``"module:attr"``), None for no such command; the
    admin declarations are read only for a name that is not a store command."""
    return STORE.get(name) or OTHER.get(name) or GROUPS.get(name) or admin().get(name)


# mqadmin's ``commandAlias()`` of 4.9.8's commands that have one.
ALIASES = {"deleteAccessConfig": "deleteAclConfig", "QueryMsgTraceById": "queryMsgTraceById"}


def canonical(name: str) -> str | None:
    """The mqadmin command ``name`` stands for, as ``MQAdminStartup.findSubCommand`` finds it: its
    name or alias, case ignored; None when it names none (store commands are matched exactly)."""
    wanted = name.lower()
    for known in (*admin(), *ALIASES):
        if known.lower() == wanted:
            return ALIASES.get(known, known)
    return None


def every() -> dict[str, str]:
    """Every command, in listing order: the store commands, mqadmin's, ``help``, ``pipeline``."""
    return {**STORE, **admin(), **OTHER, **GROUPS}


def __getattr__(name: str) -> dict[str, str]:
    """``ADMIN`` (``admin()``) and ``ALL`` (``every()``), read when first asked for."""
    if name == "ADMIN":
        return admin()
    if name == "ALL":
        return every()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def resolve(name: str) -> Any:
    """The declaration of command ``name``, its module imported now."""
    import importlib

    where = find(name)
    if where is None:
        raise KeyError(name)
    module, attr = where.split(":")
    return getattr(importlib.import_module(f"rmqcli.cli.{module}"), attr)
