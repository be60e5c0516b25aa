"""Keeps the values of features' secrets out of every output: responses, log lines, error
texts and stored job runs.

Every secret value read or set in a context (``ctx.secrets``, ``secrets:write:set``) is
noted here (``note_secret``):

- a handler whose result (or whose error's message or details) carries a noted value is
  refused with 500 ``secret_in_output``: the response would hand the secret to the caller,
  and the caller can do nothing about it (the handler is at fault, hence a server error);
- a log record made in the context is redacted when it is made (a log record factory,
  installed once per process), as the personal-data redaction does for job attempts;
- the value is also noted in the personal-data redaction scope, which keeps it out of the
  texts a job attempt or a consumer pass stores and of Celery's lines about the task.

The noted values live in a context variable: a thread (or asyncio task) that read a secret
keeps redacting it for the rest of its life, which costs a lookup per log line and never
shows a secret.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from asanoha.platform.errors import AsanohaError, InternalError, Reasons
from asanoha.platform.personal import redaction, secret_values

T = TypeVar("T")
#: What a secret's value reads as in a log line.
MARKER = "[secret]"

_INSTALLED = threading.Lock()
_installed = False


def note_secret(value: str) -> None:
    """Record ``value`` (a secret read or set in this context)."""
    if not secret_values.note(value):
        return
    redaction.note(value)
    install_log_redaction()


def noted() -> frozenset[str]:
    """The secret values recorded in this context."""
    return secret_values.noted()


carries_secret = secret_values.carries_secret


def run_guarded(handler_qn: str, call: Callable[[], T]) -> T:
    """``call()`` (a handler), refused with 500 ``secret_in_output`` if what it returns or
    raises holds a secret noted in this context: its result and an ``AsanohaError``'s
    message and details are answered to the caller, another exception's message is logged.
    The refusal does not chain the original error, so no traceback prints the value."""
    try:
        result = call()
    except AsanohaError as error:
        if carries_secret([error.message, error.details]):
            raise InternalError(Reasons.SECRET_IN_OUTPUT, handler=handler_qn) from None
        raise
    except Exception as exc:
        if carries_secret(str(exc)):
            raise InternalError(Reasons.SECRET_IN_OUTPUT, handler=handler_qn) from None
        raise
    if carries_secret(result):
        raise InternalError(Reasons.SECRET_IN_OUTPUT, handler=handler_qn)
    return result


def redact(text: str) -> str:
    """``text`` with every noted secret replaced by ``MARKER``."""
    secrets = secret_values.noted()
    if not secrets or not text:
        return text
    for secret in sorted(secrets, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MARKER)
    return text


def install_log_redaction() -> None:
    """Wrap the process's log record factory (once) so that a record made in a context that
    read a secret has the secret replaced in its message and traceback."""
    global _installed
    if _installed:
        return
    with _INSTALLED:
        if _installed:
            return
        previous = logging.getLogRecordFactory()
        formatter = logging.Formatter()

        def make_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            if not secret_values.noted():
                return record
            message = record.getMessage()
            redacted = redact(message)
            if redacted != message:
                record.msg, record.args = redacted, None
            if record.exc_info:
                # Formatted now, while the context knows the secrets: a handler formats
                # the record later, maybe on another thread.
                text = formatter.formatException(record.exc_info)
                if redact(text) != text:
                    record.exc_info, record.exc_text = None, redact(text)
            return record

        logging.setLogRecordFactory(make_record)
        _installed = True
