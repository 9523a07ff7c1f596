# The commands: `make demo`, `make check` (the quick tier) and `make test` (everything). Each sets up
# .venv when missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-test
JS_STAMP := tests/js/node_modules/.installed
RMQ5_VENV := .venv-rmq5
RMQ5_STAMP := $(RMQ5_VENV)/.installed

.PHONY: demo check test bench man lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,spark]'
	touch $(STAMP)

# The pure-JavaScript client (ali-ons) for tests/broker/test_broker_js.py; skipped without npm.
$(JS_STAMP): tests/js/package.json tests/js/package-lock.json
	if command -v npm >/dev/null; then npm ci --prefix tests/js --no-audit --no-fund --loglevel=error && touch $(JS_STAMP); fi

# The Apache RocketMQ 5.x Python client for tests/broker/test_grpc_client5.py (gRPC), in a venv of
# its own: its package `rocketmq` is not the C++ client's of .venv. Those tests skip without it
# (no index reachable: a warning, and the next `make test` tries again; in CI they fail).
$(RMQ5_STAMP):
	test -x $(RMQ5_VENV)/bin/python || $(PYTHON) -m venv $(RMQ5_VENV)
	if $(RMQ5_VENV)/bin/python -m pip install -q rocketmq-python-client==5.1.2; then touch $(RMQ5_STAMP); \
	else echo "warning: rocketmq-python-client not installed; the gRPC client tests will skip (fail in CI)"; fi

demo: $(STAMP)
	rm -rf demo-store
	$(BIN)/python -m fixtures.generate demo-store --preset demo
	$(BIN)/rmq stats demo-store
	$(BIN)/rmq dump-commitlog demo-store --count 5 --properties

# The quick tier, for every change (under 2 minutes on 2 cores): lint, then the tests that start no
# server and no child process and need no optional component but the real stores. The markers
# `server` and `slow` are given at collection by tests/conftest.py from what each test reaches
# (rmq serve, a listener, a JVM; any child process), `slow` also to the tests its SLOW lists; each
# hypothesis property runs on fewer examples. The 5 slowest tests are shown, so that one creeping
# past a second is seen (then it goes into SLOW). `make test` runs everything, as CI does.
CHECK_TESTS := not (server or slow or java or java5 or proxy5 or cpp or client5 or js or spark or prometheus or browser)
check: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -n 2 -m "$(CHECK_TESTS)" --hypothesis-profile=rmq-check --durations=5

# Everything, on TEST_WORKERS processes (pytest-xdist; each takes whole files, so a module's
# fixtures start once): most tests wait on servers and JVMs, so more workers than cores pay.
TEST_WORKERS ?= 4
test: $(STAMP) $(JS_STAMP) $(RMQ5_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

bench: $(STAMP) $(RMQ5_STAMP)
	$(BIN)/python -m tests.bench.run

man: $(STAMP)
	$(BIN)/python -m rmqcli.cli.manpages man

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) $(RMQ5_VENV) demo-store bench-data
