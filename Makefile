# Two entry points: `make app` serves the app on the embedded defaults,
# `make test` runs the whole suite. Both build a project-local .venv first.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --no-cache-dir --disable-pip-version-check
STAMP  := $(VENV)/.installed

.PHONY: app test test-fast system-deps bench clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade "pip>=24"
	$(PIP) install -c constraints.txt -e '.[test]'
	touch $(STAMP)

app: $(STAMP)
	$(VENV)/bin/panel serve app --address 127.0.0.1 --port $${PORT:-5006}

# Browser tests need Debian's Chromium; the glyph build test needs one CJK font.
# Installed only when we are root and they are missing (CI, fresh dev boxes).
system-deps:
	@if ! command -v chromium >/dev/null 2>&1 || ! fc-list 2>/dev/null | grep -qi uming; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-arphic-uming fontconfig >/dev/null; \
	  else echo "note: chromium / fonts-arphic-uming missing and not root: browser and font tests will skip"; fi; \
	fi

test: $(STAMP) system-deps
	$(PY) -m pytest -q

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow and not browser and not notebook"

bench: $(STAMP)
	for f in benchmarks/*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info
