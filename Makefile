# smp-launch: the two set-up commands are `make demo` and `make test`; both create .venv first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JOB ?= jobs/llama7b.yaml
PIP := $(BIN)/pip --disable-pip-version-check -q

.PHONY: venv test lint bench demo schema docs validate plan

$(STAMP): setup.cfg setup.py pyproject.toml
	$(PY) -m venv $(VENV)
	$(PIP) install -U pip
	$(PIP) install -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

test: venv
	$(BIN)/python -m pytest -q

lint: venv
	$(BIN)/ruff check launcher tests benchmarks

bench: venv
	$(BIN)/python benchmarks/bench_cli.py

demo: venv
	$(BIN)/smp-launch plan jobs/llama7b.yaml

schema: venv
	$(BIN)/smp-launch schema --write schema/smp-launch.schema.json

docs: venv
	$(BIN)/smp-launch rules > docs/rules.md

validate: venv
	$(BIN)/smp-launch validate $(JOB)

plan: venv
	$(BIN)/smp-launch plan $(JOB)
