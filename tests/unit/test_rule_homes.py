"""Each rule of the write path is applied by its owner alone.

A rule with two homes is forgotten in one of them: the irreversible gate on the executor but
not on a bundled handler, public intake on entity writes but not on domain events. So the
functions that apply a rule (a gate, sealing a personal value, destroying a key, appending an
event, projecting a row, placing or publishing a job row) may be called only from the modules
listed here. A new path that needs one of them calls the owner (the write plan, the executor,
``erasure``) instead; a test failing here names the module and the function it reached for.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[2] / "src"

#: rule -> (the functions that apply it, as module.function, the modules that may call them).
RULES: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "the gates": (
        frozenset(
            f"asanoha.platform.service.gates.{name}"
            for name in (
                "check_irreversible",
                "check_instruction_fields",
                "check_public_intake",
                "check_write_allowed",
                "check_identity_switch",
            )
        ),
        frozenset(
            {
                "asanoha.platform.service.dispatch",
                "asanoha.platform.service.domain_events",
                "asanoha.platform.service.executor",
                "asanoha.platform.service.erasure",
                "asanoha.platform.service.handler_context",
                "asanoha.platform.service.write_pipeline",
            }
        ),
    ),
    "appending and projecting events": (
        frozenset(
            {
                "asanoha.platform.store.append_event",
                "asanoha.platform.store.events.append_event",
                "asanoha.platform.store.apply_entity_event",
                "asanoha.platform.store.projections.apply_entity_event",
                "asanoha.platform.store.declared_projections.apply_declared_projections",
            }
        ),
        frozenset(
            {
                "asanoha.platform.service.domain_events",
                "asanoha.platform.service.executor",
                # The platform's own events (job progress): no feature's, no plan's.
                "asanoha.platform.service.platform_events",
            }
        ),
    ),
    "sealing personal values": (
        frozenset(
            {
                "asanoha.platform.personal.vault.seal_known",
                "asanoha.platform.personal.vault.seal_carried",
                "asanoha.platform.personal.events.seal_event_payload",
                "asanoha.platform.personal.entities.seal_entity_values",
            }
        ),
        frozenset(
            {
                "asanoha.platform.service.aggregates",
                "asanoha.platform.service.domain_events",
                "asanoha.platform.service.executor",
                "asanoha.platform.service.idempotency",
                "asanoha.platform.jobs.enqueue",
            }
        ),
    ),
    "destroying a subject's key": (
        frozenset({"asanoha.platform.personal.subject_keys.destroy"}),
        frozenset({"asanoha.platform.service.erasure"}),
    ),
    "forgetting a subject": (
        frozenset({"asanoha.platform.service.erasure.forget_subject"}),
        frozenset({"asanoha.platform.service.executor", "asanoha.handlers.personal_data"}),
    ),
    "placing and publishing job rows": (
        frozenset(
            {
                "asanoha.platform.jobs.enqueue.place",
                "asanoha.platform.service.outbox.publish_messages",
            }
        ),
        frozenset(
            {"asanoha.platform.service.after_commit", "asanoha.platform.service.job_enqueue"}
        ),
    ),
}


def modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted((SOURCE / "asanoha").rglob("*.py")):
        parts = path.with_suffix("").relative_to(SOURCE).parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, ast.parse(path.read_text(encoding="utf-8"))


def functions_called(tree: ast.Module) -> set[str]:
    """The ``module.function`` names a module calls: functions imported by name, and
    attributes of modules imported by name (``gates.check_irreversible``)."""
    imported: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    called: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in imported:
            called.add(imported[func.id])
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            owner = imported.get(func.value.id)
            if owner is not None:
                called.add(f"{owner}.{func.attr}")
    return called


CALLS = {name: functions_called(tree) for name, tree in modules()}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_only_the_owners_apply_a_rule(rule: str) -> None:
    functions, owners = RULES[rule]
    callers = {
        module: sorted(called & functions)
        for module, called in CALLS.items()
        if called & functions and not any(module == f.rsplit(".", 1)[0] for f in functions)
    }
    strays = {module: found for module, found in callers.items() if module not in owners}
    assert not strays, (
        f"{rule} has more homes than its owners {sorted(owners)}: {strays}; call the owner "
        "(the write plan, the executor, erasure) instead"
    )
    # An owner that no longer calls it is taken off the list, so the list stays the truth.
    assert set(callers) == set(owners), f"{rule}: callers {sorted(callers)}"


#: The owner of the job row: the only package that writes the job-row table (its state, its
#: clocks ``not_before``, ``relay_after``, ``published_at``, its claim token). Migrations
#: shape the table; they are history, not a writer.
JOB_ROW_OWNER = "asanoha.platform.jobs"
JOB_ROW_TABLE = "outbox"
_WRITES = {"update", "insert", "delete"}
_RAW_WRITE = re.compile(
    r"\b(update|insert\s+into|delete\s+from)\s+\{?(asanoha_)?outbox\b", re.IGNORECASE
)


def _is_job_row_table(node: ast.expr, aliases: set[str]) -> bool:
    """``tables.outbox``, ``self._tables.outbox`` or a name bound to one of them."""
    if isinstance(node, ast.Attribute):
        return node.attr == JOB_ROW_TABLE
    return isinstance(node, ast.Name) and node.id in aliases


def _job_row_aliases(tree: ast.Module) -> set[str]:
    """Names a module binds to the job-row table (``outbox = tables.outbox``,
    ``outbox, runs = tables.outbox, tables.job_runs``)."""
    aliases: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            pairs: list[tuple[ast.expr, ast.expr]] = [(target, node.value)]
            if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                pairs = list(zip(target.elts, node.value.elts, strict=False))
            for name, value in pairs:
                if isinstance(name, ast.Name) and _is_job_row_table(value, set()):
                    aliases.add(name.id)
    return aliases


def job_row_writes(tree: ast.Module) -> list[int]:
    """The lines of a module that write the job-row table: ``update(outbox)``,
    ``insert(tables.outbox)``, ``delete(...)``, ``outbox.update()`` and raw SQL that
    updates, inserts into or deletes from it."""
    aliases = _job_row_aliases(tree)
    lines: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else None
            if name is None and isinstance(func, ast.Attribute):
                name = func.attr
                if name in _WRITES and _is_job_row_table(func.value, aliases):
                    lines.append(node.lineno)
                    continue
            if name in _WRITES and node.args and _is_job_row_table(node.args[0], aliases):
                lines.append(node.lineno)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _RAW_WRITE.search(node.value)
        ):
            lines.append(node.lineno)
    return sorted(set(lines))


def test_only_the_job_row_owner_writes_the_job_row_table() -> None:
    strays = {
        module: lines
        for module, tree in modules()
        if not module.startswith(JOB_ROW_OWNER)
        and ".migrations." not in module
        and (lines := job_row_writes(tree))
    }
    assert not strays, (
        f"the job-row table is written outside {JOB_ROW_OWNER}: {strays} (module: lines); "
        "call the transition in asanoha.platform.jobs (enqueue, claim, end, park, wake, "
        "cancel, retry, resume, mark published, prune) instead"
    )


def test_the_job_row_write_check_finds_each_form_of_write() -> None:
    # The check above proves nothing if it misses the forms a write takes.
    source = (
        "outbox = tables.outbox\n"
        "conn.execute(update(outbox).values(relay_after=now))\n"
        "conn.execute(insert(tables.outbox), rows)\n"
        "conn.execute(delete(self._tables.outbox))\n"
        "conn.execute(outbox.update().values(state='pending'))\n"
        "sql = 'UPDATE asanoha_outbox SET published_at = NULL'\n"
        "conn.execute(select(outbox))\n"
        "conn.execute(update(tables.job_runs))\n"
    )
    assert job_row_writes(ast.parse(source)) == [2, 3, 4, 5, 6]
    # The owner writes the table: the check sees its writes, it is the list that allows them.
    owner = [tree for module, tree in modules() if module.startswith(JOB_ROW_OWNER)]
    assert sum(len(job_row_writes(tree)) for tree in owner) >= 10
