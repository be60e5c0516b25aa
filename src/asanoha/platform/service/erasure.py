"""Erasure: a subject is forgotten by destroying its data key. The one way to do it.

No stored event, job payload or result is rewritten: they hold the subject's values sealed
under its key (see ``asanoha.platform.personal``), so once the key is gone every copy, in
every table and in every backup taken before, reads as ``FORGOTTEN``. The subject's key row
stays as a tombstone (who, when, why), so that no new key is ever made for it, and the blind
indexes of its values are cleared from their rows (a filter on a forgotten value matches
nothing).

Forgetting cannot be undone, so this operation checks the irreversible gate itself, with the
request it runs in: the entity executor's ``forget``, the bundled ``forget-subject`` handler
and any later caller meet the same gate whichever way they were reached (a nested
``ctx.write``, a job's ``ctx.write_as``, an agent's chain).
"""

from __future__ import annotations

import logging

from asanoha.platform.personal import subject_keys
from asanoha.platform.personal.blind_index import forget_blind_indexes
from asanoha.platform.personal.vault import PersonalData
from asanoha.platform.service import files, gates
from asanoha.platform.service.request import Request
from asanoha.platform.store.snapshots import discard_snapshots

log = logging.getLogger(__name__)


def forget_subject(
    request: Request,
    personal: PersonalData,
    *,
    tenant_id: str,
    subject: str,
    by: str,
    reason: str,
    entity: str | None = None,
) -> None:
    """Destroy the data key of ``subject`` in ``tenant_id`` inside ``request``'s transaction,
    once the request may do what cannot be undone (403
    ``irreversible_operation_requires_high_risk`` otherwise, before anything is touched).
    ``entity``: the entity whose row is the subject, when a row is forgotten."""
    target = {"entity": entity} if entity is not None else {"subject": subject}
    gates.check_irreversible(request, "forget", **target)
    if not personal.encrypts:
        log.warning(
            "forgetting %s of tenant %s without a master key: personal values are stored in "
            "plain text (ASANOHA_PERSONAL_DATA=plaintext or development) and stay in the events",
            subject,
            tenant_id,
        )
    conn = request.conn
    subject_keys.destroy(
        conn, personal.backend, personal.tables, tenant_id, subject, by=by, reason=reason
    )
    personal.vault(conn).forgotten(tenant_id, subject)
    # The snapshots of the subject's own stream go at once; any other snapshot holding one
    # of its values no longer opens, and the load that finds it folds the events again.
    discard_snapshots(conn, personal.tables, tenant_id=tenant_id, stream_id=subject)
    if personal.encrypts:
        # Without a master key the values themselves stay: so do their indexes.
        forget_blind_indexes(conn, personal.tables, tenant_id, subject)
    # The files its row holds are deleted: marked here, their content after the commit.
    if files.forget_row_files(conn, personal.tables, tenant_id, subject):
        request.files_forgotten.append(subject)
