#!/usr/bin/env bash
# Runs the test suite; "no tests collected" (pytest's exit code 5) is a failure here, not a pass.
set -uo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m pytest "$@"
code=$?
if [ "$code" -eq 5 ]; then
  echo "error: pytest collected no tests" >&2
  exit 1
fi
exit "$code"
