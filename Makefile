# Two commands do all set-up on a fresh machine with python3 (>= 3.11) and make:
#   make demo   — the offline demo on the embedded default (SQLite + diskcache)
#   make test   — lint, types and the full test suite (which builds the docs site
#                 strictly and runs every block of its pages: tests/product)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.stm-installed
SRC    := stm_memory integrations tests benchmarks

.PHONY: install demo test lint typecheck pytest docs bench frontier record-cassettes clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	@touch $(STAMP) $(DEMO_STAMP)

install: $(STAMP)

# The demo needs only the OpenAI client and the CLI: on a fresh clone it installs in
# about 20 s instead of the suite's minutes (dev includes both, so it counts too).
DEMO_STAMP := $(VENV)/.stm-demo-installed

$(DEMO_STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e ".[openai,cli]"
	@touch $(DEMO_STAMP)

# The demo keeps its store in stm-demo/ (made anew each run), so that
# `stm-memory --database-url sqlite:///stm-demo/run/stm.db savings` reads its receipt.
demo: $(DEMO_STAMP)
	$(BIN)/stm-memory demo --store stm-demo

lint: $(STAMP)
	$(BIN)/ruff check $(SRC)
	$(BIN)/ruff format --check $(SRC)

typecheck: $(STAMP)
	$(BIN)/mypy --strict stm_memory integrations

pytest: $(STAMP)
	$(BIN)/pytest

test: lint typecheck pytest

BENCH_STAMP := $(VENV)/.stm-bench-installed

$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[dev,bench]"
	@touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BIN)/python -m benchmarks.run

# The docs site at http://127.0.0.1:8000 (make test builds it strictly: a test in
# tests/product does, and runs every Python block of its pages).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

# The cost/recall frontier of refresh_cadence (docs/cost-recall.md), about 15 minutes.
frontier: $(BENCH_STAMP)
	$(BIN)/python -m benchmarks.frontier --cadence 3 5 6 7 10 15
	$(BIN)/python -m benchmarks.frontier --wait 6 8 12
	$(BIN)/python -m benchmarks.frontier --cadence 8 --wait 12

# Re-record provider cassettes against the real APIs (needs OPENAI_API_KEY / ANTHROPIC_API_KEY).
record-cassettes: $(STAMP)
	STM_RECORD_REAL=1 $(BIN)/pytest tests/integrations --record-mode=rewrite

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis build dist site *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
