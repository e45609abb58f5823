# Every target creates the virtual environment first (.venv, the package installed editable
# with the lower bounds pinned in pyproject.toml): `make run` needs the package only, the
# others the dev and docs tools too.  `.ci/run` calls `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
BENCH_STAMP := $(VENV)/.installed-bench

.PHONY: install run test docs bench validation-tables figures lint format clean

# One BLAS thread per process: the suite runs two pytest workers on two cores, and
# multithreaded eigenvalue solves slow down by ~50x when the cores are already busy.
export OMP_NUM_THREADS ?= 1
export OPENBLAS_NUM_THREADS ?= 1
export MPLBACKEND ?= Agg
# Bytecode is written on first import and reused (pip installs with --no-compile, below): where
# the machine sets PYTHONDONTWRITEBYTECODE, every process would recompile every module it imports.
unexport PYTHONDONTWRITEBYTECODE

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# pip installs with --no-compile: compiling all of torch's and the docs tools' files costs ~45 s
# of a fresh `make test` (108 s -> 61 s); each module is compiled when first imported instead, and
# kept (the unexport above).
$(RUN_STAMP): pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet --no-compile -e .
	touch $(RUN_STAMP)

$(DEV_STAMP): pyproject.toml constraints.txt | $(VENV)/bin/python
	$(PY) -m pip install --quiet --no-compile -c constraints.txt -e '.[dev,docs,sweep,torch]'
	touch $(RUN_STAMP) $(DEV_STAMP)

# the curvature libraries the benchmarks time `net curvature` against (curvlinops, PyHessian)
$(BENCH_STAMP): pyproject.toml constraints.txt | $(DEV_STAMP)
	$(PY) -m pip install --quiet --no-compile -c constraints.txt -e '.[dev,docs,sweep,torch,bench]'
	touch $(BENCH_STAMP)

install: $(DEV_STAMP)

# the main job on its embedded defaults, offline; writes out/run/ (git-ignored) only
run: $(RUN_STAMP)
	$(PY) -m stability.cli.main_job

test: $(DEV_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m pytest -n 2 --dist loadgroup --durations=15

# the documentation site (docs/, mkdocs.yml) into site/ (git-ignored)
docs: $(DEV_STAMP)
	$(VENV)/bin/mkdocs build --strict

# benchmark tables: printed, and written to docs/generated/bench_*.md for the docs
bench: $(BENCH_STAMP)
	$(PY) benchmarks/run_all.py --write docs/generated

# theory-vs-trainer tables (stability validate / coupled on cpusmall) for the docs
validation-tables: $(DEV_STAMP)
	$(PY) scripts/validation_tables.py --write docs/generated

# the committed full-mode figures: every reproduction and the max-lr table, into figures/
figures: $(DEV_STAMP)
	$(VENV)/bin/stability repro --all --out-dir figures
	$(PY) -m stability.cli.main_job --table-only --out-dir figures

lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(DEV_STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean:
	rm -rf $(VENV) out site .pytest_cache .hypothesis .ruff_cache
