"""The layered CLI commands (pgmem context, reply, fact, profile, insights, mydata) against a
fresh database, in-process (pgmem.cli.main) with the real embedder."""
from __future__ import annotations

import json

import pytest

from pgmem.cli import main


@pytest.fixture
def cli(dsn, monkeypatch, capsys):
    monkeypatch.setenv("PGMEM_DSN", dsn)
    monkeypatch.delenv("PGMEM_LLM_BASE_URL", raising=False)

    def run(*args):
        code = main([*args, "--tenant", "acme"])
        out = capsys.readouterr()
        return code, out.out, out.err
    return run


def test_layered_cli(cli):
    code, out, _ = cli("context", "Hi, my name is Sam and I live in Oslo", "--conversation", "c", "--user", "sam")
    assert code == 0 and out.startswith("classified  ") and "intent=profile" in out and "profile    name=Sam, location=Oslo" in out
    code, out, _ = cli("context", "How does the HNSW index work?", "--conversation", "c", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["intent"] == "knowledge_base" and doc["user_id"] == "sam"
    assert [s["stage"] for s in doc["stages"]][0] == "classified" and doc["context"]["history"][0]["seq"] == 1
    code, out, _ = cli("reply", "We decided to use HNSW with m = 16.", "--conversation", "c")
    assert code == 0 and json.loads(out)["insights"][0]["type"] == "decision"
    code, out, _ = cli("fact", "sam", "location", "Bergen", "--statement", "I moved to Bergen")
    assert code == 0 and json.loads(out)["decision"] == "superseded"
    code, out, _ = cli("profile", "sam", "--json")
    assert json.loads(out) == {"name": "Sam", "location": "Bergen"}
    code, out, _ = cli("profile", "sam", "--history", "--key", "location")
    assert [line.split()[2] for line in out.splitlines()[2:]] == ["Oslo", "Oslo", "Bergen"]
    code, out, _ = cli("insights", "HNSW", "--user", "sam")
    assert "We decided to use HNSW with m = 16." in out
    code, out, _ = cli("mydata", "sam")
    assert json.loads(out)["tiers"]["semantic"]["current"] == {"name": "Sam", "location": "Bergen"}
    code, out, err = cli("mydata", "sam", "--erase")
    assert code != 0 and "add --yes to confirm" in err
    code, out, _ = cli("mydata", "sam", "--erase", "--yes")
    assert code == 0 and json.loads(out)["memories"] == 3
    code, out, _ = cli("mydata", "sam")
    assert json.loads(out)["tiers"]["conversational"]["conversations"] == 0
