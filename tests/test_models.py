"""pgmem.models describes the database exactly.

Four independent checks against a fresh database migrated to head (``dsn`` fixture):

1. SQLAlchemy reflection of schema pgmem vs the model: tables, columns, types (compiled for
   the postgresql dialect), nullability, identity, generated columns, primary keys, foreign
   keys (referred table/column and ON DELETE), check-constraint names, table comments.
2. The catalog of a copy of the tables created *from the model* (``create_all`` into a scratch
   schema) vs the catalog of the real tables: format_type, NOT NULL, identity, generated
   expression, default expression, and every constraint's definition, as PostgreSQL itself
   renders them. This covers what reflection cannot compare textually (server defaults,
   generated-column expressions, check constraints).
3. Alembic's ``compare_metadata`` (what a user's autogenerate would see): no differences.
4. The documented autogenerate hooks keep an application's autogenerate off pgmem's objects.
"""
from __future__ import annotations

import subprocess
import sys
import warnings

import pytest
from sqlalchemy import (BigInteger, Column, ForeignKey, MetaData, Table, Text, create_engine, insert,
                        pool, select, text)
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session

import pgmem.models as models
from pgmem import migrate
from pgmem.migrate import sqlalchemy_url

PG = postgresql.dialect()
SCRATCH = "pgmem_model_check"


def _engine(dsn: str, tenant: str | None = None):
    # search_path = public, as in an application: the test superuser is named "pgmem", so
    # its default "$user", public would otherwise make schema pgmem the default schema.
    options = "-c search_path=public" + (f" -c pgmem.tenant={tenant}" if tenant else "")
    return create_engine(sqlalchemy_url(dsn), poolclass=pool.NullPool, connect_args={"options": options})


@pytest.fixture
def engine(dsn):
    e = _engine(dsn)
    yield e
    e.dispose()


@pytest.fixture
def reflected(engine) -> MetaData:
    import pgvector.sqlalchemy  # noqa: F401  (registers 'vector' for reflection)

    md = MetaData()
    md.reflect(engine, schema="pgmem")
    return md


def _type(t) -> str:
    return t.compile(dialect=PG)


def _fks(table: Table) -> set[tuple]:
    return {(tuple(fk.column_keys), fk.referred_table.fullname,
             tuple(e.column.name for e in fk.elements), fk.ondelete)
            for fk in table.foreign_key_constraints}


def _check_names(table: Table) -> set[str]:
    from sqlalchemy import CheckConstraint

    return {c.name for c in table.constraints if isinstance(c, CheckConstraint)}


# --- 1. reflection ---------------------------------------------------------------------------

def table_differences(reflected: MetaData) -> list[str]:
    """What to change in python/pgmem/models.py so that it describes the database's tables."""
    db = {t.name for t in reflected.tables.values() if t.schema == "pgmem"}
    model = {t.name for t in models.metadata.tables.values()}
    mapped = {m.local_table.name for m in models.Base.registry.mappers}
    out = [f"table pgmem.{name} has no model: add a Table for it in python/pgmem/models.py (make_metadata or the "
           "helper of its revision's tier), its name to TABLE_NAMES and __all__, and a typed class (Base) for the ORM"
           for name in sorted(db - model)]
    out += [f"table pgmem.{name} is in python/pgmem/models.py but not in the database: remove it from the model, "
            "or add the migration that creates it" for name in sorted(model - db)]
    out += [f"TABLE_NAMES lists {name}, which is no table of the model" for name in sorted(set(models.TABLE_NAMES) - model)]
    out += [f"TABLE_NAMES lacks {name}" for name in sorted(model - set(models.TABLE_NAMES))]
    out += [f"table pgmem.{name} has no typed class: add one (class X(Base): __table__ = {name})"
            for name in sorted(model - mapped)]
    return out


def test_same_tables(reflected):
    assert all(t.schema == "pgmem" for t in models.metadata.tables.values())
    problems = table_differences(reflected)
    assert not problems, "\n".join(problems)


def test_a_table_without_a_model_fails_naming_what_to_add(engine):
    """A migration that adds a table without describing it in models.py fails test_same_tables,
    and the message says what to add (issue 28: the schema has one source, checked)."""
    import pgvector.sqlalchemy  # noqa: F401

    with engine.begin() as c:
        c.execute(text("create table pgmem.brand_new (id bigint primary key)"))
    md = MetaData()
    md.reflect(engine, schema="pgmem")
    assert table_differences(md) == [
        "table pgmem.brand_new has no model: add a Table for it in python/pgmem/models.py (make_metadata or the "
        "helper of its revision's tier), its name to TABLE_NAMES and __all__, and a typed class (Base) for the ORM"]


def test_columns_keys_and_constraints_match_reflection(reflected):
    problems: list[str] = []
    for mt in models.metadata.sorted_tables:
        dt = reflected.tables.get(mt.fullname)
        if dt is None:
            problems.append(f"{mt.fullname}: missing in the database")
            continue
        mcols, dcols = set(mt.c.keys()), set(dt.c.keys())
        if mcols != dcols:
            problems.append(f"{mt.name}: columns only in db {dcols - mcols} (add each to the table in "
                            f"python/pgmem/models.py), only in model {mcols - dcols}")
        for name in sorted(mcols & dcols):
            mc, dc = mt.c[name], dt.c[name]
            where = f"{mt.name}.{name}"
            if _type(mc.type) != _type(dc.type):
                problems.append(f"{where}: type {_type(mc.type)} in model, {_type(dc.type)} in db")
            if mc.nullable != dc.nullable:
                problems.append(f"{where}: nullable {mc.nullable} in model, {dc.nullable} in db")
            if (mc.computed is None) != (dc.computed is None):
                problems.append(f"{where}: computed {mc.computed} in model, {dc.computed} in db")
            elif mc.computed is not None and not (mc.computed.persisted and dc.computed.persisted):
                problems.append(f"{where}: generated column not STORED on both sides")
            m_id = None if mc.identity is None else mc.identity.always
            d_id = None if dc.identity is None else dc.identity.always
            if m_id != d_id:
                problems.append(f"{where}: identity always={m_id} in model, always={d_id} in db")
            if (mc.server_default is None) != (dc.server_default is None):
                problems.append(f"{where}: server default {mc.server_default!r} in model, {dc.server_default!r} in db")
        if [c.name for c in mt.primary_key] != [c.name for c in dt.primary_key]:
            problems.append(f"{mt.name}: primary key {[c.name for c in mt.primary_key]} in model, "
                            f"{[c.name for c in dt.primary_key]} in db")
        if _fks(mt) != _fks(dt):
            problems.append(f"{mt.name}: foreign keys {_fks(mt)} in model, {_fks(dt)} in db")
        if _check_names(mt) != _check_names(dt):
            problems.append(f"{mt.name}: check constraints {sorted(_check_names(mt))} in model, "
                            f"{sorted(_check_names(dt))} in db")
        if mt.comment != dt.comment:
            problems.append(f"{mt.name}: comment {mt.comment!r} in model, {dt.comment!r} in db")
    assert not problems, "\n".join(problems)


def test_generated_columns_are_computed_in_model(reflected):
    db_generated = {(t.name, c.name) for t in reflected.tables.values() for c in t.c if c.computed is not None}
    model_generated = {(t.name, c.name) for t in models.metadata.tables.values() for c in t.c
                       if c.computed is not None}
    assert db_generated == model_generated == models.GENERATED_COLUMNS
    # so neither Core nor the ORM writes them
    stmt = insert(models.memories).values(tenant="t", content="x").compile(dialect=PG)
    assert "tsv" not in stmt.params and "content_hash" not in stmt.params
    assert "tsv" not in str(stmt) and "content_hash" not in str(stmt)


def test_embedding_dimension_is_the_installed_one(engine):
    with engine.connect() as c:
        dim = c.execute(text("select value::int from pgmem.settings where tenant = '*' and key = 'embedding_dim'")).scalar()
    assert models.memories.c.embedding.type.dim == dim == models.DEFAULT_EMBEDDING_DIM


# --- 2. catalog of a copy created from the model ----------------------------------------------

CATALOG_COLUMNS = text("""
    select a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attidentity, a.attgenerated,
           pg_get_expr(d.adbin, d.adrelid)
      from pg_attribute a
      left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
     where a.attrelid = cast(:rel as regclass) and a.attnum > 0 and not a.attisdropped""")
CATALOG_CONSTRAINTS = text("""
    select conname, contype, pg_get_constraintdef(oid) from pg_constraint
     where conrelid = cast(:rel as regclass)""")


def _catalog(conn, schema: str, table: str) -> dict:
    rel = f"{schema}.{table}"
    cols = {r[0]: tuple(r[1:]) for r in conn.execute(CATALOG_COLUMNS, {"rel": rel})}
    cons = {r[0]: (r[1], r[2].replace(f"{SCRATCH}.", "pgmem.")) for r in conn.execute(CATALOG_CONSTRAINTS, {"rel": rel})}
    comment = conn.execute(text("select obj_description(cast(:rel as regclass), 'pg_class')"), {"rel": rel}).scalar()
    return {"columns": cols, "constraints": cons, "comment": comment}


def test_model_ddl_reproduces_the_catalog(engine):
    with engine.begin() as conn:
        conn.execute(text(f"create schema {SCRATCH}"))
        models.metadata.create_all(conn.execution_options(schema_translate_map={"pgmem": SCRATCH}))
        # search_path = public (engine): pgmem and the scratch schema are both rendered qualified
        problems = []
        for name in models.TABLE_NAMES:
            real, copy = _catalog(conn, "pgmem", name), _catalog(conn, SCRATCH, name)
            for col in sorted(set(real["columns"]) | set(copy["columns"])):
                r, c = real["columns"].get(col), copy["columns"].get(col)
                if r != c:
                    problems.append(f"{name}.{col}:\n   db:    {r}\n   model: {c}")
            for con in sorted(set(real["constraints"]) | set(copy["constraints"])):
                r, c = real["constraints"].get(con), copy["constraints"].get(con)
                if r != c:
                    problems.append(f"{name} constraint {con}:\n   db:    {r}\n   model: {c}")
            if real["comment"] != copy["comment"]:
                problems.append(f"{name} comment: db {real['comment']!r}, model {copy['comment']!r}")
        conn.execute(text(f"drop schema {SCRATCH} cascade"))
    assert not problems, "\n".join(problems)


# --- 3. Alembic compare_metadata ---------------------------------------------------------------

def _pgmem_only_name(name, type_, parent_names):
    if type_ == "schema":
        return name == "pgmem"
    if type_ == "table":
        return parent_names.get("schema_name") == "pgmem"
    return True


def _no_indexes(obj, name, type_, reflected, compare_to):
    # Indexes are deliberately not part of the model (HNSW/GIN, partial and expression
    # indexes belong to the migrations), so the database's indexes are excluded here.
    return type_ not in ("index", "unique_constraint")


def _diff_ops(diffs) -> list:
    flat = []
    for d in diffs:
        flat.extend(d if isinstance(d, list) else [d])
    return flat


def test_alembic_compare_metadata_reports_nothing(engine):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    with engine.connect() as conn, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mc = MigrationContext.configure(conn, opts={
            "include_schemas": True,
            "include_name": _pgmem_only_name,
            "include_object": _no_indexes,
            "compare_type": True,
            "compare_server_default": True,
        })
        diffs = _diff_ops(compare_metadata(mc, models.metadata))
    ops = [d[0] for d in diffs]
    # the essentials first, for a readable failure
    assert not [d for d in diffs if d[0] in ("add_table", "remove_table", "add_column", "remove_column")], diffs
    assert not [d for d in diffs if d[0] == "modify_type"], diffs  # includes vector(384) and tsvector
    assert not [d for d in diffs if d[0] == "modify_nullable"], diffs
    assert not [d for d in diffs if d[0] in ("add_fk", "remove_fk")], diffs
    assert not diffs, ops
    # "Computed default on pgmem.memories.tsv cannot be modified" = the generated expressions differ
    computed = [str(w.message) for w in caught if "Computed default" in str(w.message)]
    assert not computed, computed


# --- 4. the documented autogenerate hooks --------------------------------------------------------

def _app_metadata(fk_target="pgmem.memories.id", with_pgmem: bool = False) -> MetaData:
    app = MetaData()
    if with_pgmem:
        models.add_to_metadata(app)
    Table("notes", app,
          Column("id", BigInteger, primary_key=True),
          Column("memory_id", BigInteger, ForeignKey(fk_target, ondelete="CASCADE")),
          Column("body", Text))
    return app


def test_autogenerate_hooks_keep_pgmem_out(engine):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    with engine.connect() as conn:
        # without the hooks, autogenerate would drop pgmem's tables and its version table
        naive = MigrationContext.configure(conn, opts={"include_schemas": True})
        naive_diffs = _diff_ops(compare_metadata(naive, _app_metadata(models.memories.c.id)))
        removed = {(d[1].schema, d[1].name) for d in naive_diffs if d[0] == "remove_table"}
        assert ("pgmem", "memories") in removed and (None, migrate.VERSION_TABLE) in removed

        # the documented set-ups: the app's metadata alone, next to pgmem's, or with pgmem's
        # tables copied in (string foreign key); schema pgmem reflected or not
        setups = [
            _app_metadata(models.memories.c.id),
            [_app_metadata(models.memories.c.id), models.metadata],
            _app_metadata(with_pgmem=True),
        ]
        for target in setups:
            for include_schemas in (True, False):
                mc = MigrationContext.configure(conn, opts={
                    "include_schemas": include_schemas,
                    "include_name": models.include_name,
                    "include_object": models.include_object,
                })
                diffs = _diff_ops(compare_metadata(mc, target))
                assert [(d[0], d[1].name) for d in diffs] == [("add_table", "notes")], diffs
                fk = next(iter(diffs[0][1].foreign_keys))
                assert fk.column.table.fullname == "pgmem.memories"


def test_add_to_metadata():
    app = MetaData()
    tables = models.add_to_metadata(app)
    assert set(tables) == set(models.TABLE_NAMES)
    assert set(app.tables) == set(models.metadata.tables)
    assert tables["memories"] is not models.memories and tables["memories"].metadata is app
    assert models.add_to_metadata(app)["memories"] is tables["memories"]  # idempotent
    assert _type(models.add_to_metadata(MetaData(), 768)["memories"].c.embedding.type) == "VECTOR(768)"


# --- misc ----------------------------------------------------------------------------------------

def test_make_metadata_other_dimension():
    md = models.make_metadata(768)
    assert md is not models.metadata and md.schema == "pgmem"
    assert set(md.tables) == set(models.metadata.tables)
    assert _type(md.tables["pgmem.memories"].c.embedding.type) == "VECTOR(768)"
    assert _type(models.memories.c.embedding.type) == "VECTOR(384)"
    for bad in (0, 16001, "384"):
        with pytest.raises(ValueError):
            models.make_metadata(bad)


def test_models_module_does_not_import_torch():
    code = ("import sys, pgmem.models; "
            "bad = [m for m in ('torch', 'sentence_transformers') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_orm_round_trip(dsn):
    e = _engine(dsn, tenant="acme")
    try:
        with Session(e) as s:
            m = models.Memory(content="The  Quick brown fox", topics=["animals"], metadata_={"src": "test"})
            s.add(m)
            s.commit()  # the tenant comes from pgmem.tenant (trigger); tsv/content_hash are generated
            s.refresh(m)
            assert m.id is not None and m.tenant == "acme" and m.state == "active"
            assert m.metadata_ == {"src": "test"}
            assert m.content_hash is not None and "fox" in m.tsv
            same = s.execute(text("select md5(pgmem._content_key('the quick brown fox'))::uuid")).scalar()
            assert m.content_hash == same
            hist = s.scalars(select(models.HistoryEntry).where(models.HistoryEntry.memory_id == m.id)).all()
            assert [h.op for h in hist] == ["add"]
    finally:
        e.dispose()


def test_every_table_has_a_typed_class():
    mapped = {m.local_table.name for m in models.Base.registry.mappers}
    assert mapped == set(models.TABLE_NAMES)
    assert "metadata" not in models.Memory.__mapper__.attrs and "metadata_" in models.Memory.__mapper__.attrs
