# The two set-up commands of the README: `make evaluate` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DOMAINS := $(wildcard sre/pyproject.toml ciso/pyproject.toml finops/pyproject.toml)
# Cross-cutting plugin distributions (agents such as itbench-stratus), installed and tested alike.
PLUGINS := $(wildcard plugins/*/pyproject.toml)
EDITABLES := -e '.[dev,ray]' $(foreach d,$(DOMAINS) $(PLUGINS),-e './$(dir $(d))[test]')
RUNS := runs
STAMP_TIME := $(shell date -u +%Y%m%dT%H%M%S)

.PHONY: install system-deps evaluate test check lint typecheck validate bench clean

install: $(STAMP)

# Debian ships venv support separately (python3-venv): install it when venv creation fails.
$(BIN)/python:
	$(PY) -m venv $(VENV) || { rm -rf $(VENV); sh scripts/system-deps.sh venv && $(PY) -m venv $(VENV); }

$(STAMP): pyproject.toml constraints.txt $(DOMAINS) $(PLUGINS) scripts/system-deps.sh | $(BIN)/python
	sh scripts/system-deps.sh
	$(BIN)/python -m pip install --quiet --upgrade pip
	PYTHONWARNINGS=ignore $(BIN)/python -m pip install --quiet -c constraints.txt $(EDITABLES)
	touch $@

system-deps:
	sh scripts/system-deps.sh

## A real smoke evaluation: the scenarios tagged `smoke` (one per domain), oracle and baseline.
evaluate: install
	$(BIN)/itbench evaluate --agent oracle --tag smoke --out $(RUNS)/smoke-$(STAMP_TIME)-oracle
	$(BIN)/itbench evaluate --agent baseline --tag smoke --out $(RUNS)/smoke-$(STAMP_TIME)-baseline
	$(BIN)/itbench report $(RUNS)/smoke-$(STAMP_TIME)-oracle $(RUNS)/smoke-$(STAMP_TIME)-baseline --out $(RUNS)/smoke-$(STAMP_TIME)-report

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy

check: lint typecheck

# One pytest process per suite: each domain's tests are a package of their own named `tests`.
# Live SRE shops, whose verdicts depend on their timing, run alone: the SRE suite, then the
# core's llm runs (one of them on an SRE scenario). Everything else (toy trials, moto servers,
# Rego engines, a Ray cluster, throwaway virtualenvs) then runs in lanes side by side, the
# suites of a lane (joined by ` ; `) one after another.
empty :=
space := $(empty) $(empty)
lane = "$(subst $(space), ; ,$(strip $(1)))"
LIVE := tests/test_llm_domains.py
# The core's other tests in four lanes of about equal length (each lane one pytest process).
CORE_LANE_1 := tests/test_cluster.py tests/test_process_executor.py tests/test_integrity.py
CORE_LANE_2 := tests/test_crash.py tests/test_scaffold.py tests/test_imports.py tests/test_docs.py \
	tests/test_report.py
CORE_LANE_3 := tests/test_redteam.py tests/test_redteam_core.py tests/test_registration.py \
	tests/test_llm_agent.py tests/test_registry.py
CORE_REST := tests $(foreach t,$(LIVE) $(CORE_LANE_1) $(CORE_LANE_2) $(CORE_LANE_3),--ignore=$(t))
SRE_SUITE := $(wildcard sre/tests)
# The other domain and plugin suites in two lanes: the first alone, the others in turn.
OTHER_SUITES := $(filter-out $(SRE_SUITE),$(foreach d,$(DOMAINS) $(PLUGINS),$(wildcard $(dir $(d))tests)))
LANES := "$(CORE_REST)" "$(CORE_LANE_1)" "$(strip $(CORE_LANE_2))" "$(strip $(CORE_LANE_3))" \
	$(call lane,$(firstword $(OTHER_SUITES))) $(call lane,$(wordlist 2,99,$(OTHER_SUITES)))

test: install check
	sh scripts/run-suites.sh $(BIN)/python $(SRE_SUITE) $(LIVE) -- $(LANES)

## Oracle passes and noop fails every scenario of the catalog (long; not part of `make test`).
validate: install
	$(BIN)/itbench validate --workers 2

bench: install
	for b in benchmarks/[!_]*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info */*.egg-info .pytest_cache .mypy_cache .ruff_cache
