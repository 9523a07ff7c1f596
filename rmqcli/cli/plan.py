"""What every store-changing command shares: ``--dry-run``, ``--yes``, ``--force-unlocked``, ``print_plan``.

A command parses its flags, builds a ``rmqcli.ops.safety.Plan``, and either prints it (the default,
and ``--dry-run``) or applies it through a ``Change`` and prints it with ``applied=True``::

    yes = confirm(dry_run, yes)
    renderer = Renderer(resolve_format(OutputFormat.table, json_))
    if yes:
        ensure_unlocked(store, force=force_unlocked)
        finish_interrupted(store, force_unlocked=force_unlocked)  # a run killed earlier is rolled back
    plan = make_plan(store)  # may stage in STORE/.rmq-staging/<name>: remove it in a `finally`
    if not yes or plan.empty:
        print_plan(renderer, plan)
        return
    # the Change takes the broker's lock again: StoreBusyError if a broker started while planning
    with Change(store, "truncate", sys.argv[1:], roots=plan.roots, force_unlocked=force_unlocked) as change:
        ...
        backup = change.commit()
    print_plan(renderer, plan, applied=True, backup=backup)

``--force-unlocked`` is passed to every lock check (``ensure_unlocked``, ``finish_interrupted``, the
``Change``); without it a ``lock`` file that is held, or that cannot be opened or locked, stops the
command with exit code 7.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rmqcli.cli.columns import number
from rmqcli.cli.common import switch_option
from rmqcli.cli.render import Column, OutputFormat, Renderer, _json, _yaml
from rmqcli.errors import UsageError

if TYPE_CHECKING:
    from rmqcli.ops.safety import Plan

DryRunOpt = switch_option(
    "--dry-run", help="Only print the plan (the default without --yes); change nothing."
)
YesOpt = switch_option("--yes", "-y", help="Apply the plan; without it nothing changes.")
ForceUnlockedOpt = switch_option(
    "--force-unlocked",
    help="Change the store even though its lock file is held or cannot be checked (only when no "
    "broker runs on it).",
)

PlanJsonOpt = switch_option("--json", help="Print the plan as one JSON document.")

NOT_APPLIED = "nothing changed; re-run with --yes to apply"
NOTHING_TO_DO = "nothing to do; the store is left as it is"

STEP_COLUMNS = [
    Column("action", "Action"),
    Column("path", "Path"),
    number("bytesRemoved", "BytesRemoved"),
    Column("detail", "Detail", wrap=True),
]


def confirm(dry_run: bool, yes: bool) -> bool:
    """Whether to apply: ``--yes`` without ``--dry-run``; both together are a usage error."""
    if dry_run and yes:
        raise UsageError("--dry-run and --yes exclude each other")
    return yes


def outcome(plan: Plan, applied: bool, backup: Path | None) -> str:
    """The closing sentence under a plan."""
    if plan.empty:
        return NOTHING_TO_DO
    if not applied:
        return NOT_APPLIED
    if backup is None:
        return "applied"
    if all(step.action == "discard" for step in plan.steps):
        return f"applied; the files are deleted for good (--no-backup); the change's record is in {backup}"
    return f"applied; backup in {backup} (undo with: rmq restore-backup {plan.store} {backup.name} --yes)"


def print_plan(renderer: Renderer, plan: Plan, *, applied: bool = False, backup: Path | None = None) -> None:
    """Print a plan: a rich table on a terminal, tab-separated text when piped, or one JSON/YAML document.

    Not applied, it ends with "nothing changed; re-run with --yes to apply" (in JSON: ``message``).
    """
    doc: dict[str, Any] = {
        **plan.to_dict(),
        "applied": applied and not plan.empty,
        "backup": str(backup) if backup is not None else None,
        "message": outcome(plan, applied, backup),
    }
    out = renderer.out
    if renderer.fmt is OutputFormat.json:
        out.write(_json(doc) + "\n")
        return
    if renderer.fmt is OutputFormat.jsonl:
        out.write(_json(doc, None) + "\n")
        return
    if renderer.fmt is OutputFormat.yaml:
        out.write(_yaml(doc))
        return
    title = f"{'applied' if applied else 'plan'}: {plan.command} on {plan.store}"
    if not renderer.tty:
        out.write(f"# {title}\n")
    if plan.steps:
        renderer.rows(doc["steps"], STEP_COLUMNS, title=title)
    total = doc["bytesRemoved"]
    lines = [f"note: {note}" for note in plan.notes]
    if plan.steps:
        lines.append(f"{len(plan.steps)} step(s), {total} byte(s) removed")
    lines.append(doc["message"])
    out.write("\n".join(lines) + "\n")
