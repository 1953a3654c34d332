# agent-guards: `make demo` and `make test` set up .venv themselves (python3 -m venv).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
export LANGGRAPH_STRICT_MSGPACK ?= true
export LANGSMITH_TRACING ?= false

.DEFAULT_GOAL := help
.PHONY: help demo test floors lint format type bench clean

help: ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

# The venv is rebuilt when pyproject.toml changes: each stamp depends on it.
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.demo.stamp: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[sqlite]"
	@touch $@

$(VENV)/.dev.stamp: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[dev]"
	@touch $@ $(VENV)/.demo.stamp

demo: $(VENV)/.demo.stamp ## run the built-in scenarios (SQLite, scripted model, no network)
	$(BIN)/agent-guards demo

test: $(VENV)/.dev.stamp ## run the test suite (starts a throwaway PostgreSQL itself)
	$(BIN)/python -m pytest

FLOORS := .venv-floors
floors: ## the unit suite on the lowest declared versions (.ci/floors.txt), in its own venv
	rm -rf $(FLOORS) && $(PYTHON) -m venv $(FLOORS)
	$(FLOORS)/bin/python -m pip install -q --upgrade pip
	$(FLOORS)/bin/python -m pip install -q -e ".[sqlite,agents]" pytest pytest-asyncio hypothesis -c .ci/floors.txt
	$(FLOORS)/bin/python -m pytest -q -p no:cacheprovider -o addopts="--strict-markers" -m "not postgres" tests/unit

lint: $(VENV)/.dev.stamp ## ruff format --check and ruff check
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

format: $(VENV)/.dev.stamp ## apply ruff format and safe fixes
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

type: $(VENV)/.dev.stamp ## mypy --strict on the package (the reference graph included)
	$(BIN)/mypy

bench: $(VENV)/.dev.stamp ## benchmarks: a table of ratios measured in one run (+ bench-results.json)
	$(BIN)/python -m benchmarks.run

clean: ## remove the venv and caches
	rm -rf $(VENV) $(FLOORS) .pytest_cache .mypy_cache .ruff_cache .agent_guards .langgraph_api
