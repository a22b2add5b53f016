# Peloton for Python: the two commands a newcomer needs are `make run` and
# `make test`; both set up .venv and generate code on first use, and are
# quick on a second call (stamps below skip work when nothing changed).

SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PYTHON ?= python3
# Installer output goes to a log that is shown only when a step fails.
QUIET_PIP = >>$(VENV)/setup.log 2>&1 || { cat $(VENV)/setup.log; exit 1; }
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
GEN_STAMP := peloton/api/gen/.stamp
PROTOS := $(shell find proto -name '*.proto' 2>/dev/null)
PYTEST_ARGS ?=
# pytest processes sharing one `make test` run (scripts/pytest_shards.py); 1 is a plain pytest.
TEST_SHARDS ?= 2
RUN_ARGS ?=
# Go test modules build only from their committed go.sum (see "Reproducible installs").
export GOFLAGS ?= -mod=readonly
CASSANDRA_CP := $(VENV)/cassandra.classpath
MAVEN_DEPS := tests/harness/maven/pom.xml tests/harness/maven/cassandra.lock scripts/maven_deps.py
SUPERVISOR := $(VENV)/bin/peloton-supervisor
SUPERVISOR_SRC := peloton/agent/supervisor/supervisor.c
# gorealis, a third-party Aurora client, as a test peer (tests/gorealis, pinned in its go.sum).
REALIS_DRIVER := $(VENV)/bin/realis-driver
REALIS_SRC := $(wildcard tests/gorealis/*.go) tests/gorealis/go.mod tests/gorealis/go.sum

.PHONY: run test test-asan gen lint bench clean setup system-packages fuzz lock gorealis k8s-binaries \
	k8s-up

setup: $(INSTALLED) $(GEN_STAMP) $(SUPERVISOR)

# Exactly the versions of requirements.lock (every package, with hashes: pip refuses anything
# else), then this project itself without dependencies and without build isolation (the
# locked setuptools builds it), then `pip check`.  The lock holds the extras the tests need
# (dev, mesos, cassandra, k8s, report).  `make lock` regenerates it (and the Maven lock) on purpose.
LOCK := requirements.lock
UV_VERSION := 0.13.9
$(INSTALLED): pyproject.toml $(LOCK)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "setting up $(VENV) from $(LOCK) (first run takes about a minute)"
	@$(PY) -m pip install -q --require-hashes --no-deps -r $(LOCK) $(QUIET_PIP)
	@$(PY) -m pip install -q --no-deps --no-build-isolation -e . $(QUIET_PIP)
	@$(PY) -m pip check $(QUIET_PIP)
	@touch $@

# Regenerate the locks from pyproject.toml (+ requirements/build.in) and the Maven pom, with the
# newest versions the ranges allow; review the diff, run `make test`, commit.  Go modules under
# tests/ pin themselves the same way (go.mod + go.sum committed; `go mod tidy` here).
lock:
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q "uv==$(UV_VERSION)"
	$(VENV)/bin/uv pip compile --quiet --generate-hashes --python-version 3.11 \
	  --python-platform x86_64-unknown-linux-gnu --extra dev --extra mesos --extra cassandra --extra k8s \
	  --extra report \
	  --custom-compile-command "make lock" -o $(LOCK) pyproject.toml requirements/build.in
	$(PY) scripts/maven_deps.py lock
	@for mod in $$(find tests -name go.mod -not -path '*/vendor/*' 2>/dev/null); do \
	  (cd $$(dirname $$mod) && GOFLAGS= go mod tidy) || exit 1; done

$(GEN_STAMP): $(INSTALLED) $(PROTOS) scripts/gen_code.py
	@$(PY) scripts/gen_code.py
	@touch $@

# The agent's per-task supervisor, in C for speed, built with the fixed flags of flags.mk
# (warnings are errors, hardened; static-pie if libc.a is there, else dynamic PIE).  No
# compiler is an error: the Python fallback is many times slower per task.
include peloton/agent/supervisor/flags.mk
SUPERVISOR_FLAGS_MK := peloton/agent/supervisor/flags.mk
$(SUPERVISOR): $(SUPERVISOR_SRC) $(SUPERVISOR_FLAGS_MK) | $(INSTALLED)
	@command -v $(CC) >/dev/null || { echo "ERROR: no C compiler ($(CC)) to build the agent's" \
	  "supervisor; install gcc (Debian: apt-get install gcc libc6-dev)" >&2; exit 1; }
	@$(CC) $(SUPERVISOR_CFLAGS) $(SUPERVISOR_LDFLAGS_STATIC) -o $@ $< 2>/dev/null \
	  || $(CC) $(SUPERVISOR_CFLAGS) $(SUPERVISOR_LDFLAGS_DYNAMIC) -o $@ $<

# The same source under AddressSanitizer and UndefinedBehaviorSanitizer; `make test` runs the
# agent tests over it once (any report aborts the supervisor, so its tasks and tests fail).
SUPERVISOR_ASAN := $(VENV)/bin/peloton-supervisor-asan
$(SUPERVISOR_ASAN): $(SUPERVISOR_SRC) $(SUPERVISOR_FLAGS_MK) | $(INSTALLED)
	@$(CC) $(SUPERVISOR_SANITIZE_FLAGS) -o $@ $<
AGENT_TESTS := tests/integration/test_agent.py tests/integration/test_agent_rlimit.py

gorealis: $(REALIS_DRIVER)

$(REALIS_DRIVER): $(REALIS_SRC) | $(INSTALLED)
	@cd tests/gorealis && go build -o $(abspath $@) .

# A real Kubernetes control plane for tests/k8s (kube-apiserver, etcd, kwok, kubectl), built once
# from pinned versions through the Go module proxy into a cache outside the repository
# (~/.cache/pelotonpy/k8s, or $$PELOTON_K8S_CACHE); a second run only prints the bin directory.
k8s-binaries:
	@scripts/k8s_binaries.sh

# A local control plane with kwok nodes for the README's "On Kubernetes" tour (Ctrl-C stops it).
K8S_NODES ?= 3
k8s-up: setup k8s-binaries
	$(PY) scripts/k8s_up.py --nodes $(K8S_NODES)

gen: $(INSTALLED)
	@$(PY) scripts/gen_code.py
	@touch $(GEN_STAMP)

run: setup
	$(VENV)/bin/peloton up $(RUN_ARGS)

system-packages:
	@scripts/ensure_system_packages.sh

# Apache Cassandra's server for the real-server tests, from Maven Central into ~/.m2 (a second
# run downloads nothing), checked against its lock.  If Maven cannot resolve it, the reason
# goes to $(VENV)/cassandra.unavailable and the Cassandra tests fail naming it; the rest run.
$(CASSANDRA_CP): $(MAVEN_DEPS) | $(INSTALLED) system-packages
	@echo "resolving Apache Cassandra's server jars with Maven (first run downloads ~70 MB)"
	@if $(PY) scripts/maven_deps.py install $@.tmp 2>$(VENV)/cassandra.unavailable; then \
	  mv $@.tmp $@; rm -f $(VENV)/cassandra.unavailable; \
	else rm -f $@ $@.tmp; echo "WARNING: no Cassandra server for the tests:"; \
	  cat $(VENV)/cassandra.unavailable; fi

# The linters first (what they refuse, CI refuses), then every test, against real servers.
test: setup system-packages $(CASSANDRA_CP) $(SUPERVISOR_ASAN) $(REALIS_DRIVER) k8s-binaries
	@$(MAKE) --no-print-directory lint
	$(PY) scripts/pytest_shards.py --shards $(TEST_SHARDS) -- $(PYTEST_ARGS)
	@$(MAKE) --no-print-directory test-asan

test-asan: setup $(SUPERVISOR_ASAN)
	@echo "agent tests over the ASan/UBSan supervisor ($(SUPERVISOR_ASAN))"
	PELOTON_SUPERVISOR=$(abspath $(SUPERVISOR_ASAN)) \
	  ASAN_OPTIONS=abort_on_error=1:halt_on_error=1:detect_leaks=1 \
	  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  $(PY) -m pytest -q -p no:cacheprovider $(AGENT_TESTS)

# Property tests with fresh random draws, FUZZ_ROUNDS times (make test replays fixed draws).
FUZZ_ROUNDS ?= 20
fuzz: setup
	@for i in $$(seq $(FUZZ_ROUNDS)); do \
	  HYPOTHESIS_PROFILE=fuzz $(PY) -m pytest -q -x -p no:cacheprovider \
	    $$(grep -rl '@given' tests/unit) || exit 1; done

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy --strict peloton aurorabridge announcer cli migrations archiver ui
	# The tests too: a fake that drifts from the Protocol it stands in for is caught here.
	$(VENV)/bin/mypy --strict tests
	$(VENV)/bin/lint-imports

bench: setup $(CASSANDRA_CP)
	$(PY) -m tests.bench.run

clean:
	rm -rf $(VENV) peloton/api/gen peloton/api/gen.tmp .pytest_cache .mypy_cache .ruff_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
