"""The platform's own HMAC secrets: a key ring by ``kid`` (``ASANOHA_JWT_KEYS``) beside the
secrets of ``ASANOHA_JWT_SECRET``, which check the tokens that name no ``kid``."""

from __future__ import annotations

from dataclasses import dataclass

from asanoha.platform.settings import Settings


@dataclass(frozen=True)
class OwnKeys:
    """Which secret signs, and which check a token with or without a ``kid``."""

    algorithm: str
    by_kid: dict[str, str]
    #: The secrets of ``ASANOHA_JWT_SECRET``, the one that signs first.
    unnamed: tuple[str, ...]
    #: ``(kid, secret)`` of the key new tokens are signed with; ``kid`` ``None``: the first
    #: of ``unnamed``, with no ``kid`` in the header (as tokens were always signed).
    signing: tuple[str | None, str]

    @classmethod
    def of(cls, settings: Settings) -> OwnKeys:
        ring = settings.jwt_key_ring
        signing: tuple[str | None, str] = ring[0] if ring else (None, settings.jwt_signing_secret)
        return cls(settings.jwt_algorithm, dict(ring), settings.jwt_secrets, signing)

    def secrets_for(self, kid: str | None) -> tuple[str, ...]:
        """The secrets that may have signed a token naming ``kid``: empty for a ``kid`` the
        ring does not hold (a key rotated out, or a forged one)."""
        if kid is None:
            return self.unnamed
        found = self.by_kid.get(kid)
        return (found,) if found is not None else ()
