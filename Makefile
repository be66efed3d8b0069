# smp-launch: the two set-up commands are `make demo` and `make test`; both create .venv first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JOB ?= jobs/llama7b.yaml
OUT ?= build/source
# pip through the venv's own python: a copied venv's bin/pip may name another interpreter in its first line.
PIP := $(BIN)/python -m pip --disable-pip-version-check -q

.PHONY: venv venv-sdk3 test test-loaded test-unit test-e2e test-local lint bench demo emulator schema docs validate plan submit check-role render goldens

# Each step says what it does before it starts (pip itself runs quietly): a first install is a minute or two of
# downloads and builds, and a silent minute reads as a hang.
$(STAMP): setup.cfg setup.py pyproject.toml constraints/sdk2.txt
	@echo "make: creating $(VENV) (SageMaker SDK 2.x, with the test, local and docs extras: about a minute)"
	@start=$$(date +%s); \
	echo "make: [1/3] a virtual environment in $(VENV) ($(PY) -m venv)" && $(PY) -m venv $(VENV) && \
	echo "make: [2/3] pip up to date" && $(PIP) install -U pip && \
	echo "make: [3/3] smp-launch (editable) with torch, transformers, the SageMaker SDK 2.x, moto and mkdocs, as" \
	  "pinned in constraints/sdk2.txt: the longest step" && \
	$(PIP) install -e '.[test,local,docs]' -c constraints/sdk2.txt && \
	touch $(STAMP) && echo "make: $(VENV) ready in $$(( $$(date +%s) - start )) s"

venv: $(STAMP)

# The second test environment: SageMaker SDK 3.x (ModelTrainer only), for the tests of everything that builds SDK
# objects (SDK3_TESTS). The SDK's 3.x packages are large (about 1 GB with mlflow, pyarrow and scipy).
VENV3 := .venv-sdk3
STAMP3 := $(VENV3)/.installed
PIP3 := $(VENV3)/bin/python -m pip --disable-pip-version-check -q

$(STAMP3): setup.cfg setup.py pyproject.toml constraints/sdk3.txt
	@echo "make: creating $(VENV3) (SageMaker SDK 3.x, with the test extra: about two minutes)"
	@start=$$(date +%s); \
	echo "make: [1/3] a virtual environment in $(VENV3) ($(PY) -m venv)" && $(PY) -m venv $(VENV3) && \
	echo "make: [2/3] pip up to date" && $(PIP3) install -U pip && \
	echo "make: [3/3] smp-launch (editable) with the SageMaker SDK 3.x and moto, as pinned in" \
	  "constraints/sdk3.txt (about 1 GB: mlflow, pyarrow, scipy): the longest step" && \
	$(PIP3) install -e '.[test]' -c constraints/sdk3.txt && \
	touch $(STAMP3) && echo "make: $(VENV3) ready in $$(( $$(date +%s) - start )) s"

venv-sdk3: $(STAMP3)

# Tests run in parallel (pytest-xdist, from the test extra): TEST_WORKERS processes, one more than the CPUs.
# The e2e tests wait on subprocesses and clocks part of the time, and the extra worker's tests fill those
# gaps. loadgroup gives a module listed in ONE_WORKER_MODULES (tests/conftest.py) to one worker. The measured
# times, and where they go, are in docs/benchmarks.md ("The test suite").
TEST_WORKERS ?= $(shell $(PY) -c "import os; print((os.cpu_count() or 1) + 1)")
PYTEST := $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

# Everything on SDK 2.x, then the modules that build SDK objects (backends, submit, the Batch queue, Pipelines, the
# CLI end to end) again on SDK 3.x.
SDK3_TESTS := tests/test_backends.py tests/test_submit.py tests/test_batch.py tests/test_pipeline.py \
	tests/test_pipeline_runs.py tests/test_sdk_lines_e2e.py tests/test_source_content.py
test: venv venv-sdk3
	$(PYTEST)
	@echo "make: the SDK-facing tests again on SageMaker SDK 3.x ($(VENV3))"
	$(VENV3)/bin/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup -p no:cacheprovider $(SDK3_TESTS)

# The suite on a busy machine: LOAD_PROCS shell loops at nice 0 (one per CPU by default) keep every core busy
# while it runs, so a test that leans on the machine's speed fails here. Each loop ends after LOAD_MAX_S seconds
# at most, and all are killed when the suite ends (or is interrupted).
LOAD_PROCS ?= $(shell $(PY) -c "import os; print(os.cpu_count() or 1)")
LOAD_MAX_S ?= 1800
test-loaded: venv
	@pids=; \
	for i in $$(seq $(LOAD_PROCS)); do \
	  nice -n 0 timeout $(LOAD_MAX_S) sh -c 'while :; do :; done' & pids="$$pids $$!"; \
	done; \
	trap 'kill $$pids 2>/dev/null' EXIT INT TERM; \
	echo "test-loaded: $(LOAD_PROCS) busy loops at nice 0 (pids$$pids), at most $(LOAD_MAX_S) s each"; \
	$(PYTEST)

# One kind only (kinds are set in tests/conftest.py): in-process, CLI-against-moto, torchrun on CPU.
test-unit: venv
	$(PYTEST) -m unit

test-e2e: venv
	$(PYTEST) -m e2e

test-local: venv
	$(PYTEST) -m local

# ruff (style), mypy (types: its settings are setup.cfg's [mypy]) and import-linter (the layers and the
# API as the only face: setup.cfg's [importlinter] contracts); every one runs, and lint fails if any did.
lint: venv
	@status=0; \
	$(BIN)/ruff check launcher emulator tests benchmarks tools || status=1; \
	$(BIN)/mypy launcher || status=1; \
	$(BIN)/lint-imports || status=1; \
	exit $$status

bench: venv venv-sdk3
	$(BIN)/python benchmarks/bench_cli.py
	$(BIN)/python benchmarks/bench_hostile.py
	SAGEMAKER_SUPPRESS_V2_WARNING=1 $(BIN)/python benchmarks/bench_logs.py
	$(BIN)/python benchmarks/bench_perf.py
	$(BIN)/python benchmarks/bench_memory.py
	$(BIN)/python benchmarks/bench_data.py
	$(BIN)/python benchmarks/bench_sdk_lines.py
	$(BIN)/python benchmarks/bench_failures.py
	$(BIN)/python benchmarks/bench_wait.py

demo: venv
	$(BIN)/smp-launch submit jobs/llama7b.yaml --local --tiny --max-steps 20

# An emulated AWS with live demo jobs (the test harness in emulator/, not part of the installed package).
emulator: venv
	$(BIN)/python -m emulator

schema: venv
	$(BIN)/smp-launch schema --write schema/smp-launch.schema.json --force

# The documentation site: docs/rules.md from the rule registry, then docs/ built by mkdocs.yml into build/site/.
docs: venv
	$(BIN)/smp-launch rules > docs/rules.md
	$(BIN)/mkdocs build --strict -d build/site

submit: venv
	$(BIN)/smp-launch submit $(JOB)

# Many plans from one spec: a dry run by default (every plan checked, nothing written); DRY_RUN= submits,
# at most MAX_CONCURRENT jobs running. e.g. make sweep SWEEP='--set smp.hybrid_shard_degree=0 --sweep smp.tensor_parallel_degree=1,2,4'
SWEEP ?= --sweep training.batch_size=2,4
DRY_RUN ?= --dry-run
MAX_CONCURRENT ?= 2
.PHONY: sweep
sweep: venv
	$(BIN)/smp-launch submit $(JOB) $(SWEEP) --max-concurrent $(MAX_CONCURRENT) $(DRY_RUN)

check-role: venv
	$(BIN)/smp-launch check-role $(JOB)

validate: venv
	$(BIN)/smp-launch validate $(JOB)

plan: venv
	$(BIN)/smp-launch plan $(JOB)

render: venv
	$(BIN)/smp-launch render $(JOB) --out $(OUT)

# One golden source dir per code path of the templates (tests/goldens/variants.txt: a name, a spec and its
# --set overrides), rendered by `smp-launch render` (run after changing templates and review the diff), less
# the launcher/runtime modules copied verbatim (the golden test compares those with their sources); and each
# variant's whole plan as `plan` shows it, table and JSON (tests/plan_goldens, tests/test_plan_goldens.py); and
# what the job commands print (status, list, wait, stop, logs, metrics, prices, a sweep's and a pipeline's dry
# run: tests/output_goldens, tests/test_output_goldens.py).
goldens: venv
	runtime=$$($(BIN)/python -c 'from launcher.render.files import RUNTIME_MODULES; print(*RUNTIME_MODULES)'); \
	find tests/goldens -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +; \
	grep -v '^#' tests/goldens/variants.txt | while read -r name job sets; do \
	  [ -n "$$name" ] || continue; \
	  env -u SMP_LAUNCH_ROLE -u SMP_LAUNCH_BUCKET -u AWS_PROFILE $(BIN)/smp-launch render $$job $$sets \
	    --out tests/goldens/$$name > /dev/null || exit 1; \
	  for f in $$runtime; do rm tests/goldens/$$name/$$f || exit 1; done; \
	done
	rm -rf tests/plan_goldens tests/output_goldens; SMP_WRITE_GOLDENS=1 $(BIN)/python -m pytest -q \
	  -p no:cacheprovider tests/test_plan_goldens.py tests/test_api_surface.py tests/test_output_goldens.py

# Follow a job (JOB_NAME=latest: the last one submitted from this machine).
JOB_NAME ?= latest
.PHONY: logs status

logs: venv
	$(BIN)/smp-launch logs $(JOB_NAME)

status: venv
	$(BIN)/smp-launch status $(JOB_NAME)

# Wait for several jobs (JOBS="a b"); exits with the worst outcome (1 Failed, 5 Stopped, 124 timed out).
JOBS ?= latest
TIMEOUT ?=
.PHONY: wait
wait: venv
	$(BIN)/smp-launch wait $(JOBS) $(if $(TIMEOUT),--timeout $(TIMEOUT))

# Mutation testing of every product module (benchmarks/mutation.py): the suite mapped once under coverage
# (subprocesses included), then MUTATION_BUDGET seconds of seeded mutants on MUTATION_WORKERS copies of the
# tree; saves benchmarks/results/mutation.json, which the reliability report quotes.
MUTATION_BUDGET ?= 900
MUTATION_SEED ?= 1
MUTATION_WORKERS ?= 2
.PHONY: mutation reliability
mutation: venv
	$(BIN)/python benchmarks/mutation.py --budget-s $(MUTATION_BUDGET) --seed $(MUTATION_SEED) \
	  --workers $(MUTATION_WORKERS)

# The CLI through a fault-injecting proxy in front of moto, and the spec fuzzer: writes docs/reliability.md.
FUZZ_EXAMPLES ?= 300
reliability: venv
	$(BIN)/python benchmarks/reliability.py --fuzz-examples $(FUZZ_EXAMPLES)
