#!/usr/bin/env bash
# Create .venv and install asanoha with its development extras (idempotent).
#
# The install is skipped while its inputs are the same as at the last install: the
# interpreter, this checkout's path (the editable install points at it) and pyproject.toml's
# content. A file's time would not do: a fresh checkout's pyproject.toml is always newer.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$python" -m venv .venv
stamp=.venv/.asanoha-installed
inputs=$(
  {
    .venv/bin/python -c 'import sys; print(sys.version)'
    pwd -P
    cat pyproject.toml
  } | sha256sum | cut -d' ' -f1
)
if [ "$(cat "$stamp" 2>/dev/null)" != "$inputs" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[dev]'
  echo "$inputs" > "$stamp"
fi
