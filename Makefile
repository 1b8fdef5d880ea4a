# The two commands of the README. Both install what they need first.
.PHONY: run test lint bench install

install:
	bash infra/bootstrap.sh

run: install
	.venv/bin/webgym run

test: install
	bash infra/run_tests.sh -q -p no:cacheprovider

lint: install
	.venv/bin/ruff check .

bench: install
	.venv/bin/python bench/bus_roundtrip.py
