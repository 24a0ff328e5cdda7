"""Every public SQL function, procedure and view has an entry with an example in docs/reference.md."""
import re

from conftest import ROOT


def test_every_public_object_is_in_the_reference(conn):
    doc = (ROOT / "docs" / "reference.md").read_text()
    documented = set(re.findall(r"^## `([a-z_0-9]+)`", doc, re.M))
    names = {r[0] for r in conn.execute("""
        select p.proname from pg_proc p join pg_namespace n on n.oid = p.pronamespace
         where n.nspname = 'pgmem' and p.proname !~ '^_'
        union
        select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
         where n.nspname = 'pgmem' and c.relkind = 'v'""")}
    assert names - documented == set(), "run scripts/gen_reference.py"
    # each entry has an example and its output
    for name in names:
        section = doc.split(f"## `{name}`", 1)[1].split("\n## ", 1)[0]
        assert "```sql" in section and section.count("```") >= 4, name
