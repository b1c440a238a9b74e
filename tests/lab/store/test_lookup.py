"""lab.store.lookup: how functions on stored runs find their store and run; and the old call forms
(store first, or store by position) that still work for one release with a DeprecationWarning."""
import inspect

import pytest

from lab.store import RunNotFoundError, RunStore
from lab.store.old_calls import store_was_first, store_was_positional
from lab.store.lookup import is_record, is_store, load_run, open_store, run_id_of


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


@store_was_first
def _first(run, epoch=None, *, store=None):
    return run, epoch, store


@store_was_positional("store", "execute")
def _later(run, path, *, store=None, execute=False, rerun=False):
    return run, path, store, execute, rerun


def test_the_new_forms_do_not_warn(store, recwarn):
    assert _first("r", 2, store=store) == ("r", 2, store)
    assert _first("r") == ("r", None, None)
    assert _later("r", "p", store=store, execute=True) == ("r", "p", store, True, False)
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]


def test_the_store_first_form_warns_and_names_the_new_call(store):
    with pytest.warns(DeprecationWarning, match=r"_first\(store, \.\.\.\) with the store first is deprecated .*"
                                                r"call \S*test_lookup\._first\(run, epoch=None, \*, store=None\) "
                                                r"instead") as caught:
        assert _first(store, "r", 2) == ("r", 2, store)
    assert caught[0].filename == __file__                         # the warning points at the caller
    with pytest.warns(DeprecationWarning):
        assert _first(None, "r", 2) == ("r", 2, None)             # None first, one positional too many


def test_the_store_by_position_form_warns(store):
    with pytest.warns(DeprecationWarning, match=r"_later\(\) with store, execute given by position is deprecated"):
        assert _later("r", "p", store, True, rerun=True) == ("r", "p", store, True, True)
    with pytest.raises(TypeError, match="store both by position and by keyword"):
        _later("r", "p", store, store=store)
    with pytest.raises(TypeError):
        _later("r", "p", store, True, "one too many")


def test_the_decorated_functions_show_their_new_signature():
    assert str(inspect.signature(_first)) == "(run, epoch=None, *, store=None)"
    assert str(inspect.signature(_later)) == "(run, path, *, store=None, execute=False, rerun=False)"
