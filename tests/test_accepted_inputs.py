"""Issue 27, L3 and L4: inputs that were silently accepted, and errors that named no field.

Each test reproduces the probe's input and asserts a clear 22023 naming the argument (L3: the
input is refused; L4: the error says what is wrong and where). One database for the module;
every call in a rolled-back transaction.
"""
from __future__ import annotations

import json
import uuid

import numpy as np
import psycopg
import pytest

from conftest import TEMPLATE, _janitor, connect

TENANT = "inputs"
DIM = 384


@pytest.fixture(scope="module")
def ic(cluster):
    name = f"t_inputs_{uuid.uuid4().hex[:10]}"
    j = _janitor(cluster, name, TEMPLATE)
    j.init()
    with connect(cluster.dsn(name), tenant=TENANT) as c:
        v = np.zeros(DIM, dtype=np.float32)
        v[0] = 1
        c.execute("select pgmem.remember('a memory about kites', %s::vector, force => true)", (v,))
        c.execute("select pgmem.observe_turn('conv-1', 'hello there, what about kites?')")
        yield c
    j.drop()


def refused(c, q, params=(), *, names: str, sqlstate: str = "22023") -> str:
    with pytest.raises(psycopg.Error) as ei:
        with c.transaction(force_rollback=True):
            cur = c.execute(q, params)
            if cur.description:
                cur.fetchall()
    e = ei.value
    assert e.sqlstate == sqlstate, f"{e.sqlstate}: {e}"
    assert names in (e.diag.message_primary or ""), e.diag.message_primary
    return e.diag.message_primary


MB = 1024 * 1024


# ------------------------------------------------------------------ L3: silently accepted
def test_huge_fact_values_messages_insights_and_intent_texts(ic):
    refused(ic, "select * from pgmem.set_fact('u1', 'city', jsonb_build_object('v', repeat('x', 5 * %s)))", (MB,),
            names="value is")
    refused(ic, "select pgmem.observe_turn('conv-1', repeat('x', %s))", (MB,), names="content is")
    refused(ic, "select pgmem.add_insight('decision', repeat('x', %s), 0.9)", (MB,), names="content is")
    refused(ic, "select pgmem.cache_intent(repeat('x', %s), 'general', 0.9)", (MB,), names="query_text is")


def test_huge_link_metadata(ic):
    ids = [r[0] for r in ic.execute("select id from pgmem.memories order by id limit 2")]
    ids.append(ic.execute("select memory_id from pgmem.remember('another memory', force => true)").fetchone()[0])
    refused(ic, "select pgmem.bind(%s, %s, 'causal', 1, jsonb_build_object('pad', repeat('x', %s)))", (ids[0], ids[-1], MB),
            names="metadata is")


def test_a_work_item_for_the_end_of_time_and_a_bad_touch_kind(ic):
    refused(ic, "select pgmem.enqueue('bind', not_before => 'infinity')", names="not_before")
    refused(ic, "select pgmem.enqueue('touch', array[1]::bigint[], '{\"kind\": \"Not A Kind!\"}')", names="kind")


def test_blank_content_and_content_given_as_json(ic):
    refused(ic, "select * from pgmem.remember(%s)", ("\u200b\u200b\u200d\ufeff",), names="content is empty")
    refused(ic, "select * from pgmem.remember_many(%s::jsonb)", (json.dumps([{"content": {"text": "hi"}}]),),
            names="content must be a JSON string")


def test_an_expiry_before_the_memory(ic):
    refused(ic, "select * from pgmem.remember('expires in 1900', expires_at => '1900-06-01')", names="expires_at")


def test_a_profile_with_a_bogus_lexical_mode(ic):
    refused(ic, "insert into pgmem.profiles (tenant, name, method, weights, params) values (%s, 'b', 'search', '{}', %s)",
            (TENANT, json.dumps({"lexical": "bogus"})), names="params.lexical")
    refused(ic, "insert into pgmem.profiles (tenant, name, method, weights, params) values (%s, 'b', 'search', '{}', %s)",
            (TENANT, json.dumps({"neighbour_links": ["sideways"]})), names="params.neighbour_links")


def test_nans(ic):
    refused(ic, "select * from pgmem.attention((select embedding from pgmem.memories limit 1), array[1]::bigint[], 0)",
            names="scale")
    refused(ic, "select pgmem.ndcg(array['NaN']::float8[], 3)", names="relevance")
    refused(ic, "select count(*) from pgmem.search_insights('kites', min_confidence => 'NaN')", names="min_confidence")


# ------------------------------------------------------------------ L4: errors that named no field
def test_a_long_judged_query_names_the_argument(ic):
    """'index row requires 11472 bytes' for a 1 MB judge text."""
    mid = ic.execute("select min(id) from pgmem.memories").fetchone()[0]
    refused(ic, "select pgmem.judge(repeat(md5('x'), 100), %s)", (mid,), names="query is 3200 bytes")


def test_nested_metadata_names_the_argument(ic):
    """'stack depth limit exceeded' for nested metadata."""
    deep = "[" * 3000 + "]" * 3000
    refused(ic, "select * from pgmem.remember('deep', metadata => jsonb_build_object('x', %s::jsonb))", (deep,),
            names="metadata is nested more than 32 levels deep")


def test_a_bad_thread_id_names_the_argument(ic):
    """A raw foreign-key error for a bad thread_id."""
    refused(ic, "select pgmem.add_insight('decision', 'we decided to fly kites', 0.9, thread_id => 987654)", names="thread_id 987654")
    refused(ic, "select pgmem.add_insight('decision', 'we decided to fly kites', 0.9, message_id => 987654)", names="message_id 987654")


def test_a_long_document_is_remembered(ic):
    """remember of ~250 KB of ordinary text failed with "stack depth limit exceeded" (its keyword
    query removed 40,000 stop words recursively); it is stored now."""
    with ic.transaction(force_rollback=True):
        r = ic.execute("select decision from pgmem.remember(repeat('the cat sat on the mat ', 11000), force => true)").fetchone()
        assert r[0] == "stored"
