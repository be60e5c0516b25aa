"""Everything ``asanoha`` promises in ``__all__`` is importable from it, the errors a user
catches included."""

from __future__ import annotations

import subprocess
import sys

import asanoha


def test_every_name_in_all_resolves() -> None:
    missing = [name for name in asanoha.__all__ if getattr(asanoha, name, None) is None]
    assert missing == []


def test_the_errors_a_test_or_a_caller_catches_are_exported() -> None:
    from asanoha import (
        ConsumerDeadError,
        ConsumerDrainTimeoutError,
        DrainTimeoutError,
        JobFailedError,
        PayloadTooLargeError,
        ServiceUnavailableError,
    )

    assert issubclass(JobFailedError, AssertionError)
    assert issubclass(DrainTimeoutError, AssertionError)
    assert issubclass(ConsumerDeadError, AssertionError)
    assert issubclass(ConsumerDrainTimeoutError, AssertionError)
    assert issubclass(PayloadTooLargeError, asanoha.AsanohaError)
    assert issubclass(ServiceUnavailableError, asanoha.AsanohaError)


def test_importing_asanoha_does_not_import_celery() -> None:
    code = "import sys, asanoha; print('celery' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr


def test_personal_data_names_are_exported() -> None:
    from asanoha import FORGOTTEN, KeyWrapper, LocalKeyWrapper

    assert FORGOTTEN == "[forgotten]"
    assert LocalKeyWrapper.from_text
    assert KeyWrapper
