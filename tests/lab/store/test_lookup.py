"""lab.store.lookup: how functions on stored runs find their store and run."""
import pytest

from lab.store import RunNotFoundError, RunStore
from lab.store.lookup import is_record, is_store, load_run, open_store, run_id_of, run_stamp


def test_open_store_takes_none_a_store_or_a_path(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_RUNS_DIR", str(tmp_path / "default"))
    assert open_store().root == tmp_path / "default"
    assert open_store(None).root == tmp_path / "default"
    assert open_store(tmp_path / "elsewhere").root == tmp_path / "elsewhere"
    assert open_store(str(tmp_path / "elsewhere")).root == tmp_path / "elsewhere"
    store = RunStore(tmp_path / "mine")
    assert open_store(store) is store
    with pytest.raises(ValueError, match=r"store must be a lab.RunStore, a folder path or None .*Got int instead"):
        open_store(42)


def test_a_run_is_an_id_or_a_record(store, make_run):
    run_id = make_run()
    rec = store.load(run_id)
    assert run_id_of(run_id) == run_id and run_id_of(rec) == run_id
    assert load_run(rec) is rec                                   # a record is not read again
    assert load_run(run_id, store).run_id == run_id
    assert load_run(run_id, store.root).run_id == run_id          # the store as a folder path
    assert is_record(rec) and not is_record(run_id) and is_store(store) and not is_store(rec)
    with pytest.raises(RunNotFoundError, match="no run 'nope'"):
        load_run("nope", store)
    with pytest.raises(ValueError, match=r"run must be a run id .* Got int instead"):
        run_id_of(3)


def test_a_run_stamp_changes_when_the_run_is_written_and_is_none_without_its_meta(store, tmp_path):
    writer = store.create({"dataset": "digits", "backbone": "mlp"})
    folder = store.path(writer.run_id)
    first = run_stamp(folder)
    assert first is not None and first[0] == str(folder.resolve()) and run_stamp(folder) == first
    writer.finish("finished")                      # rewrites meta.json: what was cached under the old stamp is stale
    assert run_stamp(folder) not in (None, first)
    assert run_stamp(tmp_path / "no-such-run") is None
