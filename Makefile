# Entry points: `make app` serves the app on the embedded defaults, `make lab` opens
# JupyterLab on the notebooks, `make test` runs the whole suite, `make docs` builds the
# docs site. Each builds a project-local .venv first (pinned by constraints.txt).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --no-cache-dir --disable-pip-version-check
STAMP  := $(VENV)/.installed
LAB_STAMP := $(VENV)/.installed-lab

.PHONY: app lab test test-fast docs system-deps bench clean

# The test extra includes the lab and sinks extras (their tests run in the suite).
# Then one small UMAP fit: numba compiles umap's and pynndescent's functions into their cache in the venv once
# (18 s of CPU), not in each of the suite's first processes that lays out an embedding.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade "pip>=24"
	$(PIP) install -c constraints.txt -e '.[test]'
	$(PY) -c "import numpy, umap; umap.UMAP(n_neighbors=10, n_epochs=20).fit(numpy.random.default_rng(0).random((200, 16)))"
	touch $(STAMP)

# jupyter-config: JupyterLab's settings override that turns commsOverSubshells off (comm messages on the kernel's
# main thread, jupyterlab/jupyterlab#19719), into the venv's share/jupyter/lab/settings/overrides.d/.
$(LAB_STAMP): pyproject.toml constraints.txt jupyter-config/pyproject.toml jupyter-config/lab/settings/overrides.d/layerscope.json
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade "pip>=24"
	$(PIP) install -c constraints.txt -e '.[lab]' ./jupyter-config
	touch $(LAB_STAMP)

app: $(STAMP)
	$(VENV)/bin/panel serve app --address 127.0.0.1 --port $${PORT:-5006}

# JupyterLab on notebooks/, reachable from this machine only (use an SSH tunnel from elsewhere).
lab: $(LAB_STAMP)
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 --port $${LAB_PORT:-8888} --ServerApp.root_dir=notebooks

# Browser tests need Debian's Chromium; the glyph build test needs one CJK font of the
# targets, the zoo recipe test one of its source fonts (Sawarabi Mincho, under 1 MB).
# Installed only when we are root and they are missing (CI, fresh dev boxes).
system-deps:
	@if ! command -v chromium >/dev/null 2>&1 || ! fc-list 2>/dev/null | grep -qi uming \
	    || ! fc-list 2>/dev/null | grep -qi "sawarabi mincho"; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-arphic-uming fonts-sawarabi-mincho fontconfig >/dev/null; \
	  else echo "note: chromium / fonts-arphic-uming / fonts-sawarabi-mincho missing and not root: browser and font tests will skip"; fi; \
	fi

# Two or more workers (pytest-xdist; tests/conftest.py gives each its share of the cores): browser,
# notebook and server tests spend much of their time waiting, so on 2 cores two workers nearly halve it.
# --dist loadfile --no-loadscope-reorder: whole files, longest first (tests/file_seconds.json), each to the next
# worker free. --suite-report: the wall time and the 20 slowest tests go to test-artifacts/suite.json (.ci/run prints it).
# Written with '=': as a separate word, an existing suite.json reads as a test path and pytest skips tests/conftest.py.
# compileall first: where PYTHONDONTWRITEBYTECODE is set (these machines, CI) every process the suite starts
# (kernels, servers, Dask workers, the CLI) compiled lab/ and app/ from source again, about 1 s of CPU each.
test: $(STAMP) system-deps
	$(PY) -m compileall -q -j 0 lab app tests
	$(PY) -m pytest -q -n auto --maxprocesses 4 --dist loadfile --no-loadscope-reorder --suite-report=test-artifacts/suite.json

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow and not browser and not notebook"

# The docs site into site/ (offline; --strict: a broken link or API reference fails), with the two
# lessons run and written as pages (docs/_lessons.py). The test extra brings the docs extra. Preview
# with `.venv/bin/mkdocs serve`.
docs: $(STAMP)
	LAYERSCOPE_DOCS_LESSONS=1 $(VENV)/bin/mkdocs build --strict --site-dir site

bench: $(STAMP)
	for f in benchmarks/*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) build site *.egg-info
