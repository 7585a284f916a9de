# Two commands on a fresh machine with Python 3.11 and make:
#   make demo   -> create .venv, install everything, run `lumion demo`
#   make test   -> create .venv, install everything, run ruff and the whole test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test lint docs bench install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[layout,dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/lumion demo

lint: $(STAMP)
	$(BIN)/ruff check .

# the docs site and the API reference from the docstrings (mkdocs.yml); warnings are errors
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --quiet --site-dir build/site

test: lint docs
	@# the dashboard's browser test needs Debian's chromium + chromedriver (installed once, as root)
	command -v chromium >/dev/null && command -v chromedriver >/dev/null || (apt-get update && apt-get install -y chromium chromium-driver) || echo "chromium could not be installed (not root?): the dashboard's browser test will skip"
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[layout,dev,bench]'
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) lumion-demo build *.egg-info
