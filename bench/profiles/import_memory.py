"""Anonymous memory (RssAnon) each import adds to a fresh interpreter, in the order given.

    .venv/bin/python bench/profiles/import_memory.py MODULE [MODULE ...]

What a prefork worker's main process holds before it forks is held again, page for page, in
the resident set of every pool process: this shows what each library costs per process.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path


def anonymous_mib() -> float:
    """This process's anonymous resident memory, in MiB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main(modules: list[str]) -> None:
    previous = anonymous_mib()
    print(f"{'interpreter':<44}{previous:8.1f} MiB")
    for name in modules:
        count = len(sys.modules)
        importlib.import_module(name)
        now = anonymous_mib()
        print(f"+ {name:<42}{now - previous:+8.1f} MiB  ({len(sys.modules) - count:+d} modules)")
        previous = now
    print(f"{'total':<44}{previous:8.1f} MiB")


if __name__ == "__main__":
    main(sys.argv[1:])
