"""A local identity provider for tests: key pairs, a JWKS (and discovery) HTTP server on
127.0.0.1 that counts its fetches, and a signer. No network beyond the loopback."""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

ISSUER = "https://idp.example.test/realms/acme"
AUDIENCE = "asanoha-api"


@dataclass(frozen=True)
class KeyPair:
    kid: str
    algorithm: str
    private: Any

    @property
    def jwk(self) -> dict[str, Any]:
        public = self.private.public_key()
        if isinstance(public, rsa.RSAPublicKey):
            entry = json.loads(RSAAlgorithm.to_jwk(public))
        elif isinstance(public, ec.EllipticCurvePublicKey):
            entry = json.loads(ECAlgorithm.to_jwk(public))
        else:
            entry = json.loads(OKPAlgorithm.to_jwk(public))
        return {**entry, "kid": self.kid, "use": "sig"}

    @property
    def public_pem(self) -> bytes:
        key = self.private.public_key()
        return bytes(
            key.public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )

    def sign(
        self, claims: dict[str, Any], *, kid: str | None = None, alg: str | None = None
    ) -> str:
        return jwt.encode(
            claims, self.private, algorithm=alg or self.algorithm, headers={"kid": kid or self.kid}
        )


@functools.cache
def private_key(kind: str, number: int) -> Any:
    """One key of each kind per number, made once per test session (RSA is slow to make)."""
    del number
    if kind == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if kind == "ec":
        return ec.generate_private_key(ec.SECP256R1())
    if kind == "ec384":
        return ec.generate_private_key(ec.SECP384R1())
    return ed25519.Ed25519PrivateKey.generate()


KIND_OF = {
    "RS256": "rsa", "RS384": "rsa", "RS512": "rsa", "PS256": "rsa",
    "ES256": "ec", "ES384": "ec384", "EdDSA": "okp",
}  # fmt: skip


def key_pair(algorithm: str, number: int = 0, kid: str | None = None) -> KeyPair:
    return KeyPair(
        kid or f"{algorithm.lower()}-{number}", algorithm, private_key(KIND_OF[algorithm], number)
    )


def provider_claims(**overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    claims: dict[str, Any] = {
        "sub": "u-1",
        "tenant_id": "tenant-a",
        "roles": ["Admin"],
        "iss": ISSUER,
        "aud": AUDIENCE,
        "iat": now,
        "exp": now + 300,
    }
    claims.update(overrides)
    return {key: value for key, value in claims.items() if value is not None}


def unsigned(claims: dict[str, Any], header: dict[str, Any]) -> str:
    """A token with ``header`` and an empty signature (for ``alg: none``)."""
    return ".".join([_segment(header), _segment(claims), ""])


def hmac_signed(claims: dict[str, Any], secret: bytes, kid: str) -> str:
    """An HS256 token "signed" with ``secret`` (a public key, for the confusion attack)."""
    head = _segment({"alg": "HS256", "typ": "JWT", "kid": kid})
    body = _segment(claims)
    mac = hmac.new(secret, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"


def _segment(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


class JwksServer:
    """Serves ``keys`` at ``/jwks`` and a discovery document; ``mode`` ``garbage`` answers
    something that is no key set, ``error`` a 500; ``stop()`` takes it off the network."""

    def __init__(self, keys: list[KeyPair]) -> None:
        self.keys = list(keys)
        self.mode = "serve"
        self.fetches = 0
        #: The claims of the access tokens ``/token`` answers (signed with the first key).
        self.access_claims: dict[str, Any] = {}
        #: Codes handed out by ``/authorize``: code -> (challenge, redirect URI).
        self.codes: dict[str, tuple[str, str]] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/.well-known/openid-configuration":
                    document = {
                        "issuer": server.issuer,
                        "jwks_uri": server.url,
                        "authorization_endpoint": f"{server.issuer}/authorize",
                        "token_endpoint": f"{server.issuer}/token",
                    }
                    return self._answer(200, json.dumps(document).encode())
                if self.path.startswith("/authorize?"):
                    # Signs the user in at once: a provider whose user always consents.
                    query = parse_qs(urlsplit(self.path).query)
                    assert query["code_challenge_method"] == ["S256"]
                    code = secrets.token_urlsafe(16)
                    back = query["redirect_uri"][0]
                    server.codes[code] = (query["code_challenge"][0], back)
                    target = f"{back}?{urlencode({'code': code, 'state': query['state'][0]})}"
                    self.send_response(302)
                    self.send_header("Location", target)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                if self.path != "/jwks":
                    return self._answer(404, b"{}")
                server.fetches += 1
                if server.mode == "garbage":
                    return self._answer(200, b"<html>maintenance</html>")
                if server.mode == "error":
                    return self._answer(500, b"{}")
                document = {"keys": [key.jwk for key in server.keys]}
                return self._answer(200, json.dumps(document).encode())

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                form = parse_qs(self.rfile.read(length).decode())
                code = form.get("code", [""])[0]
                challenge, back = server.codes.pop(code, ("", ""))
                verifier = form.get("code_verifier", [""])[0].encode()
                digest = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest())
                if (
                    self.path != "/token"
                    or not challenge
                    or digest.rstrip(b"=").decode() != challenge
                    or form.get("redirect_uri") != [back]
                ):
                    return self._answer(400, b'{"error": "invalid_grant"}')
                token = server.keys[0].sign(server.access_claims)
                body = {"access_token": token, "token_type": "Bearer", "expires_in": 300}
                return self._answer(200, json.dumps(body).encode())

            def do_OPTIONS(self) -> None:
                # A browser's preflight of /docs' cross-origin token request.
                self.send_response(204)
                self._allow_any_origin()
                self.send_header("Access-Control-Allow-Methods", "GET, POST")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _allow_any_origin(self) -> None:
                self.send_header("Access-Control-Allow-Origin", "*")
                self.send_header("Access-Control-Allow-Headers", "*")

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self._allow_any_origin()
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._thread.start()
        host, port = self._http.server_address[:2]
        self.issuer = f"http://{host!s}:{port}"
        self.url = f"{self.issuer}/jwks"

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join()


@contextmanager
def jwks_server(keys: list[KeyPair]) -> Iterator[JwksServer]:
    server = JwksServer(keys)
    try:
        yield server
    finally:
        if server._thread.is_alive():
            server.stop()


#: The algorithms of the matrix signed by the provider's keys.
PROVIDER_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA")


@dataclass(frozen=True)
class Case:
    name: str
    token: str
    #: ``None``: accepted; else the refusal's reason and ``details.cause`` (``None``: any).
    reason: str | None
    cause: str | None = None


def provider_matrix(algorithm: str) -> list[Case]:
    """Every case of the token matrix for one provider algorithm: the JWKS must serve
    ``key_pair(algorithm)`` (and not ``key_pair(algorithm, 1, kid=...-rotated)``)."""
    right = key_pair(algorithm)
    wrong = key_pair(algorithm, 1, kid=right.kid)
    rotated = key_pair(algorithm, 1, kid=f"{right.kid}-rotated")
    now = int(time.time())
    good = provider_claims()
    return [
        Case(f"{algorithm} right key", right.sign(good), None),
        Case(f"{algorithm} wrong key", wrong.sign(good), "token_invalid", "signature"),
        Case(f"{algorithm} unknown kid", right.sign(good, kid="no-such-kid"), "token_invalid", "unknown_kid"),
        Case(f"{algorithm} rotated out", rotated.sign(good), "token_invalid", "unknown_kid"),
        Case(f"{algorithm} alg none", unsigned(good, {"alg": "none", "kid": right.kid}), "token_invalid", "algorithm"),
        Case(f"{algorithm} HS256 with the public key", hmac_signed(good, right.public_pem, right.kid), "token_invalid", None),
        Case(f"{algorithm} iss missing", right.sign(provider_claims(iss=None)), "token_invalid", "issuer"),
        Case(f"{algorithm} iss wrong", right.sign(provider_claims(iss="https://evil.test")), "token_invalid", "issuer"),
        Case(f"{algorithm} aud missing", right.sign(provider_claims(aud=None)), "token_invalid", "audience"),
        Case(f"{algorithm} aud wrong", right.sign(provider_claims(aud="another-api")), "token_invalid", "audience"),
        Case(f"{algorithm} expired", right.sign(provider_claims(iat=now - 600, exp=now - 300)), "token_expired"),
        Case(f"{algorithm} exp missing", right.sign(provider_claims(exp=None)), "token_invalid", "claims"),
        Case(f"{algorithm} exp a numeric string", right.sign(provider_claims(exp=str(now + 300))), "token_invalid", None),
        Case(f"{algorithm} exp a float", right.sign(provider_claims(exp=now + 300.5)), "token_invalid", "claims"),
        Case(f"{algorithm} exp past any date", right.sign(provider_claims(exp=10**400)), "token_invalid", "lifetime"),
        Case(f"{algorithm} iat before any date", right.sign(provider_claims(iat=-(10**400))), "token_invalid", "claims"),
        Case(f"{algorithm} not yet valid", right.sign(provider_claims(nbf=now + 600, exp=now + 900)), "token_invalid", "not_yet_valid"),
        Case(f"{algorithm} tenant missing", right.sign(provider_claims(tenant_id=None)), "token_invalid", "claims"),
        Case(f"{algorithm} tenant a number", right.sign(provider_claims(tenant_id=7)), "token_invalid", "claims"),
        Case(f"{algorithm} roles missing", right.sign(provider_claims(roles=None)), "token_invalid", "claims"),
        Case(f"{algorithm} roles a string", right.sign(provider_claims(roles="Admin")), "token_invalid", "claims"),
        Case(f"{algorithm} roles of numbers", right.sign(provider_claims(roles=[1])), "token_invalid", "claims"),
        Case(f"{algorithm} subject a number", right.sign(provider_claims(sub=7)), "token_invalid", None),
        Case(f"{algorithm} system role", right.sign(provider_claims(roles=["system"])), "token_invalid", "claims"),
    ]  # fmt: skip


def own_matrix(secret: str, kid: str | None = None) -> list[Case]:
    """The HS256 cases: own tokens with the provider's issuer and audience configured."""
    now = int(time.time())
    headers = {"kid": kid} if kid else None

    def own(claims: dict[str, Any], key: str = secret, **header: Any) -> str:
        return jwt.encode(
            claims, key, algorithm="HS256", headers={**(headers or {}), **header} or None
        )

    def claims(**overrides: Any) -> dict[str, Any]:
        base = provider_claims(tenant_id=None, tenant="tenant-a")
        base.update(overrides)
        return {key: value for key, value in base.items() if value is not None}

    return [
        Case("HS256 right key", own(claims()), None),
        Case("HS256 wrong key", own(claims(), "x" * 40), "token_invalid", "signature"),
        Case("HS256 unknown kid", own(claims(), kid="no-such-kid"), "token_invalid", "unknown_kid"),
        Case("HS256 alg none", unsigned(claims(), {"alg": "none"}), "token_invalid", "algorithm"),
        Case("HS256 iss missing", own(claims(iss=None)), "token_invalid", "issuer"),
        Case("HS256 iss wrong", own(claims(iss="https://evil.test")), "token_invalid", "issuer"),
        Case("HS256 aud missing", own(claims(aud=None)), "token_invalid", "audience"),
        Case("HS256 aud wrong", own(claims(aud="another-api")), "token_invalid", "audience"),
        Case("HS256 expired", own(claims(iat=now - 600, exp=now - 300)), "token_expired"),
        Case("HS256 exp a numeric string", own(claims(exp=str(now + 300))), "token_invalid", None),
        Case("HS256 exp a float", own(claims(exp=now + 300.5)), "token_invalid", "claims"),
        Case("HS256 exp past any date", own(claims(exp=10**400, iat=None)), "token_invalid", "lifetime"),
        Case("HS256 iat before any date", own(claims(iat=-(10**400))), "token_invalid", "claims"),
        Case("HS256 not yet valid", own(claims(nbf=now + 600, exp=now + 900)), "token_invalid", "not_yet_valid"),
        Case("HS256 tenant missing", own(claims(tenant=None)), "token_invalid", "claims"),
        Case("HS256 tenant a list", own(claims(tenant=["a"])), "token_invalid", "claims"),
        Case("HS256 roles a string", own(claims(roles="Admin")), "token_invalid", "claims"),
        Case("HS256 roles an object", own(claims(roles={"a": 1})), "token_invalid", "claims"),
    ]  # fmt: skip
