"""Web (issue 25): the per-tenant API keys that ``pgmem serve`` stores for chat.

- ``pgmem.api_keys``: one key per tenant and provider (Shadow's ``POST /api/config/apikey``).
  Write-only for the application: pgmem_app holds no privilege on the table (row-level
  security is on all the same, as on every table with a tenant column), and sql/900_security.sql
  revokes the administrators' too, as for ``pgmem.claim_keys``. Only the owner role reads it,
  through the SECURITY DEFINER functions of sql/570_web.sql: ``set_api_key``, ``has_api_key``
  and ``clear_api_key`` (the app's), and ``pgmem._api_key`` (administrators' logins only: the
  web server's login in the embedded default, which runs as the owner).

  ``export_user`` and ``erase_user`` leave the table alone: a key belongs to the tenant, not
  to a user, and is never exported (write-only); ``clear_api_key`` removes it.
  A replaced key is not kept anywhere: a secret is not history. ``fingerprint`` (the first 8
  hex digits of its SHA-256) tells keys apart without revealing them.
- pgmem's roles may read the installed revision (``public.pgmem_alembic_version``, the
  superuser's): ``pgmem.health`` compares it with the revision the server expects.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26
"""
from pgmem.migrate import drop_dependents, run_sql

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

UPGRADE = r"""
create table pgmem.api_keys (
  tenant      text not null,
  provider    text not null default 'openai' check (provider ~ '^[a-z][a-z0-9_]{0,31}$'),
  api_key     text not null check (api_key ~ '^[\x21-\x7e]+$' and char_length(api_key) between 8 and 512),
  fingerprint text not null check (fingerprint ~ '^[0-9a-f]{8}$'),
  set_at      timestamptz not null default now(),
  set_by      text not null default session_user,
  primary key (tenant, provider)
);
comment on table pgmem.api_keys is
  'LLM API keys per tenant and provider, stored by pgmem.set_api_key (POST /api/config/apikey of pgmem serve). Write-only: readable by the owner role alone, through pgmem._api_key, which only administrators'' logins may call.';

do $$
begin
  if to_regclass('public.pgmem_alembic_version') is not null then
    grant select on public.pgmem_alembic_version to pgmem_owner, pgmem_admin, pgmem_app, pgmem_reader;
  end if;
end $$;
"""

DOWNGRADE = """
drop table if exists pgmem.api_keys;
do $$
begin
  if to_regclass('public.pgmem_alembic_version') is not null then
    revoke select on public.pgmem_alembic_version from pgmem_owner, pgmem_admin, pgmem_app, pgmem_reader;
  end if;
end $$;
"""


def upgrade() -> None:
    run_sql(UPGRADE)


def downgrade() -> None:
    # the functions of sql/570_web.sql read the table (PL/pgSQL: no recorded dependency, but a
    # downgrade leaves nothing that names a missing table behind); the idempotent lane
    # recreates them on the next upgrade
    drop_dependents("pgmem.api_keys")
    run_sql(DOWNGRADE)
