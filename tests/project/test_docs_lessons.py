"""The docs site's lesson pages (docs/_lessons.py): ``make docs`` runs the two lessons and writes each as one page;
here shrunk to seconds."""
from __future__ import annotations

import importlib.util
import json
import re

import pytest

pytest.importorskip("mkdocs")


def test_the_lessons_become_pages_of_the_site(repo_root, tmp_path):
    from lab.lessons import NC_LESSON, SEPARATION_LAW_LESSON

    spec = importlib.util.spec_from_file_location("docs_lessons", repo_root / "docs/_lessons.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    small = dict(epochs=1, seen_per_class=6, unseen_per_class=4, train_sample_per_class=4, device="cpu",
                 save_weights=False)
    configs = {"lessons/nc_lesson.html": NC_LESSON.replace(backbone="mlp:depth=3,width=16", **small),
               "lessons/separation_law_lesson.html": SEPARATION_LAW_LESSON.replace(backbone="mlp:depth=4,width=16",
                                                                                   **small)}
    pages = hook.build_lessons(tmp_path, configs)
    assert sorted(pages) == sorted(hook.LESSONS)
    for address, path in pages.items():
        assert path == tmp_path / address
        text = path.read_text(encoding="utf-8")
        model = json.loads(re.search(r'id="ls-model">(.*?)</script>', text, re.S).group(1))
        assert model["runs"][0]["name"] == configs[address].name and model["runs"][0]["law"]
