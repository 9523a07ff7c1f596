"""``rmq serve`` with ``enableControllerInNamesrv=true`` (5.1.1 ``NamesrvStartup``, controller.md
§4.2): the controller runs beside the NameServer on its own DLedger peer port, says so in the line
``rmq serve`` starts with, answers the controller requests there (and not on the NameServer's port),
keeps its log under ``controllerStorePath`` and stops with it; without the NameServer it is refused."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import run_rmq
from tests.support.serve import ServeProcess, free_port, write_conf


def test_the_controller_beside_the_namesrv(tmp_path: Path) -> None:
    peer = free_port()
    conf = write_conf(
        tmp_path / "broker.conf",
        enableControllerInNamesrv="true", controllerDLegerGroup="group1",
        controllerDLegerPeers=f"n0-127.0.0.1:{peer}", controllerDLegerSelfId="n0",
        controllerStorePath=str(tmp_path / "controller"), mappedFileSize="1048576",
    )  # fmt: skip
    server = ServeProcess(tmp_path / "store", conf).start()
    try:
        line = next(x for x in server.output().splitlines() if x.startswith("rmq serve: namesrv on"))
        assert f"controller n0 of group1 on 127.0.0.1:{peer} (peers n0-127.0.0.1:{peer})" in line
        meta = json.loads(
            run_rmq("getControllerMetaData", "-a", f"127.0.0.1:{peer}", "--json", check=True).stdout
        )
        addr = f"127.0.0.1:{peer}"
        assert meta == {"group": "group1", "controllerLeaderId": "n0", "controllerLeaderAddress": addr,
                        "isLeader": True, "peers": [f"n0:{addr}"]}  # fmt: skip
        on_namesrv = run_rmq("getControllerMetaData", "-a", server.namesrv)
        assert on_namesrv.returncode == 6 and "request type 1005 not supported" in on_namesrv.stderr
        assert (tmp_path / "controller" / "dledger-n0" / "currterm").is_file()
    finally:
        assert server.stop() == 0
    refused = run_rmq("serve", str(tmp_path / "store"), "--config", str(conf), "--no-namesrv")
    assert refused.returncode == 2 and refused.stderr == (
        "rmq: error: enableControllerInNamesrv=true needs the embedded NameServer: drop --no-namesrv\n"
    )
