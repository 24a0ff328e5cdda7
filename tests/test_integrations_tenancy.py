"""Every SQL function of the integrations (sql/128_integrations.sql) run as another tenant:
tenant a sees, finds and changes nothing of tenant b (items, sessions, memories by filters)."""
from __future__ import annotations

import json

import pytest


from conftest import connect, role_connect
from registry import INTEGRATION_FUNCTIONS  # noqa: F401
from sqlhelpers import rows, scalar

MARK = "SECRET-OF-B"


def _snapshot(su):
    return {t: sorted(json.dumps(r[0], sort_keys=True, default=str) for r in su.execute(
        f"select to_jsonb(x) - 'embedding' - 'tsv' from pgmem.{t} x where x.tenant = 'b'"))
        for t in ("memories", "session_items", "history")}


def test_integration_functions_are_isolated_between_tenants(cluster, dsn, roles):  # noqa: F811
    b = role_connect(cluster, dsn, roles, "app", "b")
    a = role_connect(cluster, dsn, roles, "app", "a")
    su = connect(dsn, tenant=None)
    try:
        b_item = scalar(b, "select pgmem.put_item(array['memories', 'bea'], 'k1', %s::jsonb)",
                        (json.dumps({"content": f"{MARK} Bea likes tea", "n": 1}),))
        b_mem = scalar(b, "select memory_id from pgmem.remember(%s, user_id => 'bea')", (f"{MARK} Bea lives in Quito",))
        assert scalar(b, "select pgmem.session_add_items('s1', %s::jsonb, 'bea', true)",
                      (json.dumps([{"role": "user", "content": f"{MARK} hello"}, {"type": "function_call", "name": "f"}]),)) == 2
        before = _snapshot(su)

        # a, with the same namespace, key, session and user names, sees and changes none of it
        assert rows(a, "select * from pgmem.get_item(array['memories', 'bea'], 'k1')") == []
        assert scalar(a, "select pgmem.delete_item(array['memories', 'bea'], 'k1')") is False
        assert rows(a, "select * from pgmem.search_items(array['memories'], 'Bea tea')") == []
        assert rows(a, "select * from pgmem.search_items(array['memories'])") == []
        assert rows(a, "select * from pgmem.list_item_namespaces()") == []
        assert rows(a, "select * from pgmem.list_memories('{\"user_id\": \"bea\"}')") == []
        assert rows(a, "select * from pgmem.list_memories()") == []
        assert rows(a, "select * from pgmem.session_get_items('s1')") == []
        assert scalar(a, "select pgmem.session_pop_item('s1')") is None
        assert scalar(a, "select pgmem.session_clear('s1')") == 0
        # a's own writes under the same names stay a's
        a_item = scalar(a, "select pgmem.put_item(array['memories', 'bea'], 'k1', '{\"content\": \"a: Bea is a cat\"}')")
        assert a_item != b_item
        assert scalar(a, "select pgmem.session_add_items('s1', '[{\"role\": \"user\", \"content\": \"a says hi\"}]')") == 1
        assert [r["session_get_items"]["content"] for r in rows(a, "select * from pgmem.session_get_items('s1')")] == ["a says hi"]
        got = rows(a, "select namespace, key, value from pgmem.get_item(array['memories', 'bea'], 'k1')")
        assert got == [{"namespace": ["memories", "bea"], "key": "k1", "value": {"content": "a: Bea is a cat"}}]
        assert MARK not in json.dumps(rows(a, "select * from pgmem.search_items(array['memories'], 'Bea')"), default=str)
        assert MARK not in json.dumps(rows(a, "select * from pgmem.list_memories()"), default=str)
        assert _snapshot(su) == before, "tenant a changed rows of tenant b"
        # b's export has its session items; erasing b's user takes them (and its memories) away
        exp = scalar(b, "select pgmem.export_user('bea')")
        assert [i["item"].get("content") for i in exp["session_items"]] == [f"{MARK} hello", None]
        assert b_mem in [m["id"] for m in exp["memories"]]
        b.execute("select * from pgmem.erase_user('bea')")
        assert scalar(su, "select count(*) from pgmem.session_items where tenant = 'b'") == 0
        assert scalar(su, "select count(*) from pgmem.session_items where tenant = 'a'") == 1
    finally:
        a.close()
        b.close()
        su.close()


def test_the_app_role_has_no_direct_write_on_session_items(cluster, dsn, roles):  # noqa: F811
    a = role_connect(cluster, dsn, roles, "app", "a")
    try:
        with pytest.raises(Exception, match="permission denied"):
            a.execute("insert into pgmem.session_items (tenant, session_id, seq, item) values ('a', 's', 1, '{}')")
    finally:
        a.close()
