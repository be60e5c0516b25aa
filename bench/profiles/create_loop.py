"""Service-layer creates in a loop for ``--seconds`` seconds: the process py-spy samples.

    .venv/bin/py-spy record --gil -r 1000 -f raw -o spy.txt -- \
        .venv/bin/python bench/profiles/create_loop.py 15
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import ADMIN_URL, CREATE_QN, USER, bench_feature, note_payload, scratch_database
from asanoha import App, Settings


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 15.0
    with scratch_database(ADMIN_URL, "asanoha_bench_spy") as url:
        app = App(features=[bench_feature()], settings=Settings(database_url=url))
        try:
            app.create_schema()
            end = time.monotonic() + seconds
            n = 0
            while time.monotonic() < end:
                app.service.dispatch_write(CREATE_QN, note_payload(n), USER)
                n += 1
            print(f"{n} creates")
        finally:
            app.close()


if __name__ == "__main__":
    main()
