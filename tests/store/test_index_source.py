"""``rmqcli.ops.index_source``: what ``rmq dump-index`` reads for a store or for one index file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rmqcli.errors import NotFoundError
from rmqcli.ops.index_source import open_index_source, uncapped_index


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fixtures.generate import generate

    root = tmp_path_factory.mktemp("index-source") / "store"
    generate(root, "small", seed=1)
    return root


def test_a_store_gives_all_its_index_files_and_its_commitlog(store: Path) -> None:
    source = open_index_source(store, None)
    names = sorted(p.name for p in (store / "index").iterdir())
    assert [f.path.name for f in source.files] == names and len(names) > 1
    assert source.commitlog is not None and source.commitlog.files


def test_an_index_file_inside_a_store_reads_that_stores_commitlog(store: Path) -> None:
    first = sorted((store / "index").iterdir())[0]
    source = open_index_source(first, None)
    assert [f.path for f in source.files] == [first]
    assert source.commitlog is not None


def test_an_index_file_on_its_own_has_no_commitlog(store: Path, tmp_path: Path) -> None:
    lone = tmp_path / "copy" / "index" / "20231114221320001"
    lone.parent.mkdir(parents=True)
    shutil.copy(sorted((store / "index").iterdir())[0], lone)
    source = open_index_source(lone, None)
    assert len(source.files) == 1 and source.commitlog is None


def test_what_is_not_there(store: Path, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="no such store or file"):
        open_index_source(tmp_path / "nothing", None)
    bare = tmp_path / "bare"
    (bare / "commitlog").mkdir(parents=True)
    with pytest.raises(NotFoundError, match="no index directory"):
        open_index_source(bare, None)
    with pytest.raises(NotFoundError, match="no such broker.conf"):
        open_index_source(store, tmp_path / "broker.conf")


def test_the_uncapped_walk_is_the_brokers_walk(store: Path) -> None:
    """The offsets ``IndexService.query`` returns (newest first), cut where ``max_num`` says."""
    from rmqcli.store import Store

    capped = Store.open(store).index.query("TopicB", "hot-key")
    files = open_index_source(store, None).files
    assert len(capped) > 10
    assert uncapped_index(files).query("TopicB", "hot-key", max_num=10_000) == capped
    assert uncapped_index(files).query("TopicB", "hot-key", max_num=10) == capped[:10]
