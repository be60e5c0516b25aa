"""The HTTP API: FastAPI routes for every handler, JWT auth, limits and the wire format."""

from asanoha.platform.http.application import build_http_app
from asanoha.platform.http.auth import authenticate, decode_token, issue_token

__all__ = ["authenticate", "build_http_app", "decode_token", "issue_token"]
