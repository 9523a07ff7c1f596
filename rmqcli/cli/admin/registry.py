"""One declaration per mqadmin command, and the one path every admin command runs through.

An ``AdminCommand`` is what RocketMQ's ``SubCommand`` is to mqadmin (``commandName``,
``commandDesc``, ``buildCommandlineOptions``, ``execute``): the name, mqadmin's description, the
package of mqadmin's class (``group``), the options, the call into ``rmqcli.admin`` and how the
result is shown (mqadmin's text, or ``--json``). ``cli/admin/<family>.py`` declare them,
``declared`` finds them (in ``rmq``'s order), ``build`` turns one into a click command when it is
first asked for, and ``run_admin`` runs it: options checked, one ``AdminSession``, the call, the
text or the JSON, then the exit code of what failed (protocol.md C.1, C.2).

Light at import time: declarations are plain data; typer builds one command at a time, and the
admin operations and the codec are imported when a command runs.

Design note: one declaration per command is the model a new mqadmin command copies. Its
``AdminCommand`` in ``cli/admin/<family>.py`` is its only entry (name, description, options, the
call into its ``rmqcli.admin`` function, the text): the listings, ``--help``, the man pages and
``--json`` all come from it, and every command runs through the same ``run_admin``. A family module
declares its commands through its ``Family`` (``Family.command``): a command that hands its
options to the admin operation of its name and shows the result with the renderer of that name
needs only its name, description and options.
"""

from __future__ import annotations

import functools
import importlib
import json
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from rmqcli.errors import BrokerError, NetworkError, UsageError

if TYPE_CHECKING:
    from typer import _click as click

    from rmqcli.admin.session import AdminSession

Args = SimpleNamespace
"""The parsed options of one run, by parameter name (``args.topic``, ``args.json_out``)."""

REQUIRED: Any = ...
"""``Opt.default`` of an option that must be given (commons-cli ``setRequired(true)``)."""


@dataclass(frozen=True, slots=True)
class Opt:
    """One option as mqadmin declares it: ``new Option(short, long, hasArg, description)``.

    ``kind`` is ``str``, ``int`` or ``bool`` (a flag without a value); an option whose
    ``default`` is ``None`` may be left out, one whose default is ``REQUIRED`` may not.
    """

    name: str  # the parameter name: ``args.<name>``
    flags: tuple[str, ...]  # ("--topic", "-t")
    help: str
    kind: type = str
    default: Any = None


def opt(name: str, long: str, short: str | None, help: str, kind: type = str, default: Any = None) -> Opt:
    """``Opt(name, (long, short), help, kind, default)``; ``short`` None for a long-only option."""
    return Opt(name, (long, short) if short else (long,), help, kind, default)


def required(name: str, long: str, short: str, help: str, kind: type = str) -> Opt:
    """An option that must be given."""
    return opt(name, long, short, help, kind, REQUIRED)


NAMESRV_HELP = "Name server address list, eg: '192.168.0.1:9876;192.168.0.2:9876'"
ACCESS_HELP = (
    "ACL access key to sign requests with (else $RMQ_ACCESS_KEY, else $ROCKETMQ_HOME/conf/tools.yml)"
)

# Every admin command ends with these options, in this order (mqadmin's -n; rmq's additions).
COMMON_OPTIONS = (
    opt("namesrv", "--namesrvAddr", "-n", NAMESRV_HELP),
    opt("json_out", "--json", None, "Print the result as JSON instead of mqadmin's text.", bool, False),
    opt("sign_access_key", "--access-key", None, ACCESS_HELP),
    opt("sign_secret_key", "--secret-key", None, "ACL secret key (else $RMQ_SECRET_KEY)"),
)

# mqadmin's full registration order (C.2), so the listing keeps its order as commands are added.
MQADMIN_ORDER = (
    "updateTopic deleteTopic updateSubGroup deleteSubGroup updateBrokerConfig updateTopicPerm topicRoute "
    "topicStatus topicClusterList brokerStatus queryMsgById queryMsgByKey queryMsgByUniqueKey "
    "queryMsgByOffset queryMsgTraceById printMsg printMsgByQueue sendMsgStatus brokerConsumeStats "
    "producerConnection consumerConnection consumerProgress consumerStatus cloneGroupOffset producer "
    "clusterList topicList updateKvConfig deleteKvConfig wipeWritePerm addWritePerm resetOffsetByTime "
    "skipAccumulatedMessage updateOrderConf cleanExpiredCQ deleteExpiredCommitLog cleanUnusedTopic "
    "startMonitoring statsAll allocateMQ checkMsgSendRT clusterRT getNamesrvConfig updateNamesrvConfig "
    "getBrokerConfig getConsumerConfig queryCq sendMessage consumeMessage updateAclConfig deleteAclConfig "
    "clusterAclConfigVersion updateGlobalWhiteAddr exportMetadata exportConfigs exportMetrics"
).split()

# The modules that declare the commands (``cli/admin/<family>.py``), in the parts ``rmq --help``
# lists them in; inside a part, mqadmin's order (a command mqadmin lacks comes last, as declared).
# A new command in one of these modules needs no other entry.
FAMILIES = (
    ("admin.topic", "admin.broker", "admin.dledger", "admin.controller", "admin.export"),
    ("admin.group",),
    ("admin.message",),
    ("admin.acl",),
)


@functools.cache
def declared() -> dict[str, str]:
    """Every ``AdminCommand`` of ``FAMILIES``: ``name -> "module:attr"``, in ``rmq --help``'s order.

    Imports the family modules (declarations only: the admin operations stay unimported).
    """
    rank = {name: i for i, name in enumerate(MQADMIN_ORDER)}
    found: dict[str, tuple[tuple[int, int], str]] = {}
    seen: set[int] = set()
    for part, modules in enumerate(FAMILIES):
        for module in modules:
            for attr, value in vars(importlib.import_module(f"rmqcli.cli.{module}")).items():
                if not isinstance(value, AdminCommand) or id(value) in seen:
                    continue
                if value.name in found:
                    raise RuntimeError(f"admin command {value.name} is declared twice")
                seen.add(id(value))
                found[value.name] = ((part, rank.get(value.name, len(rank) + len(found))), f"{module}:{attr}")
    return {name: where for name, (_, where) in sorted(found.items(), key=lambda item: item[1][0])}


# Options several commands share, worded as mqadmin's.
TOPIC = required("topic", "--topic", "-t", "topic name")
AMOUNT = opt("amount", "--amount", "-a", "message amount | default 100", int, 100)
SIZE = opt("size", "--size", "-s", "message size | default 128 Byte", int, 128)
ROUNDS = opt(
    "rounds", "--rounds", None, "With -i: stop after this many rounds (0: run until interrupted).", int, 0
)


def broker_addr(help: str) -> Opt:
    """mqadmin's ``-b``: one broker, by address."""
    return opt("broker_addr", "--brokerAddr", "-b", help)


def cluster_name(help: str) -> Opt:
    """mqadmin's ``-c``: every broker of a cluster."""
    return opt("cluster_name", "--clusterName", "-c", help)


def broker_or_cluster_options(action: str) -> tuple[Opt, Opt]:
    """``-b`` and ``-c`` of a command that needs one of them (``broker_or_cluster``), worded as
    mqadmin words most: ``<action> which broker``, ``<action> which cluster``."""
    return broker_addr(f"{action} which broker"), cluster_name(f"{action} which cluster")


def broker_or_cluster_target(args: Args) -> dict[str, str | None]:
    """``broker_addr`` and ``cluster``, the keywords of an operation sent to ``-b`` or to every
    broker of ``-c`` (the options of ``broker_or_cluster_options``)."""
    return {"broker_addr": args.broker_addr, "cluster": args.cluster_name}


@dataclass(frozen=True, slots=True)
class AdminCommand:
    """One mqadmin command.

    ``call(session, args)`` returns the result; ``text(result, args)`` is mqadmin's output for it
    and ``data(result, args)`` the ``--json`` document (default: the result itself, through
    ``render.camel_dict``). ``check(args)`` refuses bad options before anything is sent;
    ``namesrv(args)`` says whether a name server is needed (default: always); ``fail(result)``
    raises, after the output, for what failed inside the result (a broker that could not be
    reached or answered with an error); ``warnings(result)`` are one-line warnings for stderr,
    after the output (a setting a broker did not apply); ``repeat(args)`` gives
    ``(seconds, rounds)`` of a command that runs again every few seconds (``clusterList -i``).
    """

    name: str
    description: str  # mqadmin's commandDesc()
    group: str  # the package of mqadmin's class: org.apache.rocketmq.tools.command.<group>
    options: tuple[Opt, ...]
    call: Callable[[AdminSession, Args], Any]
    text: Callable[[Any, Args], str]
    data: Callable[[Any, Args], Any] | None = None
    check: Callable[[Args], None] | None = None
    namesrv: Callable[[Args], bool] | None = None
    fail: Callable[[Any], None] | None = None
    warnings: Callable[[Any], list[str]] | None = None
    repeat: Callable[[Args], tuple[int | None, int]] | None = None


class Lazy:
    """A module imported on first use: declarations name the admin operations and text
    renderers without importing them (``rmq help`` and one command stay cheap)."""

    __slots__ = ("_module",)

    def __init__(self, module: str):
        self._module = module

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module(self._module), name)


def snake_case(name: str) -> str:
    """``topicStatus``: ``topic_status``; a run of capitals stays one word (``checkMsgSendRT``:
    ``check_msg_send_rt``)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def deferred(module: Lazy, name: str) -> Callable[..., Any]:
    """``module.<name>``, looked up when called: a declaration names a function without importing
    its module."""
    return lambda *args: getattr(module, name)(*args)


@dataclass(frozen=True, slots=True)
class Family:
    """What one ``cli/admin/<family>.py`` declares its commands over: the admin operations
    (``rmqcli.admin.<family>``), the text renderers (``cli/admin/format*.py``) and the package of
    most of its mqadmin classes (``AdminCommand.group``)."""

    operations: Lazy
    texts: Lazy
    group: str

    def command(
        self,
        name: str,
        description: str,
        options: tuple[Opt, ...],
        *,
        group: str | None = None,
        operation: str | None = None,
        render: str | None = None,
        params: tuple[str, ...] | None = None,
        **more: Any,
    ) -> AdminCommand:
        """The ``AdminCommand`` ``name`` of this family (``group`` defaults to the family's).

        Without ``call`` it calls ``operations.<operation>(session, *values)``, the values of
        ``params`` (option names; default: every option, in the declared order); ``operation``
        defaults to the command's name in snake case (``topicStatus``: ``topic_status``,
        ``checkMsgSendRT``: ``check_msg_send_rt``), as the admin operations are named. Without
        ``text`` the text is ``texts.<render>(result)``, ``render`` defaulting to that name too.
        ``more`` are ``AdminCommand``'s other fields (``data``, ``check``, ``namesrv``, ...)."""
        if "call" not in more:
            names = tuple(o.name for o in options) if params is None else params
            call = deferred(self.operations, operation or snake_case(name))
            more["call"] = lambda s, a: call(s, *(getattr(a, n) for n in names))
        if "text" not in more:
            show = deferred(self.texts, render or snake_case(name))
            more["text"] = lambda result, a: show(result)
        return AdminCommand(name, description, group or self.group, options, **more)


# --- checks shared by declarations ----------------------------------------------------------------
def broker_or_cluster(args: Args) -> None:
    """mqadmin's ``-b`` or ``-c``, one of which the command needs."""
    if not args.broker_addr and not args.cluster_name:
        raise UsageError("one of -b/--brokerAddr or -c/--clusterName is required")


def without_broker(args: Args) -> bool:
    """The name server is needed unless ``-b`` names the broker."""
    return not args.broker_addr


def parse_boolean(text: str | None) -> bool:
    """Java's ``Boolean.parseBoolean(value.trim())``: only ``true`` (any case) is true."""
    return text is not None and text.strip().lower() == "true"


def failed(message: str | None, kind: str | None) -> None:
    """Exit non-zero after the output: 5 for an unreachable broker, 6 for an error answer."""
    raise (NetworkError if kind == "network" else BrokerError)(message or "failed")


def fail_first(outcomes: list[Any]) -> None:
    """``failed`` for the first of ``outcomes`` (each with ``error`` and ``error_kind``), if any."""
    if outcomes:
        failed(outcomes[0].error, outcomes[0].error_kind)


# --- running ---------------------------------------------------------------------------------------
@contextmanager
def session(args: Args, *, need_namesrv: bool = True) -> Iterator[AdminSession]:
    """One ``AdminSession`` (one client, connections reused, requests signed when credentials are
    given) for the whole command."""
    from rmqcli.admin.credentials import resolve_credentials
    from rmqcli.admin.session import AdminSession, resolve_namesrv

    addresses = resolve_namesrv(args.namesrv) if need_namesrv else []
    credentials = resolve_credentials(args.sign_access_key, args.sign_secret_key)
    with AdminSession(addresses, credentials=credentials) as s:
        yield s


def write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def json_document(command: AdminCommand, result: Any, args: Args) -> Any:
    """The ``--json`` document of ``result``: plain JSON values (``rmq dashboard`` serves the same)."""
    from rmqcli.cli.render import camel_dict

    return camel_dict(command.data(result, args) if command.data is not None else result)


def emit_json(document: Any) -> None:
    write(json.dumps(document, ensure_ascii=False, indent=2) + "\n")


def lookup(name: str) -> AdminCommand:
    """The declared ``AdminCommand`` called ``name`` (a KeyError when there is none)."""
    module, attr = declared()[name].split(":")
    return getattr(importlib.import_module(f"rmqcli.cli.{module}"), attr)


def arguments(command: AdminCommand, given: dict[str, Any]) -> Args:
    """``Args`` as the command line would give them: ``given`` values by parameter name, every other
    option at its default; a UsageError naming a required option left out, or an unknown one."""
    options = {o.name: o for o in (*command.options, *COMMON_OPTIONS)}
    unknown = sorted(set(given) - set(options))
    if unknown:
        raise UsageError(f"{command.name}: no such option {', '.join(unknown)}")
    values = {}
    for name, o in options.items():
        value = given.get(name, o.default)
        if value is REQUIRED:
            raise UsageError(f"{command.name}: {'/'.join(o.flags)} is required")
        values[name] = value
    return Args(**values)


def run_admin(command: AdminCommand, args: Args) -> None:
    """Run ``command``: check, connect, call, show (text or ``--json``), then fail if the result
    says so; with ``repeat``, again every few seconds until its rounds are done."""
    import time

    if command.check is not None:
        command.check(args)
    need = command.namesrv(args) if command.namesrv is not None else True
    every, rounds = command.repeat(args) if command.repeat is not None else (None, 0)
    done = 0
    with session(args, need_namesrv=need) as s:
        while True:
            result = command.call(s, args)
            if args.json_out:
                emit_json(json_document(command, result, args))
            else:
                write(command.text(result, args))
            if command.warnings is not None:
                from rmqcli.cli.render import warn

                for line in command.warnings(result):
                    warn(line)
            if command.fail is not None:
                command.fail(result)
            done += 1
            if not every or every <= 0 or (rounds and done >= rounds):
                return
            time.sleep(every)


# --- the click command -----------------------------------------------------------------------------
def build(command: AdminCommand) -> click.Command:
    """The click command of ``command``: typer builds it from a signature made of its options
    (the same help, types and errors as a typer function with those parameters)."""
    import inspect
    from typing import Annotated

    import typer
    from typer.models import CommandInfo

    parameters = []
    for o in (*command.options, *COMMON_OPTIONS):
        kind = o.kind | None if o.default is None else o.kind
        parameters.append(
            inspect.Parameter(
                o.name,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=inspect.Parameter.empty if o.default is REQUIRED else o.default,
                annotation=Annotated[kind, typer.Option(*o.flags, help=o.help)],
            )
        )

    def callback(**values: Any) -> None:
        run_admin(command, Args(**values))

    callback.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    text = command.description
    info = CommandInfo(name=command.name, callback=callback, help=text, short_help=text)
    return typer.main.get_command_from_info(info, pretty_exceptions_short=True, rich_markup_mode=None)
