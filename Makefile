# Two commands do all set-up on a fresh machine:
#   make pipeline   install, then run the whole pipeline on the embedded synthetic cohort
#   make test       install, then run the test suite (all of it; the slowest 15 listed)
#   make test-fast  the development lane: no slow and no browser tests
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The tested versions of every package the two commands install (docs/REPRODUCIBILITY.md).
# `make lock` refreshes it after a change of pyproject.toml; `make lock UPGRADE=1` also moves
# every pin to the newest release that fits. Without the lock: pip install -e '.[dev]'.
LOCK := requirements.lock
PIP_VERSION := 26.3
UV_VERSION := 0.13.9
LOCK_PYTHON := 3.10

.PHONY: install pipeline test test-fast test-clusters lint ui lock refit-spread

# pip byte-compiles every installed file on one core (about 70 s of a 130 s install on
# 2 cores); compileall does the same work on all cores. The .pyc files matter: with
# PYTHONDONTWRITEBYTECODE set, as on our CI, every process would otherwise recompile its
# imports (13 s more per process). Files it cannot compile (torch ships a Python 3.12
# test module) are skipped, as pip skips them. The packages' own test suites (a quarter of
# the files: pandas/tests, torch/testing/_internal, ...) are never imported here: left out.
$(STAMP): pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet pip==$(PIP_VERSION)
	$(BIN)/python -m pip install --quiet --no-compile -c $(LOCK) -e '.[dev]'
	$(BIN)/python -m compileall -q -j 0 -x '/tests?/|/testing/_internal/' $$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))') >/dev/null || true
	touch $(STAMP)

install: $(STAMP)

pipeline: $(STAMP)
	$(BIN)/python -m sphr_dagster run

test: $(STAMP)
	$(BIN)/python -m ruff check .
	$(BIN)/python -m pytest -q -n 2 --durations=15

# The fit engines (docs/SCALE_OUT.md): the ray and k8s extras, a one-node SLURM cluster from
# Debian's packages (scripts/slurm_local.sh; root, apt), a local Ray cluster (the tests start
# it), the Kubernetes client against a fake API.
CLUSTER_STAMP := $(VENV)/.installed-clusters
$(CLUSTER_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --no-compile -c $(LOCK) -e '.[dev,ray,k8s]'
	touch $(CLUSTER_STAMP)

test-clusters: $(CLUSTER_STAMP)
	bash scripts/slurm_local.sh start > $(VENV)/slurm.env
	export $$(tail -n 1 $(VENV)/slurm.env) && \
		SPHR_CLUSTERS=ray,slurm $(BIN)/python -m pytest -q -rs tests/clusters \
			tests/test_refresh_pipes.py::test_kubernetes_gpu_location_validates; \
		status=$$?; bash scripts/slurm_local.sh stop >/dev/null; exit $$status

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 -m "not slow and not browser"

lint: $(STAMP)
	$(BIN)/python -m ruff check .
	$(BIN)/python -m ruff format --check .

ui: $(STAMP)
	$(BIN)/python -m sphr_dagster ui

# uv's resolver, universal (markers for every platform), keeping today's pins where they fit
lock: $(STAMP)
	$(BIN)/python -m pip install --quiet uv==$(UV_VERSION)
	$(BIN)/python -m uv pip compile pyproject.toml --extra dev --extra ray --extra k8s --universal \
		--python-version $(LOCK_PYTHON) --quiet -o $(LOCK) $(if $(UPGRADE),--upgrade,)

# The release step of the refit spread the report shows (docs/BENCHMARKS.md, "Refit spread"):
# benchmarks/real_nhanes.py --record-spread writes the study's result,
# benchmarks/results/refit_spread.json; this checks it and copies it into the package data
# sphr/risk/refit_spread.json (a wheel's report reads it offline). No benchmark writes there.
refit-spread: $(STAMP)
	$(BIN)/python scripts/release_refit_spread.py
