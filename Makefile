# The two commands of the README (run, test), plus the contributor's fast loop
# (unit) and the static checks (lint). All but unit install what they need first.
.PHONY: run test unit lint bench install

install:
	bash infra/bootstrap.sh

run: install
	.venv/bin/webgym run

# The whole suite: unit tests and the integration tests against the real stack.
test: install
	bash infra/run_tests.sh -q -p no:cacheprovider

# Unit tests only: needs nothing but the venv, starts no server, under a minute.
unit:
	[ -x .venv/bin/python ] || $(MAKE) install
	bash infra/run_tests.sh tests/unit -q -p no:cacheprovider

lint: install
	.venv/bin/ruff check .
	.venv/bin/lint-imports
	.venv/bin/mypy
	.venv/bin/python -m webgym_common.codegen --check

bench: install
	.venv/bin/python bench/bus_roundtrip.py
