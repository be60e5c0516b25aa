"""Which algorithms a provider's key may verify: fixed by the key, never by the token.

A token's ``alg`` header is only compared with this set: an ``HS256`` token "signed" with a
provider's public key, or an ``RS256`` token checked against an EC key, is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

RSA_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
EC_ALGORITHMS = {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512", "secp256k1": "ES256K"}
OKP_ALGORITHMS = frozenset({"EdDSA"})


def algorithms_for(entry: Mapping[str, Any]) -> frozenset[str]:
    """The algorithms the JWK ``entry`` may verify: its own ``alg`` when the key set names
    one, else every algorithm of its type (RSA: RS* and PS*; EC: the one of its curve; OKP:
    EdDSA)."""
    declared = entry.get("alg")
    kty = entry.get("kty")
    if kty == "RSA":
        allowed = RSA_ALGORITHMS
    elif kty == "EC":
        curve = EC_ALGORITHMS.get(str(entry.get("crv")))
        allowed = frozenset({curve}) if curve else frozenset()
    elif kty == "OKP":
        allowed = OKP_ALGORITHMS
    else:
        allowed = frozenset()
    if isinstance(declared, str):
        return allowed & {declared}
    return allowed
