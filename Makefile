# Every target installs what it needs first, so a fresh clone works with one command.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 9092
DATA ?= ./data
METRICS_PORT ?= 9308
FUZZ_FRAMES ?= 200000

.PHONY: install run test test-uvloop test-asyncio test-integration compat bench mypyc-trial stalls fuzz hypothesis-long lint fmt clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,dev,spark,bench]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/shoal serve --host $(HOST) --port $(PORT) --data-dir $(DATA) --metrics-port $(METRICS_PORT)

# Two workers, one test file each at a time; tests that time other clients' waits run alone.
# Those are timings on a shared machine: what fails is measured once more, alone (a real stall
# fails both times; a neighbour's burst of CPU rarely twice).
test: $(STAMP)
	$(BIN)/pytest -n 2 --dist loadfile -m "not latency"
	$(BIN)/pytest -m latency || $(BIN)/pytest -m latency --last-failed --last-failed-no-failures none

test-uvloop: $(STAMP)
	SHOAL_LOOP=uvloop $(BIN)/pytest tests/integration

test-asyncio: $(STAMP)
	SHOAL_LOOP=asyncio $(BIN)/pytest tests/integration -m "not latency"
	SHOAL_LOOP=asyncio $(BIN)/pytest tests/integration -m latency || \
		SHOAL_LOOP=asyncio $(BIN)/pytest tests/integration -m latency --last-failed \
		--last-failed-no-failures none

test-integration: $(STAMP)
	$(BIN)/pytest -m integration

compat: $(STAMP)
	$(BIN)/pytest -m compat

bench: $(STAMP)
	$(BIN)/python -m bench

# Issue 33's mypyc trial (not adopted, see bench/PROFILE.md): compile the steady-rate path's
# modules (a patched copy in build/), then alternate pure and compiled bench runs; the tree is
# pure again at the end. About 12 minutes; needs gcc and the Python headers.
mypyc-trial: $(STAMP)
	$(BIN)/python -m bench.mypyc_build build
	$(BIN)/python -m bench.mypyc_build trial --pairs 3 --only latency
	$(BIN)/python -m bench.mypyc_build trial --pairs 2 --only small,share

# Every API's worst request at full size (a million partitions...) while a probe times other
# clients' round trips; `make test` sends a smaller one per family. Minutes, not seconds.
stalls: $(STAMP)
	SHOAL_STALLS=full $(BIN)/pytest -m latency -s tests/integration/test_stalls.py \
		tests/integration/test_stalls_processes.py

# The wire fuzzer of `make test` (tests/integration/test_request_fuzzer.py), with more frames;
# SHOAL_FUZZ_SEED=N picks another sequence.
fuzz: $(STAMP)
	SHOAL_FUZZ_FRAMES=$(FUZZ_FRAMES) $(BIN)/pytest -s tests/integration/test_request_fuzzer.py

# Every test that uses Hypothesis, with the long profile: 20 times its `make test` budget.
hypothesis-long: $(STAMP)
	HYPOTHESIS_PROFILE=long $(BIN)/pytest -n 2 --dist loadfile \
		$(shell grep -l '^from hypothesis' tests/unit/*.py tests/integration/*.py)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

fmt: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache
