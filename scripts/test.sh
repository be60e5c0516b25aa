#!/usr/bin/env bash
# Run the test suite against the real services: starts them if needed, installs the browser
# the browser tests drive, builds .venv, runs pytest.
#
# The tests run on ASANOHA_TEST_WORKERS pytest-xdist workers (default 2), then the end-to-end
# tests (they start fleets of processes) in a serial run of their own; 1 runs everything in
# one serial run. Arguments go to both runs.
#
# The id of each failing test is written to .asanoha-failures as it fails, so a stopped run
# still names its failures.
#   scripts/test.sh --quick   the unit tests and a fast integration subset (every area once)
#   scripts/test.sh --failed  the tests .asanoha-failures names (the last run's failures)
set -euo pipefail
cd "$(dirname "$0")/.."
failures=.asanoha-failures
# One test file per area: the write path and its gates, HTTP, lists, personal data, jobs,
# consumers, the command line, the bundled handlers, the README and the docs' examples.
quick=(
  tests/unit
  tests/integration/core/test_dispatch.py
  tests/integration/core/test_instruction_gate.py
  tests/integration/http/test_auth.py
  tests/integration/lists/test_keyset_paging.py
  tests/integration/personal/test_forget.py
  tests/integration/workers/test_attempts.py
  tests/integration/consumers/test_delivery.py
  tests/integration/cli/test_listings.py
  tests/integration/handlers/test_job_admin.py
  tests/integration/test_docs_examples.py
)
case "${1:-}" in
  --quick) shift; set -- "${quick[@]}" "$@" ;;
  --failed)
    shift
    if [ ! -s "$failures" ]; then echo "no failures recorded in $failures"; exit 0; fi
    mapfile -t ids < "$failures"
    set -- "${ids[@]}" "$@"
    ;;
esac
scripts/services.sh
scripts/browser.sh
scripts/venv.sh
: > "$failures"
# The slowest tests of each run are listed at its end, to keep the suite's time in view.
set -- -p tests.failures_file --durations=15 "$@"
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
