"""Tenant names and the tenant a signed claim names, on the client side.

The database checks the same rule and, for every statement, that the login may act for the
tenant (``pgmem.current_tenant()``, sql/005_tenancy.sql); the client checks the name early so that
a typo is an error that names the rule, before any connection is made. The claim itself is
read here, never verified: the database verifies it (pgmem.claims signs one).
"""
from __future__ import annotations

import base64
import json
import re
from typing import Any

from .errors import ConfigError

__all__ = ["TENANT_RE", "validate_tenant", "claim_tenant"]

#: a tenant name: 1 to 64 letters, digits and _ . : @ -, starting with a letter or digit
TENANT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}")


def validate_tenant(tenant: Any) -> str:
    """The tenant name, or a ConfigError naming the rule (the database checks the same rule,
    and that the login may act for the tenant: pgmem.current_tenant())."""
    if not isinstance(tenant, str) or not TENANT_RE.fullmatch(tenant):
        raise ConfigError(f"invalid tenant name {tenant!r}: use 1 to 64 letters, digits and _ . : @ -, "
                          "starting with a letter or digit")
    return tenant


def claim_tenant(token: str) -> str:
    """The tenant a signed claim names (read, not verified: the database verifies it)."""
    try:
        payload = token.split(".")[1]
        tenant = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["tenant"]
    except Exception:
        raise ConfigError("tenant_claim is not a signed tenant claim (header.payload.signature; see pgmem.claims)") \
            from None
    return validate_tenant(tenant)
