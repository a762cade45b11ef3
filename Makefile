# The two commands of the README:
#   make demo   set up (once) and open the tour notebook in JupyterLab (HEADLESS=1: execute every demo to build/*.html)
#   make test   set up and run the whole test suite (what CI runs)
VENV := .venv
PY := $(VENV)/bin/python
NOTEBOOK ?= 01_backprop_tour.ipynb
PORT ?= 8888

.PHONY: demo demo-headless test bench notebooks setup-demo setup-test build dist clean js docs lint

setup-demo:
	scripts/setup.sh lab

setup-test:
	scripts/setup.sh test,torch,bench,lab,docs,marimo --browser

SCRATCH ?= build/notebooks

# JupyterLab served from $(SCRATCH) (build/, outside git), opening the tour (the printed link
# goes to it). The demos are copied there first (a newer committed one replaces its copy): the
# server may rewrite a notebook it opens (its kernel's name, an autosave), and a new notebook
# lands beside them, so the checkout stays as it was. The copies are trusted: their saved
# widget state then shows live views at once. Kernels talk to the server over Unix sockets
# (ipc), which only this user can open, rather than unencrypted loopback TCP (which the kernel
# warns about at every start).
demo: setup-demo
ifeq ($(HEADLESS),1)
	$(MAKE) demo-headless
else
	@mkdir -p $(SCRATCH)
	@cp -u demo_notebooks/*.ipynb $(SCRATCH)/
	@$(VENV)/bin/jupyter trust $(SCRATCH)/*.ipynb >/dev/null 2>&1 || true
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 --port=$(PORT) $(if $(filter 0,$(shell id -u)),--allow-root) \
		--ServerApp.root_dir="$(CURDIR)/$(SCRATCH)" \
		--LabApp.default_url=/lab/tree/$(NOTEBOOK) --KernelManager.transport=ipc
endif

demo-headless:
	$(PY) -m gradmagic.demo --out build

# in parallel on every core (pytest-xdist); tests/conftest.py keeps shared fixtures together
test: setup-test
	$(PY) -m pytest -q -n auto

# the documentation site, from docs/ (the tutorials are the demo notebooks, executed)
docs: setup-test
	$(PY) -m sphinx -W --keep-going -b html docs build/docs

# ruff and mypy, as tests/test_lint.py runs them
lint: setup-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

bench: setup-test
	$(PY) benchmarks/run.py

notebooks: setup-test
	$(PY) scripts/make_notebooks.py
	$(PY) -m gradmagic.demo --save --out build

build:
	$(PY) -m pip install -q build
	$(PY) -m build --outdir dist

# what a release uploads: the sdist and the wheel, built from a clean tree and checked (their
# metadata and README render on the package index); see CONTRIBUTING.md, "Releasing"
dist:
	rm -rf dist
	$(PY) -m pip install -q build twine
	$(PY) -m build --outdir dist
	$(PY) -m twine check --strict dist/*

# the live view's front-end: js/src -> gradmagic/views/static (committed; only needed after editing js/src)
js:
	cd js && npm ci --no-audit --no-fund && npm run build

clean:
	rm -rf build dist *.egg-info .pytest_cache docs/_build
