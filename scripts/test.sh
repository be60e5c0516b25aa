#!/usr/bin/env bash
# Run the test suite against the real services: starts them if needed, installs the browser
# the browser tests drive, builds .venv, runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/services.sh
scripts/browser.sh
scripts/venv.sh
exec .venv/bin/python -m pytest "$@"
