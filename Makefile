# Two commands do all the set-up on a fresh machine:
#   make demo   -> creates .venv, installs the core (no torch/jax), runs the quick sweep,
#                  writes the report + figures to results/quick
#   make test   -> creates .venv, installs everything (torch, jax, transformers, ...) and
#                  runs the test suite (bounded; CI runs exactly this)
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
CORE := $(VENV)/.core-stamp
FULL := $(VENV)/.full-stamp

.PHONY: install install-core demo test test-full clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# The demo needs only the numpy/scipy core (pyarrow for parquet tables).
$(CORE): pyproject.toml Makefile | $(BIN)/python
	$(BIN)/pip install --quiet -e ".[parquet]"
	touch $@

# Everything: a CPU build of torch from this machine's disk first (a bare `torch` would
# pull a multi-GB CUDA build), then every extra.
$(FULL): pyproject.toml Makefile | $(BIN)/python
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e ".[all,test]"
	touch $@ $(CORE)

install-core: $(CORE)
install: $(FULL)

demo: $(CORE)
	$(BIN)/kvstats sweep --config experiments/quick.toml --out results/quick

# One BLAS thread per test process: two xdist workers on two cores, no oversubscription.
test: $(FULL)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n 2 --dist loadfile

# The exhaustive statistical checks at full size (hours).
test-full: $(FULL)
	KVSTATS_TEST_SCALE=full OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n 2 --dist loadfile

clean:
	rm -rf $(VENV) results .pytest_cache
