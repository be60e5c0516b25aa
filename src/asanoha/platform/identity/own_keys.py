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
    #: of ``unnamed``, with no ``kid`` in the header (as tokens were always signed). ``None``:
    #: this application signs no token (it takes its identity provider's only).
    signing: tuple[str | None, str] | None

    @classmethod
    def of(cls, settings: Settings) -> OwnKeys:
        ring = settings.jwt_key_ring
        # The public placeholder never checks a token beside an identity provider.
        unnamed = () if settings.own_secret_disabled else settings.jwt_secrets
        signing: tuple[str | None, str] | None = (
            ring[0] if ring else ((None, unnamed[0]) if unnamed else None)
        )
        return cls(settings.jwt_algorithm, dict(ring), unnamed, signing)

    def secrets_for(self, kid: str | None) -> tuple[str, ...]:
        """The secrets that may have signed a token naming ``kid``: empty for a ``kid`` the
        ring does not hold (a key rotated out, or a forged one)."""
        if kid is None:
            return self.unnamed
        found = self.by_kid.get(kid)
        return (found,) if found is not None else ()
