"""What the rows of ``asanoha_feature_settings`` (``store/tables``) hold: the per-tenant state of features: configuration values, sealed secrets and
whether a toggleable feature is on (see ``model/feature_settings``).

One table for the three, keyed by (tenant, feature, kind, key): they are read together
when a handler of a feature runs, and each is one small row.
"""

from __future__ import annotations

#: ``kind`` of a configuration value (``value``: its JSON).
CONFIG = "config"
#: ``kind`` of a secret (``value``: its sealed text, never the plaintext).
SECRET = "secret"
#: ``kind`` of a feature's switch (``key`` is ``enabled``, ``value`` true or false).
TOGGLE = "toggle"
#: The tenant a value of a ``per_tenant=False`` key is stored under.
EVERY_TENANT = "$all"
