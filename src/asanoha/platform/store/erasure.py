"""Erasure: a subject is forgotten by destroying its data key.

No stored event, job payload or result is rewritten: they hold the subject's values sealed
under its key (see ``asanoha.platform.personal``), so once the key is gone every copy, in
every table and in every backup taken before, reads as ``FORGOTTEN``. The subject's key row
stays as a tombstone (who, when, why), so that no new key is ever made for it, and the blind
indexes of its values are cleared from their rows (a filter on a forgotten value matches
nothing).
"""

from __future__ import annotations

import logging

from sqlalchemy import Connection

from asanoha.platform.personal import subject_keys
from asanoha.platform.personal.blind_index import forget_blind_indexes
from asanoha.platform.personal.vault import PersonalData

log = logging.getLogger(__name__)


def forget_subject(
    personal: PersonalData,
    conn: Connection,
    *,
    tenant_id: str,
    subject: str,
    by: str,
    reason: str,
) -> None:
    """Destroy the data key of ``subject`` in ``tenant_id`` (inside the caller's transaction)."""
    if not personal.encrypts:
        log.warning(
            "forgetting %s of tenant %s without a master key: personal values are stored in "
            "plain text (ASANOHA_PERSONAL_DATA=plaintext or development) and stay in the events",
            subject,
            tenant_id,
        )
    subject_keys.destroy(
        conn, personal.backend, personal.tables, tenant_id, subject, by=by, reason=reason
    )
    personal.vault(conn).forgotten(tenant_id, subject)
    if personal.encrypts:
        # Without a master key the values themselves stay: so do their indexes.
        forget_blind_indexes(conn, personal.tables, tenant_id, subject)
