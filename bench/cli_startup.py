"""Start-up time of the ``asanoha`` command against Celery's: ``asanoha --help``,
``asanoha jobs failed``, ``import asanoha`` and ``from asanoha import App`` (what an
application's module pays) against ``celery --help``; each the best of several runs.

    .venv/bin/python bench/cli_startup.py [--runs 5] [--json PATH]

Every command a user types pays its start-up first; the commands are run alternately, so a
change of the machine's load touches each alike, and the fastest run of each is kept (the
one least disturbed by other work). ``asanoha jobs failed`` is a command that does its work:
it imports a small application, opens the database (the embedded default, a SQLite file
migrated once in a temporary folder, so no service is needed) and prints the table. Targets:
``asanoha --help`` and ``asanoha jobs failed`` each within 1.3 x ``celery --help``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import Figure, at_most, safe_ratio, write_figures

#: ``asanoha --help`` and ``asanoha jobs failed`` may take at most this many times
#: ``celery --help``.
TARGET = 1.3
BIN = Path(sys.executable).parent
#: The peer every command row is compared with.
PEER = "celery --help"
#: The rows held to ``TARGET``.
TARGETED = ("asanoha --help", "asanoha jobs failed")
#: The application ``asanoha jobs failed`` loads: one feature with one entity.
APP_MODULE = """
from asanoha import Access, App, Entity, Feature, fields

note = Entity(table="notes", fields={"text": fields.text(personal=False, reason="bench")})
feature = Feature("bench")
feature.crud("note", note, write=Access(roles=["Admin"]), read=Access(roles=["Admin"]))
app = App([feature])
"""


def commands() -> dict[str, list[str]]:
    asanoha = str(BIN / "asanoha")
    return {
        "asanoha --help": [asanoha, "--help"],
        "asanoha jobs failed": [asanoha, "jobs", "failed", "--app", "bench_app:app"],
        PEER: [str(BIN / "celery"), "--help"],
        "import celery": [sys.executable, "-c", "import celery"],
        "import asanoha": [sys.executable, "-c", "import asanoha"],
        "from asanoha import App": [sys.executable, "-c", "from asanoha import App"],
    }


def environment() -> dict[str, str]:
    """This environment without ``ASANOHA_*`` settings: the embedded default (a SQLite file
    in the working directory, the in-process broker).

    Without ``PYTHONDONTWRITEBYTECODE``: an installed package is compiled once, when it is
    installed (Celery's is), so compiling a checkout's sources on every run would measure
    the compiler; the first run writes their bytecode. ``PYTHONPATH`` is made absolute: the
    commands run in another folder (``PYTHONPATH=src`` measures a checkout's code).
    """
    env = {name: value for name, value in os.environ.items() if not name.startswith("ASANOHA_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if env.get("PYTHONPATH"):
        paths = env["PYTHONPATH"].split(os.pathsep)
        env["PYTHONPATH"] = os.pathsep.join(str(Path(path).resolve()) for path in paths if path)
    return env


def prepare(folder: Path, env: dict[str, str]) -> None:
    """Write the application into ``folder`` and migrate its SQLite database there."""
    (folder / "bench_app.py").write_text(APP_MODULE, encoding="utf-8")
    subprocess.run(
        [str(BIN / "asanoha"), "migrate", "--app", "bench_app:app"],
        cwd=folder,
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )


def seconds_of(command: list[str], folder: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=folder, env=env, check=True, capture_output=True, timeout=120)
    return time.perf_counter() - started


def measure(runs: int) -> dict[str, float]:
    """The best time of each command over ``runs`` alternating rounds, after one round that
    compiles what they import."""
    best: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="asanoha-cli-startup-") as name:
        folder = Path(name)
        env = environment()
        prepare(folder, env)
        for command in commands().values():
            seconds_of(command, folder, env)
        for _ in range(runs):
            for row, command in commands().items():
                took = seconds_of(command, folder, env)
                best[row] = min(best.get(row, took), took)
    return best


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    best = measure(args.runs)
    for name, took in best.items():
        print(f"{name:<22} {took * 1000:7.0f} ms (best of {args.runs})")
    figures = []
    for name in (
        "asanoha --help",
        "asanoha jobs failed",
        "import asanoha",
        "from asanoha import App",
    ):
        ratio = safe_ratio(best[name], best[PEER])
        targeted = name in TARGETED
        print(f"{name} / {PEER}: {ratio:.2f}" + (f" (target at most {TARGET})" if targeted else ""))
        figures.append(
            Figure(
                benchmark="cli_startup",
                name=name,
                value=best[name] * 1000,
                unit="ms",
                peer=PEER,
                peer_value=best[PEER] * 1000,
                ratio_label="asanoha / celery",
                ratio=ratio,
                target=f"<= {TARGET}" if targeted else "",
                target_met=at_most(ratio, TARGET) if targeted else None,
            )
        )
    import_ratio = safe_ratio(best["import asanoha"], best["import celery"])
    print(f"import asanoha / import celery: {import_ratio:.2f}")
    figures.append(
        Figure(
            benchmark="cli_startup",
            name="import asanoha (vs import celery)",
            value=best["import asanoha"] * 1000,
            unit="ms",
            peer="import celery",
            peer_value=best["import celery"] * 1000,
            ratio_label="asanoha / celery",
            ratio=import_ratio,
        )
    )
    write_figures(args.json, figures)
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each command; best kept")
    parser.add_argument("--json", help="write the figures to this file (for run_all.py)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main())
