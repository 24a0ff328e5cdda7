"""Signed tenant claims for a shared application role (SECURITY.md, "A shared application role").

An application that serves many tenants through one database login cannot be bound to a
tenant with ``pgmem.grant_tenant``. Instead its auth service signs a short-lived claim for the
tenant of each request, with a key the application's login cannot read, and the application
passes it on: ``MemoryClient(tenant_claim=token)``, or ``SET pgmem.tenant_claim = '<token>'``.
The database verifies it (``pgmem.current_tenant()``, sql/005_tenancy.sql) with the key stored by
``select pgmem.add_claim_key('default')``, which returns the key once for the auth service.

A claim is an HS256 JSON Web Token, so any JWT library can sign one as well:
header ``{"alg": "HS256", "typ": "JWT", "kid": "<key id>"}``, payload
``{"tenant": "<tenant>", "exp": <unix seconds>, "role": "<login role>"}`` (role optional: the
claim then works only for sessions of that login).
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

from .errors import ConfigError
from .tenants import validate_tenant

MAX_TTL = 86400


def _b64url(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def sign_tenant_claim(key: bytes, tenant: str, *, ttl: float = 900, role: str | None = None,
                      kid: str = "default", now: float | None = None) -> str:
    """A claim that the holder may act for ``tenant`` for ``ttl`` seconds (at most a day)."""
    validate_tenant(tenant)
    if not isinstance(key, (bytes, bytearray, memoryview)) or len(bytes(key)) < 32:
        raise ConfigError("a claim key is the bytes pgmem.add_claim_key() returned (at least 32 bytes)")
    if not 0 < ttl <= MAX_TTL:
        raise ConfigError(f"ttl must be between 0 and {MAX_TTL} seconds, got {ttl}")
    header = {"alg": "HS256", "typ": "JWT", "kid": kid}
    payload = {"tenant": tenant, "exp": int((time.time() if now is None else now) + ttl)}
    if role is not None:
        payload["role"] = role
    msg = _b64url(json.dumps(header, separators=(",", ":")).encode()) + "." + \
        _b64url(json.dumps(payload, separators=(",", ":")).encode())
    sig = hmac.new(bytes(key), msg.encode(), hashlib.sha256).digest()
    return f"{msg}.{_b64url(sig)}"
