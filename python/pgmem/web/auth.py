"""Who a request acts for, bound exactly as the database binds logins (SECURITY.md).

``Authorization: Bearer <token>`` carries either

- a token of the MCP server's token map (``pgmem mcp --new-token --tenant T [--user U]``; the
  file keeps SHA-256 digests only): the request acts for its tenant, and for its user when it
  names one; or
- a signed tenant claim (an HS256 JWT, :mod:`pgmem.claims`): the request's database session
  carries it in ``pgmem.tenant_claim`` and the database verifies it at the first statement
  (``pgmem.current_tenant()``), as for any shared application role. A claim binds a tenant,
  not a user.

Anything else is HTTP 401 with a body that names nothing about the database. The token file is
read again when it changes, so a new token works without a restart.
"""
from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import ConfigError
from ..tenants import TENANT_RE
from ..tenants import claim_tenant as _claim_tenant

_JWT_RE = re.compile(r"[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{43}")


@dataclass(frozen=True)
class Principal:
    """The tenant (and user) a request acts for; ``claim``: the signed claim it came with."""

    tenant: str
    user: str | None = None
    claim: str | None = None
    token_id: str | None = field(default=None, compare=False, repr=False)  # the token's digest (limits per token)

    @property
    def via(self) -> str:
        return "claim" if self.claim else "token"


class Unauthorized(Exception):
    """No valid bearer token: answered 401, with no detail."""


class Authenticator:
    """Bearer tokens (the MCP token file) and signed claims -> :class:`Principal`."""

    def __init__(self, token_file: Path | None, *, claims: bool = True):
        self.token_file = Path(token_file) if token_file else None
        self.claims = claims
        self._lock = threading.Lock()
        self._stamp: tuple[float, int] | None = None
        self._principals: dict[str, Principal] = {}
        self._load()

    def _load(self) -> None:
        from ..mcp_server import TokenStore

        if self.token_file is None:
            return
        try:
            st = os.stat(self.token_file)
        except FileNotFoundError:
            self._principals, self._stamp = {}, None
            return
        stamp = (st.st_mtime, st.st_size)
        if stamp == self._stamp:
            return
        with self._lock:
            found = {}
            for digest, p in TokenStore(self.token_file).principals().items():
                found[digest] = Principal(p.tenant, p.user)
            self._principals, self._stamp = found, stamp

    @property
    def token_count(self) -> int:
        self._load()
        return len(self._principals)

    def principal(self, authorization: str | None) -> Principal:
        """The principal of an Authorization header, or :class:`Unauthorized`."""
        from ..mcp_server import TokenStore

        if not authorization:
            raise Unauthorized()
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token or len(token) > 4096:
            raise Unauthorized()
        if self.claims and _JWT_RE.fullmatch(token):
            try:
                tenant = _claim_tenant(token)  # read, not verified: the database verifies it
            except ConfigError:
                raise Unauthorized() from None
            if not isinstance(tenant, str) or not TENANT_RE.fullmatch(tenant):
                raise Unauthorized()
            return Principal(tenant, None, token)
        try:
            self._load()
        except ConfigError:  # a broken token file: logged by the caller, refused here
            raise Unauthorized() from None
        digest = TokenStore.digest(token)
        p = self._principals.get(digest)
        if p is None:
            raise Unauthorized()
        return replace(p, token_id=digest)


UNAUTHORIZED_BODY = {
    "error": "unauthorized",
    "message": "this request needs Authorization: Bearer <token>: a token made with "
               "'pgmem mcp --new-token --tenant <tenant> [--user <user>]', or a signed tenant claim",
}


def describe(p: Principal) -> dict:
    return {"tenant": p.tenant, "user": p.user, "via": p.via}


