"""Entity hooks: what a feature runs around the writes of one of its entities.

Each kind has one signature, checked when the hook is declared:

- ``pre_save(changes, previous, is_new) -> changes``: before every create and update, after
  defaults; its result is the data written.
- ``validate(data, previous, is_new) -> None``: after defaults and pre-save hooks, before any
  gate; raises ``ValidationError`` (``fields=[{"path", "type", "message"}]``) to refuse.
- ``post_save(row, ctx)``: after every create, update and restore, in the write's transaction.
- ``pre_delete(row, ctx)``: before a delete, in the transaction; raise to refuse it.
- ``post_delete(row, ctx)``: after a delete, in the transaction.
- ``after_commit(event)``: once the write's transaction has committed, with each stored event
  of the entity it appended; never inside the transaction. An exception is logged and
  counted, never answered to the caller, and nothing retries it: durable follow-up work
  belongs in a job (``feature.job(on=...)``), which runs from the outbox.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Literal

from asanoha.platform.errors import DefinitionError
from asanoha.platform.model.sync_callables import check_not_async

HookKind = Literal["pre_save", "validate", "post_save", "pre_delete", "post_delete", "after_commit"]
Hook = Callable[..., Any]

#: The parameters each kind of hook is called with, by name (for the error message).
HOOK_PARAMETERS: dict[HookKind, tuple[str, ...]] = {
    "pre_save": ("changes", "previous", "is_new"),
    "validate": ("data", "previous", "is_new"),
    "post_save": ("row", "ctx"),
    "pre_delete": ("row", "ctx"),
    "post_delete": ("row", "ctx"),
    "after_commit": ("event",),
}


def check_hook(kind: HookKind, hook: Any, where: str) -> None:
    """Refuse (``DefinitionError`` naming ``where`` and the signature it must have) a
    ``hook`` that cannot be called as a ``kind`` hook."""
    expected = HOOK_PARAMETERS[kind]
    shape = f"def hook({', '.join(expected)})"
    if not callable(hook):
        raise DefinitionError(f"{where}: a {kind} hook is a function {shape}, not {hook!r}")
    check_not_async(hook, where, f"{kind} hook", "hooks run inside the write's thread")
    try:
        signature = inspect.signature(hook)
    except (TypeError, ValueError):
        return  # a builtin without a signature: it is called and answers for itself
    try:
        signature.bind(*expected)
    except TypeError:
        raise DefinitionError(
            f"{where}: a {kind} hook is called as {shape}, but {_name(hook)} takes "
            f"{signature}; change its parameters"
        ) from None


def _name(hook: Any) -> str:
    return getattr(hook, "__qualname__", None) or repr(hook)
