#!/usr/bin/env bash
# Run the test suite against the real services: starts them if needed, installs the browser
# the browser tests drive, builds .venv, runs pytest.
#
# The tests run on ASANOHA_TEST_WORKERS pytest-xdist workers (default 2), then the end-to-end
# tests (they start fleets of processes) in a serial run of their own; 1 runs everything in
# one serial run. Arguments go to both runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/services.sh
scripts/browser.sh
scripts/venv.sh
workers=${ASANOHA_TEST_WORKERS:-2}
case "$workers" in
  '' | *[!0-9]*) echo "ASANOHA_TEST_WORKERS must be a number of workers, not '$workers'" >&2; exit 2 ;;
esac
if [ "$workers" -le 1 ]; then
  exec .venv/bin/python -m pytest "$@"
fi
# Exit code 5 is "no tests collected" (the arguments chose only tests of the other run).
status=0
.venv/bin/python -m pytest -n "$workers" --dist loadgroup --e2e=skip "$@" || status=$?
[ "$status" -eq 5 ] && status=0
e2e_status=0
.venv/bin/python -m pytest --e2e=only "$@" || e2e_status=$?
[ "$e2e_status" -eq 5 ] && e2e_status=0
[ "$status" -ne 0 ] && exit "$status"
exit "$e2e_status"
