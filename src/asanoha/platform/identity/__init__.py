"""Who a bearer token names: one verifier over the platform's own secrets (by ``kid``), an
identity provider's key set, personal access tokens and revocations (no FastAPI here)."""

from asanoha.platform.identity.verifier import TokenVerifier

__all__ = ["TokenVerifier"]
