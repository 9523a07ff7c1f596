"""``/api/admin/<command>``: an mqadmin command's ``--json`` document, by the same declaration
and code path as ``rmq <command> --json`` (``cli/admin/registry``).

Reads (GET) are the commands of ``READS``, options in the query string by parameter name
(``?topic=T``); with ``_errors=inline`` a failure is answered 200 with its ``{"error": line}``, for
the sections a broker may not support (the browser reports every 4xx/5xx in its console).

Writes (POST, ``{"options": {...}, "confirm": false}``) are those of ``WRITES``, only when the
dashboard was started with ``--allow-writes``: unconfirmed, the answer is the plan (the command
line that would run); confirmed, the command runs. The name server and the ACL keys
are the dashboard's own: a request cannot name others."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from rmqcli.dashboard.answers import Forbidden, document, error, read_json
from rmqcli.dashboard.settings import DashboardSettings
from rmqcli.errors import UsageError

READS = frozenset(
    "clusterList brokerStatus haStatus getBrokerMemberGroup getBrokerEpoch topicList topicRoute topicStatus "
    "topicClusterList consumerProgress consumerConnection producerConnection getBrokerConfig "
    "queryMsgById queryMsgByKey queryMsgByUniqueKey queryMsgTraceById".split()
)
WRITES = frozenset("sendMessage resetOffsetByTime skipAccumulatedMessage".split())
# options by which a read command acts on a client (consumes directly, resends): never from a read
ACTING = {
    "queryMsgById": frozenset(("send_message", "consumer_group", "client_id", "unit_name")),
    "queryMsgByUniqueKey": frozenset(("consumer_group", "client_id")),
}
SERVER_SIDE = frozenset(("namesrv", "json_out", "sign_access_key", "sign_secret_key"))


def _convert(kind: type, name: str, text: Any) -> Any:
    if kind is bool:
        if isinstance(text, bool):
            return text
        return str(text).lower() in ("1", "true", "yes", "on")
    if kind is int:
        try:
            return int(text)
        except (TypeError, ValueError):
            raise UsageError(f"option {name}: not an integer: {str(text)[:40]!r}") from None
    return str(text)


def _options(command: Any, given: dict[str, Any]) -> dict[str, Any]:
    from rmqcli.cli.admin.registry import COMMON_OPTIONS

    kinds = {o.name: o.kind for o in (*command.options, *COMMON_OPTIONS)}
    refused = sorted(set(given) & SERVER_SIDE)
    if refused:
        raise Forbidden(f"{command.name}: {', '.join(refused)} are the dashboard's own")
    return {k: _convert(kinds[k], k, v) if k in kinds else v for k, v in given.items() if v != ""}


def run_command(settings: DashboardSettings, name: str, given: dict[str, Any]) -> Any:
    """The ``--json`` document of ``rmq <name>`` with options ``given``, against the dashboard's
    name server, signed with its keys; ``fail`` raises what failed inside the result, as the CLI."""
    from rmqcli.admin.session import AdminSession
    from rmqcli.cli.admin import registry

    if not settings.namesrv:
        raise UsageError("no name server: start rmq dashboard with -n NAMESRV")
    command = registry.lookup(name)
    args = registry.arguments(command, {**_options(command, given), "json_out": True})
    if command.check is not None:
        command.check(args)
    with AdminSession(settings.namesrv, timeout=settings.timeout, credentials=settings.credentials) as s:
        result = command.call(s, args)
    doc = registry.json_document(command, result, args)
    if command.fail is not None:
        command.fail(result)
    return doc


def plan(settings: DashboardSettings, name: str, given: dict[str, Any]) -> str:
    """The command line a write would run (what the page asks the user to confirm)."""
    from rmqcli.cli.admin import registry

    command = registry.lookup(name)
    options = _options(command, given)
    registry.arguments(command, options)  # a missing or unknown option is refused before the plan
    flags = {o.name: o.flags[0] for o in command.options}
    words = ["rmq", name]
    for key, value in options.items():
        words += [flags[key]] if value is True else [flags[key], str(value)]
    words += ["-n", ";".join(settings.namesrv)]
    import shlex

    return " ".join(shlex.quote(w) for w in words)


def routes(settings: DashboardSettings) -> list[Route]:
    async def read(request: Request) -> JSONResponse:
        name = request.path_params["command"]
        given = dict(request.query_params)
        inline = given.pop("_errors", "") == "inline"
        try:
            if name not in READS:
                raise Forbidden(f"{name}: not a command the dashboard reads with")
            acting = sorted(ACTING.get(name, frozenset()) & set(given))
            if acting:
                raise Forbidden(f"{name}: {', '.join(acting)} act on a client; the dashboard only reads")
            return document(await run_in_threadpool(run_command, settings, name, given))
        except Exception as exc:  # noqa: BLE001 - every failure is one line on the page
            answer = error(exc)
            if inline:  # a section that may fail (a 4.x broker has no haStatus): 200, the line inside
                answer.status_code = 200
            return answer

    async def write(request: Request) -> JSONResponse:
        name = request.path_params["command"]
        try:
            if name not in WRITES:
                raise Forbidden(f"{name}: not a command the dashboard writes with")
            if not settings.allow_writes:
                raise Forbidden("read-only: rmq dashboard was started without --allow-writes")
            body = await read_json(request)
            if not isinstance(body, dict) or not isinstance(body.get("options", {}), dict):
                raise UsageError('expected {"options": {...}, "confirm": true|false}')
            given = body.get("options", {})
            if body.get("confirm") is not True:
                return document({"plan": plan(settings, name, given)})
            return document({"done": await run_in_threadpool(run_command, settings, name, given)})
        except Exception as exc:  # noqa: BLE001
            return error(exc)

    return [
        Route("/api/admin/{command}", read, methods=["GET"]),
        Route("/api/admin/{command}", write, methods=["POST"]),
    ]
