# The two commands of the README (run, test), plus the contributor's fast loop
# (unit) and the static checks (lint). All but unit install what they need first.
.PHONY: run test unit lint bench install chaos compose-test chart

install:
	bash infra/bootstrap.sh

run: install
	.venv/bin/webgym run

# The whole suite: unit tests and the integration tests against the real stack, with the
# fast subset of the chaos suite (tests marked chaos_fast).
test: install
	bash infra/run_tests.sh -q -p no:cacheprovider --durations=40

# Every chaos scenario (tests/chaos: SIGKILL of each process at several moments, rebalance,
# MinIO/Kafka/vLLM outages, bad input at volume); long (most of an hour on 2 cores). Prints
# the table and writes it as markdown (WEBGYM_CHAOS_TABLE, default under pytest's temp dir).
chaos: install
	WEBGYM_CHAOS=all bash infra/run_tests.sh tests/chaos -q -p no:cacheprovider

# docker compose for real (tests/compose): a Docker engine with compose v2 (installed and
# started by infra/docker/engine.sh where missing: root, Debian), the images built here from
# Debian's packages (python -m infra.images --base debootstrap), the stack up, an iteration
# through the containers with a browser scale-up and two container kills, then nothing left.
compose-test: install
	bash infra/docker/engine.sh
	WEBGYM_COMPOSE_TEST=1 bash infra/run_tests.sh tests/compose -q -s -p no:cacheprovider

# Unit tests only: needs nothing but the venv, starts no server, under a minute.
unit:
	[ -x .venv/bin/python ] || $(MAKE) install
	bash infra/run_tests.sh tests/unit -q -p no:cacheprovider

lint: install
	.venv/bin/ruff check .
	.venv/bin/lint-imports
	.venv/bin/mypy
	.venv/bin/python -m devtools.codegen --check
	.venv/bin/python -m devtools.chart --check

# The Helm chart rendered and validated offline (helm and the validator built once, cached;
# docs/kubernetes.md). `make test` runs it too (tests/chart).
chart:
	[ -x .venv/bin/python ] || $(MAKE) install
	.venv/bin/python -m devtools.chart --check
	bash devtools/chart_validate.sh

bench: install
	.venv/bin/python -m bench
