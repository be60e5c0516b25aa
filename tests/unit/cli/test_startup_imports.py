"""Every ``asanoha`` command starts without importing what it does not use: ``--help`` (which
lists every command, so imports every command module) and ``import asanoha`` import neither
the application, the service layer, the store, FastAPI nor Celery."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import asanoha

#: What took most of a second before ``asanoha --help`` printed anything (``-X importtime``):
#: the application and its bundled handlers, the service layer, the store and model over
#: SQLAlchemy, and what only serving, workers or the MCP server use.
HEAVY = (
    "asanoha.app",
    "asanoha.handlers",
    "asanoha.handlers.agent_approvals",
    "asanoha.platform.service",
    "asanoha.platform.store",
    "asanoha.platform.model",
    "asanoha.workers",
    "sqlalchemy",
    "sqlalchemy.orm",
    "fastapi",
    "starlette",
    "uvicorn",
    "celery",
    "kombu",
    "mcp",
    "alembic",
    "cryptography",
)


def modules_after(*argv: str) -> set[str]:
    """The modules loaded once ``asanoha <argv>`` has run, in a fresh interpreter."""
    script = (
        "import json, sys\n"
        f"sys.argv = ['asanoha', *{list(argv)!r}]\n"
        "from asanoha.cli import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print()\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.parametrize(
    "argv", [("--help",), ("jobs", "failed", "--help"), ("jobs", "--help")], ids=" ".join
)
def test_help_imports_nothing_heavy(argv: tuple[str, ...]) -> None:
    loaded = modules_after(*argv)
    assert "asanoha.cli.jobs" in loaded  # the command modules themselves were imported
    assert sorted(set(HEAVY) & loaded) == []


def test_importing_asanoha_imports_none_of_its_names_until_asked() -> None:
    script = (
        "import json, sys\n"
        "import asanoha\n"
        "before = sorted(sys.modules)\n"
        "asanoha.Feature\n"
        "print(json.dumps([before, sorted(sys.modules)]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    before, after = (set(names) for names in json.loads(done.stdout))
    assert sorted(set(HEAVY) & before) == []
    assert "pydantic" not in before
    assert "asanoha.platform.model" in after


def test_every_lazy_name_is_the_one_its_typed_import_names() -> None:
    # Type checkers and the API reference read the imports under TYPE_CHECKING; the lazy
    # lookup reads _EXPORTS: both must say the same module for each name of __all__.
    tree = ast.parse(Path(asanoha.__file__).read_text(encoding="utf-8"))
    typed: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("asanoha"):
            typed.update({alias.name: node.module for alias in node.names})
    assert typed == asanoha._EXPORTS
    assert sorted(typed) == sorted(asanoha.__all__)


def test_a_public_name_is_the_object_of_its_module() -> None:
    from asanoha.app import App
    from asanoha.platform.errors import AsanohaError

    assert asanoha.App is App
    assert asanoha.AsanohaError is AsanohaError
    assert set(asanoha.__all__) <= set(dir(asanoha))
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        asanoha.Nothing  # noqa: B018


def test_the_migrations_default_of_the_commands_is_the_platforms() -> None:
    from asanoha.cli.schema_gate import DEFAULT_APP_MIGRATIONS
    from asanoha.platform import schema

    assert DEFAULT_APP_MIGRATIONS == schema.DEFAULT_APP_MIGRATIONS


def test_python_dash_m_asanoha_runs_the_command_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "asanoha", "--version"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("asanoha ")


def test_loading_the_application_leaves_out_what_only_some_declarations_use() -> None:
    # ``asanoha jobs failed`` and every command that loads an application import asanoha.app:
    # email checks, money fields, rate limits and the texts of errors load their libraries
    # when first used.
    script = "import json, sys\nimport asanoha.app\nprint(json.dumps(sorted(sys.modules)))\n"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout))
    assert sorted({"email_validator", "babel", "limits", "yaml"} & loaded) == []
