"""Personal data: encrypted per subject before it is stored, forgotten by erasing the key.

Each personal value is sealed with AES-256-GCM under a data key of its (tenant, subject),
wrapped by a master key (``KeyWrapper``); readers open it again, and a forgotten subject's
values read as ``FORGOTTEN``. The modules: ``master_keys`` (wrapping), ``subject_keys`` (the
key rows), ``cipher`` (the sealed text), ``vault`` (one transaction's keys), ``entities`` and
``events`` (what the executor and the readers call), ``blind_index``, ``export``, ``boot``.
"""

from __future__ import annotations

from asanoha.platform.personal.sentinel import FORGOTTEN, FORGOTTEN_TEXT

__all__ = ["FORGOTTEN", "FORGOTTEN_TEXT"]
