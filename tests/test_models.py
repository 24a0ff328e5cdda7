from sqlalchemy import MetaData, create_engine, pool
from sqlalchemy.dialects import postgresql
from pgmem.migrate import sqlalchemy_url

def test_dump(dsn):
    import pgvector.sqlalchemy  # noqa
    e = create_engine(sqlalchemy_url(dsn), poolclass=pool.NullPool)
    m = MetaData()
    m.reflect(e, schema="pgmem")
    d = postgresql.dialect()
    for t in m.sorted_tables:
        print("TABLE", t.fullname, "PK", [c.name for c in t.primary_key])
        for c in t.columns:
            print("  ", c.name, c.type.compile(dialect=d), repr(c.type), c.nullable, c.server_default and getattr(c.server_default, 'arg', c.server_default), c.computed and c.computed.sqltext, c.identity and (c.identity.always,), [ (fk.target_fullname, fk.ondelete) for fk in c.foreign_keys])
        print("  CK", [str(ck.sqltext) for ck in t.constraints if ck.__class__.__name__ == 'CheckConstraint'])
    e.dispose()
    assert 0
