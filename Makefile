# Two commands do all the set-up on a fresh machine:
#   make demo   -> creates .venv, installs, runs the quick sweep, writes report + figures to results/quick
#   make test   -> creates .venv, installs, runs the test suite (bounded; CI runs exactly this)
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: install demo test test-full bench clean

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# A CPU build of torch from this machine's disk; a bare `torch` would pull a multi-GB CUDA build.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e ".[all,test]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/kvstats sweep --config experiments/quick.toml --out results/quick

# One BLAS thread per test process: two xdist workers on two cores, no oversubscription.
test: $(STAMP)
	OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n 2 --dist loadfile

# The exhaustive statistical checks at full size (minutes to hours).
test-full: $(STAMP)
	KVSTATS_TEST_SCALE=full OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n 2 --dist loadfile

clean:
	rm -rf $(VENV) results .pytest_cache
