"""A destroyed data key stays destroyed: a key rotation or a key creation running beside a
forget never brings the forgotten subject's key back."""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from asanoha.platform.personal import FORGOTTEN, cipher, subject_keys
from asanoha.platform.personal.master_keys import LocalKeyWrapper, generate_master_key
from asanoha.platform.service.erasure import forget_subject
from asanoha.testing import TestUsers

TENANT = TestUsers.admin.tenant_id
OFFICER = TestUsers.admin
ROUNDS = 200


class _WrapperAfter(LocalKeyWrapper):
    """Waits for ``ready`` before it wraps: a rotation that read a key and is about to write
    it back lets a forget commit in between."""

    def __init__(self, master_keys: list[bytes], ready: threading.Event) -> None:
        super().__init__(master_keys)
        self.ready = ready

    def wrap(self, data_key: bytes, context: bytes) -> tuple[str, bytes]:
        # A bound only so that a lock held across the wait fails the test instead of hanging.
        self.ready.wait(timeout=10)
        return super().wrap(data_key, context)


def _race(*work: Callable[[], None]) -> None:
    """Run ``work`` in threads of their own, started together; re-raise the first failure."""
    start = threading.Barrier(len(work))
    failures: list[BaseException] = []

    def run(one: Callable[[], None]) -> None:
        try:
            start.wait()
            one()
        except BaseException as error:  # pragma: no cover - reported below
            failures.append(error)

    threads = [threading.Thread(target=run, args=(one,)) for one in work]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


@pytest.mark.parametrize("stack", ["postgres"], indirect=True)
def test_a_key_rotation_or_creation_beside_a_forget_never_brings_the_key_back(
    stack: Any,
) -> None:
    personal = stack.service.personal
    old = base64.b64decode(generate_master_key())
    new = base64.b64decode(generate_master_key())
    personal.wrapper = LocalKeyWrapper([new, old])
    tables, backend = stack.tables, personal.backend

    def forget(subject: str, done: threading.Event | None = None) -> Callable[[], None]:
        def run() -> None:
            # A job's unit of work: no entry handler, so the irreversible gate passes.
            with stack.service.unit_of_work(OFFICER) as request:
                forget_subject(
                    request, personal, tenant_id=TENANT, subject=subject, by="officer", reason="r"
                )
            if done is not None:
                done.set()

        return run

    def rotate(wrapper: LocalKeyWrapper) -> Callable[[], None]:
        def run() -> None:
            with stack.db.begin() as conn:
                subject_keys.rotate(conn, tables, wrapper)

        return run

    def create(subject: str) -> Callable[[], None]:
        def run() -> None:
            with stack.db.begin() as conn:
                subject_keys.create(conn, backend, tables, LocalKeyWrapper([old]), TENANT, subject)

        return run

    sealed: dict[str, str] = {}
    for round_ in range(ROUNDS):
        rotated, created = f"rotated-{round_}", f"created-{round_}"
        with stack.db.begin() as conn:
            key = subject_keys.create(
                conn, backend, tables, LocalKeyWrapper([old]), TENANT, rotated
            )
        assert key is not None
        sealed[rotated] = cipher.seal(AESGCM(key), TENANT, rotated, "s", "email", "a@example.org")
        forgotten = threading.Event()
        if round_ % 2:
            # The forget commits between the rotation's read of the key and its write.
            wrapper = _WrapperAfter([new, old], forgotten)
            _race(rotate(wrapper), forget(rotated, forgotten))
        else:
            _race(rotate(LocalKeyWrapper([new, old])), forget(rotated))
        _race(create(created), forget(created))

        keys = tables.subject_keys
        with stack.db.connect() as conn:
            rows = conn.execute(keys.select().where(keys.c.subject.in_([rotated, created]))).all()
            assert {row.subject for row in rows} == {rotated, created}
            for row in rows:
                assert (row.subject, row.wrapped_key, row.master_key_id) == (
                    row.subject,
                    None,
                    None,
                )
                assert row.forgotten_at is not None
            loaded = subject_keys.load(conn, tables, personal.wrapper, [(TENANT, rotated)])
            assert loaded == {(TENANT, rotated): None}
            assert personal.vault(conn).open(sealed[rotated]) is FORGOTTEN
