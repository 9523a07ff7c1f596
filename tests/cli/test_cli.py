"""The `rmq` command line on real stores: output formats, exit codes and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rmqcli.cli.main import app
from rmqcli.errors import CorruptDataError, NotFoundError, UsageError
from tests.support import REAL_ROOT
from tests.support.cli import RMQ
from tests.support.stores import writable_copy

FIXTURE = REAL_ROOT / "ipv6"
STORE = FIXTURE / "store"
pytestmark = pytest.mark.real


def records() -> list[dict]:
    lines = (FIXTURE / "store.records.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


@pytest.fixture
def store_copy(tmp_path: Path) -> Path:
    """A writable copy of the real store."""
    return writable_copy(STORE, tmp_path / "store")


# --- output formats -------------------------------------------------------------------------------
def test_json_output_has_every_field(rmq) -> None:
    result = rmq("dump-commitlog", str(STORE), "--count", "3", "--json", "--body", "hex", check=True)
    rows = json.loads(result.stdout)
    expected = records()[:3]
    assert [r["position"] for r in rows] == [e["position"] for e in expected]
    for row, exp in zip(rows, expected, strict=True):
        assert row["offsetMsgId"] == exp["offsetMsgId"]
        assert row["properties"] == exp["properties"]
        assert len(bytes.fromhex(row["body"])) == (exp.get("decompressedLength") or exp["bodyLength"])
        assert "propertiesRaw" not in row


def test_jsonl_yaml_and_piped_table_agree(rmq) -> None:
    args = ["dump-commitlog", str(STORE), "--count", "4"]
    jsonl = [json.loads(x) for x in rmq(*args, "--output", "jsonl", check=True).stdout.splitlines()]
    docs = yaml.safe_load(rmq(*args, "--output", "yaml", check=True).stdout)
    assert [r["position"] for r in jsonl] == [r["position"] for r in docs]
    lines = rmq(*args, check=True).stdout.splitlines()  # CliRunner output is not a terminal: tab-separated
    header = lines[0].split("\t")
    assert header[:4] == ["position", "topic", "queueId", "queueOffset"]
    assert len(lines) == 5
    first = dict(zip(header, lines[1].split("\t"), strict=True))
    assert first["offsetMsgId"] == jsonl[0]["offsetMsgId"]
    assert int(first["position"]) == jsonl[0]["position"]


def test_filters(rmq) -> None:
    expected = records()
    target = next(r for r in expected if r["properties"].get("KEYS"))
    key = target["properties"]["KEYS"].split(" ")[0]
    rows = json.loads(rmq("dump-commitlog", str(STORE), "--key", key, "--json", check=True).stdout)
    assert target["position"] in [r["position"] for r in rows]
    assert all(key in r["keys"] or r["uniqKey"] == key for r in rows)
    topic, qid = target["topic"], target["queueId"]
    rows = json.loads(
        rmq("dump-commitlog", str(STORE), "-t", topic, "-q", str(qid), "--json", check=True).stdout
    )
    want = [r["position"] for r in expected if r["topic"] == topic and r["queueId"] == qid]
    assert [r["position"] for r in rows] == want
    since = expected[10]["storeTimestamp"]
    rows = json.loads(
        rmq("dump-commitlog", str(STORE), "--since", str(since), "--count", "2", "--json", check=True).stdout
    )
    assert all(r["storeTimestamp"] >= since for r in rows) and len(rows) == 2
    rows = json.loads(
        rmq(
            "dump-commitlog",
            str(STORE),
            "--from",
            str(expected[5]["position"]),
            "-n",
            "1",
            "--json",
            check=True,
        ).stdout
    )
    assert rows[0]["position"] == expected[5]["position"]


def test_iso_time_and_bad_time(rmq_proc, rmq) -> None:
    rows = json.loads(
        rmq("dump-commitlog", str(STORE), "--until", "1970-01-02T00:00:00Z", "--json", check=True).stdout
    )
    assert rows == []
    proc = rmq_proc("dump-commitlog", str(STORE), "--since", "yesterday-ish")
    assert proc.returncode == UsageError.exit_code
    assert proc.stderr.count("\n") == 1 and "--since" in proc.stderr


def test_single_commitlog_file(rmq) -> None:
    first_file = sorted((STORE / "commitlog").iterdir())[0]
    rows = json.loads(rmq("dump-commitlog", str(first_file), "--count", "2", "--json", check=True).stdout)
    assert [r["position"] for r in rows] == [r["position"] for r in records()[:2]]


def test_other_commands_json(rmq) -> None:
    cq = json.loads(
        rmq("dump-cq", str(STORE), "-t", "TopicA", "-q", "0", "-n", "2", "--json", check=True).stdout
    )
    assert [u["queueOffset"] for u in cq] == [0, 1]
    cfg = json.loads(rmq("dump-config", str(STORE), "--json", check=True).stdout)
    assert set(cfg) == {"topics", "subscriptions", "offsets", "delay"}
    facts = json.loads((FIXTURE / "expected.json").read_text(encoding="utf-8"))["variants"]["store"]["facts"]
    table = facts["config_files"]["parsed"]["consumerOffset.json"]["offsetTable"]
    want = {
        (k.rpartition("@")[0], k.rpartition("@")[2], int(q), o)
        for k, qs in table.items()
        for q, o in qs.items()
    }
    assert {(r["topic"], r["group"], r["queueId"], r["offset"]) for r in cfg["offsets"]} == want
    lines = rmq("stats", str(STORE), "--output", "jsonl", check=True).stdout.splitlines()
    kinds = {json.loads(line)["section"] for line in lines}
    assert {"commitlog", "topic", "queue", "files"} <= kinds
    entries = json.loads(rmq("dump-index", str(STORE), "--json", check=True).stdout)["entries"]
    assert len(entries) == sum(f["indexCount"] - 1 for f in facts["index"]["files"])


# --- exit codes and errors ------------------------------------------------------------------------
def test_version_and_help(rmq_proc) -> None:
    assert rmq_proc("--version").stdout.startswith("rmq ")
    proc = rmq_proc("--help")
    assert proc.returncode == 0 and "dump-commitlog" in proc.stdout


def test_admin_commands_are_found_by_alias_and_in_any_case(rmq_proc) -> None:
    """As ``MQAdminStartup.findSubCommand``: name or ``commandAlias()``, case ignored; store
    commands only by their exact name."""
    for typed, shown in (
        ("QueryMsgTraceById", "query a message trace"),
        ("querymsgtracebyid", "query a message trace"),
        ("deleteAccessConfig", "Delete Acl Config Account in broker"),
        ("TOPICLIST", "Fetch all topic list from name server"),
    ):
        proc = rmq_proc(typed, "--help")
        assert proc.returncode == 0 and shown in proc.stdout, (typed, proc.stderr)
    assert rmq_proc("VERIFY", "--help").returncode == UsageError.exit_code


def test_bad_flag_is_usage_error(rmq_proc) -> None:
    proc = rmq_proc("dump-commitlog", str(STORE), "--no-such-flag")
    assert proc.returncode == 2
    assert proc.stderr.startswith("rmq: error: ") and proc.stderr.count("\n") == 1
    assert rmq_proc("dump-commitlog", str(STORE), "--body", "rot13").returncode == 2
    assert rmq_proc("dump-cq", str(STORE)).returncode == UsageError.exit_code  # needs --topic and --queue
    assert rmq_proc("dump-index", str(STORE), "--key", "k").returncode == UsageError.exit_code


def test_missing_store_is_not_found(tmp_path: Path, rmq_proc) -> None:
    for args in (
        ["dump-commitlog", str(tmp_path / "nope")],
        ["stats", str(tmp_path / "nope")],
        ["dump-checkpoint", str(tmp_path / "nope")],
        ["dump-cq", str(STORE), "-t", "NoSuchTopic", "-q", "0"],
    ):
        proc = rmq_proc(*args)
        assert proc.returncode == NotFoundError.exit_code, args
        assert proc.stderr.startswith("rmq: error: ") and proc.stderr.count("\n") == 1
        assert "Traceback" not in proc.stderr


def test_corrupt_record_stops_with_file_and_offset(store_copy: Path, rmq_proc) -> None:
    victim = records()[7]
    path = store_copy / "commitlog" / victim["file"]
    data = bytearray(path.read_bytes())
    data[victim["filePos"] + 4 : victim["filePos"] + 8] = b"\x00\x11\x22\x33"  # the magic code
    path.write_bytes(bytes(data))
    proc = rmq_proc("dump-commitlog", str(store_copy), "--output", "jsonl")
    assert proc.returncode == CorruptDataError.exit_code
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert victim["file"] in proc.stderr and f"at byte {victim['filePos']}" in proc.stderr
    assert len(proc.stdout.splitlines()) == 7  # the records before it were printed

    proc = rmq_proc("dump-commitlog", str(store_copy), "--output", "jsonl", "--skip-corrupt")
    assert proc.returncode == CorruptDataError.exit_code, proc.stderr  # all read, and still corrupt
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    corrupt = [r for r in rows if r.get("kind") == "corrupt"]
    assert len(corrupt) == 1 and corrupt[0]["position"] == victim["position"]
    assert "warning" in proc.stderr and victim["file"] in proc.stderr
    assert len(rows) - 1 == len(records()) - 1  # every other record is still there

    assert rmq_proc("stats", str(store_copy)).returncode == CorruptDataError.exit_code


def test_broken_pipe_is_quiet() -> None:
    with subprocess.Popen(
        [*RMQ, "dump-commitlog", str(STORE), "--output", "jsonl", "--body", "hex"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.readline()
        proc.stdout.close()
        err = proc.stderr.read()
        code = proc.wait(timeout=60)
    assert err == b""
    assert code == 141


@pytest.mark.parametrize(
    ("words", "cword", "expected", "absent"),
    [
        ("rmq topicL", 1, {"topicList"}, {"topicRoute"}),
        ("rmq dump-c", 1, {"dump-commitlog", "dump-cq", "dump-checkpoint", "dump-config"}, {"stats"}),
        ("rmq topicList --", 2, {"--namesrvAddr", "--clusterModel", "--json"}, {"--topic"}),
        ("rmq pipeline ", 2, {"export", "stats", "rebuild", "search"}, set()),
    ],
)
def test_bash_completion(words: str, cword: int, expected: set[str], absent: set[str]) -> None:
    """What `eval "$(_RMQ_COMPLETE=bash_source rmq)"` asks the program for on each <TAB>."""
    import os

    env = {**os.environ, "_RMQ_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
    out = subprocess.run(
        [str(Path(sys.executable).parent / "rmq")], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert expected <= set(out) and not absent & set(out), out


def test_every_registered_command_resolves_and_admin_commands_are_declared_once() -> None:
    import typer as _typer

    from rmqcli.cli import commands
    from rmqcli.cli.admin.registry import AdminCommand

    group = _typer.main.get_command(app)
    ctx = group.make_context("rmq", ["--help"], resilient_parsing=True)
    assert group.list_commands(ctx) == list(commands.ALL)
    for name in commands.ALL:
        command = group.get_command(ctx, name)
        assert command is not None and command.name == name
    for name in commands.ADMIN:
        declared = commands.resolve(name)
        assert isinstance(declared, AdminCommand) and declared.name == name
        assert group.get_command(ctx, name).help == declared.description
    assert group.get_command(ctx, "topicList").help == "Fetch all topic list from name server"


def test_listings_read_admin_descriptions_without_building_the_commands() -> None:
    """``rmq --help`` and ``rmq`` show an admin command's description from its declaration: the
    same line the built command gives, and nothing is built for it."""
    import typer as _typer

    from rmqcli.cli import commands

    group = _typer.main.get_command(app)
    ctx = group.make_context("rmq", ["--help"], resilient_parsing=True)
    lines = {name: group.summary(ctx, name, 60) for name in commands.ADMIN}
    assert not set(commands.ADMIN) & set(group.commands)
    for name, line in lines.items():
        assert line == group.get_command(ctx, name).get_short_help_str(60), name


# the packages of mqadmin's SubCommand classes (rocketmq-tools 4.9.8, org.apache.rocketmq.tools.command)
MQADMIN_PACKAGES = {"acl", "broker", "cluster", "connection", "consumer", "export", "message", "namesrv",
                    "offset", "producer", "queue", "stats", "topic"}  # fmt: skip


def test_admin_declarations_are_well_formed() -> None:
    """Each admin command: a description, mqadmin's package (4.9.8's for its commands), options whose
    names and flags are its own and do not clash with the ones every admin command gets (-n, --json,
    --access-key, --secret-key)."""
    from rmqcli.cli import commands
    from rmqcli.cli.admin.registry import COMMON_OPTIONS, MQADMIN_ORDER

    for name in commands.ADMIN:
        declared = commands.resolve(name)
        assert declared.group.isidentifier() and declared.group.islower() and declared.description, name
        assert name not in MQADMIN_ORDER or declared.group in MQADMIN_PACKAGES, name
        options = [*declared.options, *COMMON_OPTIONS]
        names = [o.name for o in options]
        flags = [f for o in options for f in o.flags]
        assert len(set(names)) == len(names) and len(set(flags)) == len(flags), name
        assert all(o.kind in (str, int, bool) for o in options), name


def test_json_data_of_beans_and_results() -> None:
    """One conversion for --json: a JSON bean as fastjson writes it (Java names, sorted, nulls left
    out), any other dataclass field by field in camelCase, mapping keys as strings."""
    from dataclasses import dataclass

    from rmqcli.cli.render import camel_dict
    from rmqcli.remoting import json_body as jb

    @dataclass
    class Result:
        broker_addr: str
        queue_ids: dict[int, str]
        config: jb.TopicConfig | None

    config = jb.TopicConfig(topic_name="T", read_queue_nums=2, write_queue_nums=2)
    data = camel_dict(Result("h:1", {0: "a", 1: "b"}, config))
    assert list(data) == ["brokerAddr", "queueIds", "config"]
    assert data["queueIds"] == {"0": "a", "1": "b"}
    assert list(data["config"]) == sorted(data["config"]) and "attributes" not in data["config"]
    assert data["config"]["readQueueNums"] == 2 and data["config"]["topicName"] == "T"
    assert camel_dict(Result("h:1", {}, None))["config"] is None


def modules_loaded(argv: list[str], prefixes: tuple[str, ...]) -> list[str]:
    """The modules named ``prefixes*`` that a fresh interpreter has loaded after ``rmq ARGV``."""
    code = (
        "import json, sys\n"
        "from rmqcli.cli.main import invoke\n"
        f"invoke({argv!r})\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({prefixes!r}))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_one_command_imports_only_its_own_module() -> None:
    """The admin declarations (plain data, the registry's one list) are read to find the command;
    nothing else of another command is: no renderer, no store command, no pipeline."""
    loaded = set(modules_loaded(["topicList", "--help"], ("rmqcli.cli.",)))
    assert "rmqcli.cli.admin.topic" in loaded
    others = {
        m for m in loaded if not m.startswith("rmqcli.cli.admin.") or m.startswith("rmqcli.cli.admin.format")
    }
    assert others <= {
        "rmqcli.cli",
        "rmqcli.cli.admin",
        "rmqcli.cli.main",
        "rmqcli.cli.commands",
        "rmqcli.cli.common",
        "rmqcli.cli.render",
    }
    assert not {"rmqcli.cli.pipeline", "rmqcli.cli.verify", "rmqcli.cli.serve"} & loaded


def test_admin_help_imports_no_admin_operation() -> None:
    """Declarations name their calls and renderers lazily: help needs none of them."""
    assert modules_loaded(["updateAclConfig", "--help"], ("rmqcli.admin", "rmqcli.remoting.")) == []
