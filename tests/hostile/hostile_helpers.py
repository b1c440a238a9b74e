"""Assertions shared by the hostile-input tests."""
from __future__ import annotations


def assert_one_line(text: str) -> None:
    """A user-facing error: no traceback, one line (warnings aside)."""
    assert "Traceback" not in text, text
    errors = [line for line in text.strip().splitlines() if not line.startswith("warning:")]
    assert len(errors) <= 1, text



def check_kept(store, run_ids) -> None:
    listed = store.list().set_index("run_id")
    for run_id in run_ids:
        rec = store.load(run_id)
        assert rec.status == "finished" and rec.damage is None
        assert len(rec.metrics) == 6                      # 3 layers x epochs 0, 1
        assert listed.loc[run_id, "status"] == "finished"
