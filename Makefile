# kvsim: `make demo` and `make test` are all a new machine needs.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
RUNTIME := $(VENV)/.installed-runtime
OUT     ?= report

.PHONY: demo test bench lint calibrate clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

# the demo needs only the package and its runtime dependencies; the tests add the dev extra
$(RUNTIME): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $(RUNTIME)

$(STAMP): pyproject.toml $(RUNTIME)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(RUNTIME)
	$(BIN)/kvsim run scenarios/default.toml --out $(OUT)

# the suite on every core (pytest-xdist); the benchmarks run alone, one at a time, so that they measure
test: $(STAMP)
	$(BIN)/python -m pytest -n auto

bench: $(STAMP)
	$(BIN)/python -m pytest -m bench -s

# regenerate the shipped cost-model parameters: kernel fit, then the step overhead on published figures
calibrate: $(STAMP)
	$(BIN)/kvsim calibrate --from-aiconfigurator --out simulator/cost/params.toml --force
	$(BIN)/kvsim calibrate simulator/cost/published.csv --free step_overhead_s --out simulator/cost/params.toml --force

lint: $(STAMP)
	$(BIN)/ruff check simulator workloads hardware tests
	$(BIN)/mypy simulator workloads hardware

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache .mypy_cache .ruff_cache
