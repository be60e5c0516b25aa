"""What the ``asanoha`` command prints when a command fails: one line that names what failed
and what to do, exit code 1; the traceback only with ``--debug`` or ``ASANOHA_DEVELOPMENT=true``.

Only failures of the surroundings (a database or broker that cannot be reached, settings that
cannot be used, an application that does not define) get a line: anything else is a bug and
keeps its traceback.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: Set by ``asanoha --debug``: show tracebacks.
DEBUG_VARIABLE = "ASANOHA_DEBUG"


@dataclass(frozen=True)
class Failure:
    """A failure explained in one line."""

    what: str
    remedy: str

    def line(self) -> str:
        """``error: <what>. <remedy>``, on one line."""
        what = " ".join(self.what.split()).rstrip(".")
        return f"error: {what}. {self.remedy}" if self.remedy else f"error: {what}."


def shows_tracebacks() -> bool:
    """Whether failures keep their traceback (``--debug`` or ``ASANOHA_DEVELOPMENT=true``)."""
    flags = (os.environ.get(DEBUG_VARIABLE, ""), os.environ.get("ASANOHA_DEVELOPMENT", ""))
    return any(flag.strip().lower() in {"1", "true", "yes", "on"} for flag in flags)


def explain(error: BaseException) -> Failure | None:
    """The one-line explanation of ``error``; ``None`` for a failure that is a bug."""
    from pydantic import ValidationError as SettingsValidationError
    from sqlalchemy import exc as sa_exc

    from asanoha.platform.errors import DefinitionError
    from asanoha.platform.errors.database import is_missing_table
    from asanoha.platform.settings import InsecureSettingsError

    if is_missing_table(error):
        # Every table a command reads is made by migrate: a missing one is a database
        # nobody migrated (or one the settings did not mean), not one that cannot be reached.
        return Failure("the database has no asanoha tables: run asanoha migrate", "")
    if isinstance(error, sa_exc.OperationalError | sa_exc.InterfaceError):
        return Failure(
            f"cannot reach the database ({_first_line(error.orig or error)})",
            "Check that it runs and that ASANOHA_DATABASE_URL points at it.",
        )
    if isinstance(error, InsecureSettingsError):
        return Failure(str(error), "")  # the message says what to set
    if isinstance(error, SettingsValidationError) and error.title == "Settings":
        fields = ", ".join(
            f"ASANOHA_{str(item['loc'][0]).upper()}: {item['msg']}"
            for item in error.errors()
            if item["loc"]
        )
        return Failure(f"invalid settings ({fields})", "Fix the environment variables named.")
    if isinstance(error, DefinitionError):
        return Failure(str(error), "Fix the declaration; --debug shows where it was made.")
    if _is_broker_error(error):
        return Failure(
            f"cannot reach the broker ({_first_line(error)})",
            "Check that it runs and that ASANOHA_BROKER_URL points at it.",
        )
    return None


def _is_broker_error(error: BaseException) -> bool:
    try:
        from kombu.exceptions import OperationalError as BrokerError
    except ImportError:  # pragma: no cover - kombu comes with Celery
        return False
    return isinstance(error, BrokerError)


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]
