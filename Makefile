# Commands on a fresh machine with Python 3.11 and make:
#   make demo        -> create .venv, install everything, run `lumion demo`
#   make test        -> create .venv, install everything, run ruff, the docs build and the whole
#                       test suite on every core (what CI runs: .ci/run)
#   make test-quick  -> the contributor's loop: the suite without the tests marked slow, in parallel
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# pytest-xdist workers: auto = one per CPU; `make test JOBS=1` runs on one process. worksteal:
# a worker that runs out takes queued tests from the other (tests/conftest.py puts the heaviest
# files first), so no worker idles while the other still has a long queue
JOBS   ?= auto
PYTEST := $(BIN)/python -m pytest -n $(JOBS) --dist worksteal

.PHONY: demo test test-quick chromium kernels lint docs bench install clean

# pip shows its progress bar and what it installs (a first install takes a few minutes)
$(STAMP): pyproject.toml
	@echo "== creating $(VENV) and installing lumion with its layout and dev extras (numpy, scipy, gdsfactory, pytest, ...)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --progress-bar on --upgrade pip
	$(BIN)/python -m pip install --progress-bar on -e '.[layout,dev]'
	touch $(STAMP)

install: $(STAMP)

# kernels first: the demo's calibration would otherwise compile the numba kernels without a word
demo: $(STAMP) kernels
	$(BIN)/lumion demo

lint: $(STAMP)
	$(BIN)/ruff check .

# the docs site and the API reference from the docstrings (mkdocs.yml); warnings are errors
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --quiet --site-dir build/site

# the dashboard's browser test needs Debian's chromium + chromedriver: installed once as root,
# only those two (--no-install-recommends); LUMION_NO_APT=1 declines and that one test skips
chromium:
	@.ci/install-chromium

# the first solve on a fresh clone compiles the numba kernels: done once here, before any
# test with a short timeout could pay it (photonics/warm_kernels.py)
kernels: $(STAMP)
	@$(BIN)/python -m photonics.warm_kernels

test: lint docs chromium kernels
	@echo "== the whole test suite on $(JOBS) workers"
	$(PYTEST)

# the contributor's loop: no ruff/docs, no tests marked slow (pyproject.toml [tool.pytest.ini_options])
test-quick: $(STAMP) kernels
	$(PYTEST) -m "not slow"

bench: $(STAMP)
	$(BIN)/python -m pip install --progress-bar on -e '.[layout,dev,bench]'
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) lumion-demo build *.egg-info
