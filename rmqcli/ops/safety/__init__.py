"""The safety layer of every command that changes a store ("Nothing is lost", DESIGN.md).

Modules: ``locks`` (the broker's and rmq's store locks), ``plan`` (what a command would do),
``staging`` (directories built beside the store), ``change`` (applying steps, each backed up and
journalled first), ``backups`` (the records of changes, finishing interrupted ones), ``restore``
(``restore_backup``), ``journal`` (durable files, backup pieces, the journal and the undo).

A command checks that no broker holds the store (``ensure_unlocked``), rolls back a change an
earlier run left interrupted (``finish_interrupted``), builds a ``Plan`` (what it would do; printed
as the ``--dry-run`` output) and applies it through one ``Change``::

    ensure_unlocked(root, force=force_unlocked)
    finish_interrupted(root)          # before reading the store to plan
    plan = make_plan(root)            # the command's own work; may stage dirs with staging_dir()
    with Change(root, "truncate", argv) as change:
        change.truncate_file("commitlog/00000000000000000000", valid_size)
        change.delete_file("commitlog/00000000001073741824")
        backup = change.commit()

Backups. Each ``Change`` gets ``STORE/.rmq-backup/<timestamp>/`` (UTC, ``20261122T233012.123Z``,
unique and increasing per store) holding ``manifest.json`` (command, argv, state, extra roots, and at
commit the full step list), ``journal.jsonl`` (one line per step, appended and fsynced *before* the
step touches the store) and the backed-up pieces ``NNNNN.bin`` / ``NNNNN.dir``. Every piece is
byte-exact and its sha256 is in the journal; a zero tail of a removed range (RocketMQ pre-allocates
its files) is counted, not stored. Removed files and directories are moved into the backup when they
are on the store root's filesystem (else files are copied; a directory on another filesystem is
refused). A replaced file's old version is hard-linked (else copied) into the backup before the new
one is renamed over it. Staged directories live in ``STORE/.rmq-staging/<name>/`` (``staging_dir``).

Paths. A step names a path relative to the store root, or an absolute path inside one of the
change's extra ``roots``: the CommitLog directories a broker.conf puts elsewhere
(``storePathCommitLog=/data/a,/data/b``). Nothing outside the store and those roots can be touched.

``rmq`` never reads ``.rmq-backup`` or ``.rmq-staging``: the store readers only open known names
(``commitlog/`` and ``index/`` files named by 20 / 17 digits, the consume-queue directories under
``consumequeue/``, ``checkpoint``, ``abort``, ``lock``, ``config/*.json``), and temporary files
beside a store file carry the suffixes ``.rmq-new`` / ``.rmq-restore``, which no reader accepts.
A broker ignores both directories as well; ``rmq stats`` counts their files under "other".

Interruption rule. A change that did not reach ``commit()`` (killed, or an exception left its
``with`` block) is **rolled back as a whole**: every journalled step is undone in reverse order
(a truncate or write gets its bytes and length back, a deleted or replaced file is put back, a
half-done ``replace_dir`` swap is swapped back), which leaves the store byte-identical to before
the change. Each undo is idempotent, so a rollback killed half-way is simply repeated. The next
``Change`` on the store (or ``restore_backup``) does this first, so re-running a command after a kill
at any point starts from the original store and converges to the same final store as an
uninterrupted run; the completed change's backup then restores the original bytes. Because a plan
made from a half-changed store is stale, ``Change`` raises ``InterruptedChangeError`` after such a
rollback (unless ``replan=False``); commands avoid it by calling ``finish_interrupted`` before
they plan. A change killed after ``commit()`` wrote its manifest is complete: re-running the
command then finds nothing to do (its plan is empty). The rolled-back change keeps its manifest and
journal (state ``rolled-back``); its pieces are deleted.

Restores. ``restore_backup`` undoes a completed change **as a change of its own** (command
``restore-backup``, manifest key ``restores``): whatever it overwrites or removes -- including data
written to the store after the change it undoes (records appended after a cut, a file or directory
created again) -- is first backed up into the restore's own ``.rmq-backup/<timestamp>/``, so a
restore is journalled, rolled back as a whole when interrupted, and can itself be undone with
``rmq restore-backup``. The backed-up bytes are *copied* back into the store; the undone change's
pieces stay untouched. Its plan reports, per step, the bytes of the current store it would replace.
When the restore commits, the undone change's state becomes ``restored``; when the restore is
itself undone, ``complete`` again. Restores do not block restoring an earlier change (they only
return paths to an earlier state); any other later change that touched the same paths does.
A change that was interrupted (not complete) is restored by rolling it back in place.

Locks. Changes on one store are serialised by an ``flock`` on ``.rmq-backup/.lock``, and a
``Change`` takes the broker's POSIX lock on ``lock`` (when that file exists) so a broker cannot start
under it. Failing to take it -- a broker holds it, or the file cannot be opened or locked -- raises
``StoreBusyError`` unless ``force_unlocked``: the check is repeated when the change starts, however
long the planning took. POSIX locks are per process and are dropped when the process closes *any*
descriptor of ``lock``: call ``ensure_unlocked`` before opening the ``Change``, not during it.

Do not start a broker on a store with an interrupted change: re-run the command (or
``rmq restore-backup`` the pending timestamp) first.

Test hook: with ``RMQ_TEST_CRASH_AT=N`` in the environment the process SIGKILLs itself at the Nth
crash point (between every two durable actions); see ``journal.crashpoint``.
"""

from rmqcli.ops.safety.backups import finish_interrupted, list_backups, manifest_of, pending
from rmqcli.ops.safety.change import Change, InterruptedChangeError
from rmqcli.ops.safety.journal import BACKUP_DIR, STAGING_DIR, ChangeError
from rmqcli.ops.safety.locks import StoreBusyError, ensure_unlocked
from rmqcli.ops.safety.plan import Plan, PlanStep, outside_roots, plan_path
from rmqcli.ops.safety.restore import restore_backup
from rmqcli.ops.safety.staging import remove_staging, staging_dir

__all__ = [
    "BACKUP_DIR",
    "STAGING_DIR",
    "Change",
    "ChangeError",
    "InterruptedChangeError",
    "Plan",
    "PlanStep",
    "StoreBusyError",
    "ensure_unlocked",
    "finish_interrupted",
    "list_backups",
    "manifest_of",
    "outside_roots",
    "pending",
    "plan_path",
    "remove_staging",
    "restore_backup",
    "staging_dir",
]
