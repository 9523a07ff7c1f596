# The two commands: `make demo` and `make test`. Each sets up .venv when missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-test
JS_STAMP := tests/js/node_modules/.installed

.PHONY: demo test bench man lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,spark]'
	touch $(STAMP)

# The pure-JavaScript client (ali-ons) for tests/broker/test_broker_js.py; skipped without npm.
$(JS_STAMP): tests/js/package.json tests/js/package-lock.json
	if command -v npm >/dev/null; then npm ci --prefix tests/js --no-audit --no-fund --loglevel=error && touch $(JS_STAMP); fi

demo: $(STAMP)
	rm -rf demo-store
	$(BIN)/python -m fixtures.generate demo-store --preset demo
	$(BIN)/rmq stats demo-store
	$(BIN)/rmq dump-commitlog demo-store --count 5 --properties

test: $(STAMP) $(JS_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python -m tests.bench.run

man: $(STAMP)
	$(BIN)/python -m rmqcli.cli.manpages man

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) demo-store bench-data
