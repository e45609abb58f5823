# `make run` and `make test` each create the virtual environment, install the package with
# its pinned lower bounds (pyproject.toml) and do their job.  `.ci/run` calls `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install run test lint format bench clean

# One BLAS thread per process: the suite runs two pytest workers on two cores, and
# multithreaded eigenvalue solves slow down by ~50x when the cores are already busy.
export OMP_NUM_THREADS ?= 1
export OPENBLAS_NUM_THREADS ?= 1

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev,sweep,torch]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	MPLBACKEND=Agg $(PY) -m stability.cli.main_job

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	MPLBACKEND=Agg $(PY) -m pytest -n 2 --dist loadgroup --durations=15

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
