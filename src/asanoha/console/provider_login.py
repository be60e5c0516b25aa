"""Console sign-in through the identity provider: OpenID Connect authorization code flow
with PKCE (S256), when ``ASANOHA_OIDC_ISSUER`` and ``ASANOHA_OIDC_CLIENT_ID`` are set.

The browser goes to the provider with a fresh ``state`` and code challenge; the verifier and
the state wait in a short-lived cookie of this browser. The provider sends the browser back
with a code, which this server exchanges (with the verifier) for the provider's access
token; that token is checked as the API checks it and becomes the session's token.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from asanoha.platform.identity.provider_keys import DISCOVERY_PATH, FETCH_TIMEOUT, fetch_url
from asanoha.platform.settings import Settings

#: The cookie that carries ``state`` and the PKCE verifier between the two legs.
FLOW_COOKIE = "asanoha_console_oidc"
#: Seconds a sign-in at the provider may take.
FLOW_SECONDS = 600


@dataclass(frozen=True)
class ProviderLogin:
    """The provider's endpoints and this console's client."""

    issuer: str
    client_id: str
    client_secret: str | None

    @classmethod
    def of(cls, settings: Settings) -> ProviderLogin | None:
        """The provider sign-in of ``settings``; ``None`` when it is not configured."""
        if not settings.oidc_issuer or not settings.oidc_client_id:
            return None
        return cls(settings.oidc_issuer, settings.oidc_client_id, settings.oidc_client_secret)

    def endpoints(self) -> tuple[str, str]:
        """The authorization and token endpoints from the discovery document."""
        document = json.loads(fetch_url(self.issuer.rstrip("/") + DISCOVERY_PATH))
        authorize, token = document.get("authorization_endpoint"), document.get("token_endpoint")
        if not isinstance(authorize, str) or not isinstance(token, str):
            raise ValueError(f"the discovery document of {self.issuer} names no endpoints")
        return authorize, token

    def start(self, redirect_uri: str) -> tuple[str, str]:
        """The provider's authorization URL and the flow cookie's value."""
        authorize, _ = self.endpoints()
        state = secrets.token_urlsafe(24)
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
        query = urllib.parse.urlencode(
            {
                "response_type": "code",
                "client_id": self.client_id,
                "redirect_uri": redirect_uri,
                "scope": "openid",
                "state": state,
                "code_challenge": challenge.rstrip(b"=").decode(),
                "code_challenge_method": "S256",
            }
        )
        separator = "&" if "?" in authorize else "?"
        return f"{authorize}{separator}{query}", f"{state}.{verifier}"

    def finish(
        self, flow: str | None, state: str | None, code: str | None, redirect_uri: str
    ) -> str:
        """The provider's access token for ``code``; raises ``ValueError`` for a flow this
        browser did not start (state mismatch), or a provider that refuses the code."""
        if not flow or not state or not code or "." not in flow:
            raise ValueError("the sign-in was not started from this browser")
        expected, verifier = flow.split(".", 1)
        if not hmac.compare_digest(expected, state):
            raise ValueError("the sign-in was not started from this browser")
        _, token_endpoint = self.endpoints()
        form: dict[str, Any] = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "client_id": self.client_id,
            "code_verifier": verifier,
        }
        if self.client_secret:
            form["client_secret"] = self.client_secret
        request = urllib.request.Request(
            token_endpoint,
            data=urllib.parse.urlencode(form).encode(),
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
            },
        )
        with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT) as response:
            answer = json.loads(response.read(64 * 1024))
        token = answer.get("access_token") if isinstance(answer, dict) else None
        if not isinstance(token, str) or not token:
            raise ValueError("the provider answered no access token")
        return token
