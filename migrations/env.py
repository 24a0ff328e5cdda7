"""Alembic environment for pgmem.

Two lanes of SQL (after timescale/pgai): the revisions in versions/ change tables exactly
once; the idempotent files in sql/ (functions, views, triggers, grants) are re-applied after
every upgrade that ends at head. The version table lives in public as
``pgmem_alembic_version`` and is dropped when the database is downgraded to base, so
``alembic downgrade base`` leaves nothing of pgmem behind.
"""
from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool, text

from pgmem import migrate as pgmem_migrate

config = context.config
VERSION_TABLE = pgmem_migrate.VERSION_TABLE


def _url() -> str:
    x = context.get_x_argument(as_dictionary=True)
    return pgmem_migrate.sqlalchemy_url(x.get("dsn") or pgmem_migrate.resolve_dsn(None, superuser=True))


def run_migrations_offline() -> None:
    context.configure(url=_url(), literal_binds=True, version_table=VERSION_TABLE)
    with context.begin_transaction():
        context.run_migrations()


def _after(connection) -> None:
    head = context.get_context().script.get_current_head() if hasattr(context.get_context(), "script") else None
    current = connection.execute(
        text(f"select version_num from public.{VERSION_TABLE}")
    ).scalar() if connection.execute(text("select to_regclass(:t)"), {"t": f"public.{VERSION_TABLE}"}).scalar() else None
    if current is None:
        connection.execute(text(f"drop table if exists public.{VERSION_TABLE}"))
        return
    if head is None:
        from alembic.script import ScriptDirectory
        head = ScriptDirectory.from_config(config).get_current_head()
    if current == head:
        pgmem_migrate.apply_idempotent(connection)


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is None:
        engine = create_engine(_url(), poolclass=pool.NullPool)
        with engine.connect() as conn:
            _run(conn)
            conn.commit()
    else:
        _run(connection)


def _run(connection) -> None:
    context.configure(connection=connection, version_table=VERSION_TABLE, transactional_ddl=True)
    with context.begin_transaction():
        context.run_migrations()
        _after(connection)


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
