"""Tests for pgmem.extraction: the heuristic rules and the LLM path over real HTTP.

No database is needed. The LLM tests run a real ThreadingHTTPServer on 127.0.0.1 that
speaks the OpenAI chat-completions protocol.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from pgmem.extraction import (
    CATEGORIES,
    Extraction,
    Extractor,
    HeuristicExtractor,
    LLMExtractor,
    emotion,
    extract_entities,
    keywords,
    make_extractor,
    summarize,
)

UTC = timezone.utc
NOW = datetime(2024, 5, 15, 12, 0, tzinfo=UTC)  # a Wednesday
H = HeuristicExtractor()


def ex(event: dict[str, Any] | str, now: datetime = NOW) -> Extraction:
    return H.extract(event, now=now)


# ============================================================================ who
@pytest.mark.parametrize(
    ("event", "who"),
    [
        ({"content": "hi", "actor": "user"}, "user"),
        ({"content": "hi", "who": "Alice"}, "Alice"),
        ({"content": "hi", "role": "assistant"}, "assistant"),
        ({"content": "hi", "actor": "user", "role": "assistant"}, "user"),
        ({"content": "3 results", "tool": "web_search"}, "tool:web_search"),
        ({"content": "3 results", "tool_name": "grep", "actor": "assistant"}, "tool:grep"),
        ({"content": "3 results", "role": "tool", "name": "calculator"}, "tool:calculator"),
        ({"content": "3 results", "tool": {"name": "sql", "args": {}}}, "tool:sql"),
        ({"content": "3 results", "actor": "tool:grep"}, "tool:grep"),
        ({"content": "3 results", "metadata": {"tool": "fetch"}}, "tool:fetch"),
        ("plain text", None),
    ],
)
def test_who(event, who):
    assert ex(event).who == who


# ============================================================================ when
@pytest.mark.parametrize(
    ("event", "when"),
    [
        ({"content": "x", "ts": 1715774400}, datetime(2024, 5, 15, 12, tzinfo=UTC)),
        ({"content": "x", "ts": 1715774400000}, datetime(2024, 5, 15, 12, tzinfo=UTC)),
        ({"content": "x", "when": "2024-05-15T10:00:00+02:00"}, datetime(2024, 5, 15, 8, tzinfo=UTC)),
        ({"content": "x", "timestamp": "2024-05-15T10:00:00Z"}, datetime(2024, 5, 15, 10, tzinfo=UTC)),
        ({"content": "x", "ts": datetime(2024, 1, 1, 9)}, datetime(2024, 1, 1, 9, tzinfo=UTC)),
        # The event's timestamp wins over a date in the text.
        ({"content": "yesterday", "ts": "2023-12-31"}, datetime(2023, 12, 31, tzinfo=UTC)),
        ("The deadline is 2024-06-01 for taxes.", datetime(2024, 6, 1, tzinfo=UTC)),
        ("Deployed at 2024-03-02T14:30:00Z.", datetime(2024, 3, 2, 14, 30, tzinfo=UTC)),
        ("Yesterday I met Alice.", datetime(2024, 5, 14, tzinfo=UTC)),
        ("I am tired today.", datetime(2024, 5, 15, tzinfo=UTC)),
        ("The build broke last Friday.", datetime(2024, 5, 10, tzinfo=UTC)),
        ("We met last wednesday.", datetime(2024, 5, 8, tzinfo=UTC)),  # today is Wednesday
        ("Yesterday I booked the 2024-07-01 flight.", datetime(2024, 5, 14, tzinfo=UTC)),
        ("I have used Vim since 2019.", None),
        ("No date here.", None),
    ],
)
def test_when(event, when):
    got = ex(event).when
    assert got == when
    if got is not None:
        assert got.tzinfo is not None and got.utcoffset() == timedelta(0)


def test_when_defaults_now_to_the_current_time():
    got = H.extract("Shipped it yesterday.").when
    expected = datetime.now(UTC).date() - timedelta(days=1)
    assert got is not None and got.date() in (expected, expected + timedelta(days=1))


def test_when_naive_now_is_utc():
    assert H.extract("today", now=datetime(2024, 5, 15, 23, 59)).when == datetime(2024, 5, 15, tzinfo=UTC)


# ============================================================================ where
@pytest.mark.parametrize(
    ("event", "where"),
    [
        ({"content": "x", "where": "Slack #ops"}, "Slack #ops"),
        ({"content": "see https://a.example/x", "location": "Berlin office"}, "Berlin office"),
        ("Check https://github.com/pgvector/pgvector/issues/42.", "https://github.com/pgvector/pgvector/issues/42"),
        ("(see https://en.wikipedia.org/wiki/Foo_(bar))", "https://en.wikipedia.org/wiki/Foo_(bar)"),
        ("I fixed /home/bob/proj/tests/test_api.py today.", "/home/bob/proj/tests/test_api.py"),
        ("Open C:\\Users\\bob\\notes.txt and read it.", "C:\\Users\\bob\\notes.txt"),
        ("Saved to src/pgmem/embedding.py.", "src/pgmem/embedding.py"),
        ("Edit ~/notes.txt please", "~/notes.txt"),
        ("Ping @carol in #backend about it.", "#backend"),
        ("chat:1234 user asked about pricing", "chat:1234"),
        ("See /etc/hosts and https://x.example/y", "https://x.example/y"),  # URL first
        ("Read /var/log/syslog, then ask in #ops", "/var/log/syslog"),  # path before chat id
        ("Use TCP/IP and/or UDP at 1/2 speed, 2024/05/01.", None),
        ({"content": "no place named", "session_id": "s-42"}, "session:s-42"),
        ({"content": "see https://a.example/", "session_id": "s-42"}, "https://a.example/"),
    ],
)
def test_where(event, where):
    assert ex(event).where == where


# ============================================================================ why / how
@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("I switched to PostgreSQL because SQLite locked up under load.", "SQLite locked up under load"),
        ("The flight was cancelled because of the storm.", "the storm"),
        ("I refactored the parser so that tests run faster.", "tests run faster"),
        ("In order to reduce latency, we cache embeddings.", "reduce latency"),
        ("I moved to Neovim since it supports Lua.", "it supports Lua"),
        ("I have used Vim since 2019.", None),
        ("I have been here since last week.", None),
        ("I want to learn Rust by building a CLI tool.", "learn Rust"),
        ("We need to fix the login bug; it blocks users.", "fix the login bug"),
        ("I'd like to visit Japan.", "visit Japan"),
        ("The cat sat on the mat.", None),
    ],
)
def test_why(text, why):
    assert ex(text).why == why


@pytest.mark.parametrize(
    ("text", "how"),
    [
        ("I fixed the flaky test by adding a retry so that CI stays green.", "adding a retry"),
        ("Deployed the app using Docker Compose on AWS last friday.", "Docker Compose on AWS"),
        ("We sync files via rsync over SSH.", "rsync over SSH"),
        ("I deployed it with Ansible.", "Ansible"),
        ("Had lunch with Alice.", None),
        ("I went to the cinema with my wife.", None),
        ("I agree with you.", None),
        ("Written by Bob.", None),  # "by" only before a gerund
        ("Done by Monday.", None),
        ("The cat sat on the mat.", None),
    ],
)
def test_how(text, how):
    assert ex(text).how == how


def test_why_and_how_together():
    got = ex("I want to learn Rust by building a CLI tool.")
    assert (got.why, got.how) == ("learn Rust", "building a CLI tool")


# ============================================================================ what / summary
def test_what_collapses_whitespace():
    got = ex({"content": "  I   moved\n to\tOslo.  "})
    assert got.what == "I moved to Oslo."


def test_structured_content_is_serialised():
    got = ex({"role": "tool", "name": "db", "content": {"rows": 3, "status": "ok"}})
    assert got.what == '{"rows": 3, "status": "ok"}'
    assert got.entities == []  # JSON keys are not quoted terms
    assert got.category == "context"


@pytest.mark.parametrize(
    ("text", "summary"),
    [
        ("I prefer tea.", "I prefer tea."),
        ("First sentence here. Second one follows.", "First sentence here."),
        ("Dr. Smith said the results were fine. Then we left.", "Dr. Smith said the results were fine."),
        ("Use e.g. this one. Not that.", "Use e.g. this one."),
        ("Version 3.5 shipped! Party.", "Version 3.5 shipped!"),
        ("line one\nline two", "line one"),
        ("Is it done? Yes.", "Is it done?"),
        ("", None),
    ],
)
def test_summary_first_sentence(text, summary):
    assert summarize(text) == summary


def test_summary_cut_at_word_boundary():
    text = "word " * 60 + "end."
    got = summarize(text)
    assert got is not None and len(got) <= 160 and got.endswith("…")
    assert got == ("word " * 32).strip() + "…"  # 32 words = 159 chars, then "…" = 160
    long_token = "x" * 300
    assert summarize(long_token) == "x" * 159 + "…"


def test_summary_on_extraction():
    text = ("The migration to the new cluster finished after many hours of careful work by the "
            "whole platform team, including the overnight shift, the reviewers and every on-call "
            "engineer. Later we celebrated.")
    got = ex(text).summary
    assert got is not None and len(got) <= 160 and got.endswith("…")
    assert got == ("The migration to the new cluster finished after many hours of careful work by "
                   "the whole platform team, including the overnight shift, the reviewers and every…")


# ============================================================================ topics
def test_topics_exact():
    assert ex("I switched the API to PostgreSQL because SQLite locked up under load.").topics == [
        "switched", "api", "postgresql", "sqlite", "locked", "load"]


def test_topics_frequency_then_first_occurrence():
    text = "Cache the queries. The cache stores queries; a query cache is fast. Redis is a cache."
    assert keywords(text) == ["cache", "query", "store", "fast", "redis"]


def test_topics_plural_stripping_and_stopwords():
    assert keywords("Had lunch with Alice and talked about queries, caches, indexes and classes.") == [
        "lunch", "alice", "talked", "query", "cache", "index", "class"]
    assert keywords("postgres and kubernetes status") == ["postgres", "kubernetes", "status"]
    assert keywords("The patches, boxes and tables") == ["patch", "box", "table"]
    assert keywords("I like C++ and C# but not Go.") == ["c++", "c#"]
    assert keywords("it is what it is") == []


def test_topics_at_most_eight():
    text = "alpha bravo charlie delta echo foxtrot golf hotel india juliet alpha"
    assert keywords(text) == ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    assert len(ex(text).topics) == 8


def test_topics_skip_url_noise():
    assert ex("Check https://www.github.com/pgvector/pgvector for the HNSW bug.").topics == [
        "pgvector", "check", "github", "hnsw", "bug"]


# ============================================================================ entities
@pytest.mark.parametrize(
    ("text", "entities"),
    [
        ("Yesterday I met Alice Smith at the Bank of America office in New York.",
         ["Alice Smith", "Bank of America", "New York"]),
        ("Ping @carol in #backend about the `user_id` migration and getUserName refactor.",
         ["@carol", "#backend", "user_id", "getUserName"]),
        ("The APIs use OAuth and JSON over HTTPS; see MAX_RETRIES.",
         ["API", "OAuth", "JSON", "HTTPS", "MAX_RETRIES"]),
        ("Deployed the app using Docker Compose on AWS EC2 last friday.", ["Docker Compose", "AWS EC2"]),
        ("I switched the API to PostgreSQL because SQLite locked up.", ["API", "PostgreSQL", "SQLite"]),
        ('He called it "the big rewrite" in the meeting.', ["the big rewrite"]),
        ("Run `pip install pgmem` then email bob@example.com or see https://x.example/Foo_Bar.",
         ["pip install pgmem"]),
        ("I LOVE THIS SO MUCH", []),  # shouting is not an acronym
        ("Python is great and python is fun.", []),  # sentence-initial single word
        ("I use Python and python and PYTHON.", ["Python"]),  # deduplicated, case-insensitive
        ("", []),
    ],
)
def test_entities(text, entities):
    assert extract_entities(text) == entities


def test_entities_at_most_twelve():
    names = [f"Name{chr(65 + i)}x" for i in range(15)]  # CamelCase-ish: NameAx, NameBx, ...
    text = "We met " + ", ".join(names) + "."
    assert extract_entities(text) == names[:12]
    assert len(ex(text).entities) == 12


# ============================================================================ category
@pytest.mark.parametrize(
    ("event", "category"),
    [
        ("I prefer dark mode.", "preference"),
        ("I like tea.", "preference"),
        ("I love hiking.", "preference"),
        ("I hate meetings on Monday.", "preference"),
        ("My favorite editor is Vim.", "preference"),
        ("I'd rather use Postgres.", "preference"),
        ("We use tabs rather than spaces.", "preference"),
        ("I know how to write SQL.", "skill"),
        ("I can speak French.", "skill"),
        ("She is experienced in Kubernetes.", "skill"),
        ("I have 10 years of Python.", "skill"),
        ("My name is Bob.", "fact"),
        ("I live in Berlin.", "fact"),
        ("I work at Acme.", "fact"),
        ("Postgres is a database.", "fact"),
        ("I was born in 1990.", "fact"),
        ("The deadline is 2024-06-01.", "fact"),
        ("The server has 64 GB of RAM.", "fact"),
        ("I can't find my keys.", "episode"),
        ("I liked the movie yesterday.", "episode"),
        ("We shipped version 2 yesterday.", "episode"),
        ({"role": "tool", "name": "grep", "content": "I prefer nothing; file is a dir"}, "context"),
        ({"role": "system", "content": "The user is on the free plan."}, "context"),
        ({"event_type": "observation", "content": "CPU at 90%."}, "context"),
    ],
)
def test_category(event, category):
    got = ex(event).category
    assert got == category and got in CATEGORIES


# ============================================================================ emotion
def test_emotion_neutral():
    assert emotion("The quarterly report is ready.") == (0.5, 0.25, 0.5)
    got = ex("The quarterly report is ready.")
    assert (got.valence, got.arousal, got.dominance) == (0.5, 0.25, 0.5)


def test_emotion_ordering():
    neutral = emotion("I read the report.")
    love = emotion("I love this!!")
    hate = emotion("I hate this.")
    assert love[0] > neutral[0] and love[1] > neutral[1]
    assert hate[0] < neutral[0] and hate[1] > neutral[1]
    assert emotion("I love this!!") == (0.95, 0.9, 0.65)  # love (.95,.7,.65) + 2 x "!"


def test_emotion_exclamations_and_caps_raise_arousal():
    base = emotion("this is broken")[1]
    assert emotion("this is broken!")[1] == pytest.approx(base + 0.1)
    assert emotion("this is broken!!!!!!")[1] == pytest.approx(base + 0.3)  # capped
    assert emotion("WHY IS THIS BROKEN")[1] == pytest.approx(base + 0.3)  # WHY, THIS, BROKEN
    assert emotion("the AWS bill")[1] == 0.25  # acronyms are not shouting


def test_emotion_negation_and_inflections():
    assert emotion("I'm not happy with it.")[0] == pytest.approx(0.05)
    assert emotion("No problem at all.")[0] == pytest.approx(0.75)
    assert emotion("She loved it")[0] == emotion("love")[0]
    assert emotion("It crashed twice")[0] == emotion("crash")[0]
    assert emotion("urgent: fix now")[1] > 0.8


def test_emotion_in_unit_range():
    for text in ("FURIOUS!!!!!! TERRIBLE AWFUL HORRIBLE", "calm calm", "thanks, sorry", "x"):
        assert all(0.0 <= v <= 1.0 for v in emotion(text))


# ============================================================================ the whole record
def test_full_extraction_record():
    got = H.extract(
        {"content": "I fixed the flaky test in /home/bob/proj/tests/test_api.py by adding a retry "
                    "so that CI stays green.",
         "actor": "user", "ts": "2024-05-15T09:30:00Z", "session_id": "s1", "user_id": "u1"},
        now=NOW,
    )
    assert got.to_dict() == {
        "who": "user",
        "what": "I fixed the flaky test in /home/bob/proj/tests/test_api.py by adding a retry so "
                "that CI stays green.",
        "when": datetime(2024, 5, 15, 9, 30, tzinfo=UTC),
        "where": "/home/bob/proj/tests/test_api.py",
        "why": "CI stays green",
        "how": "adding a retry",
        "topics": ["test", "fixed", "flaky", "bob", "proj", "test_api", "adding", "retry"],
        "entities": ["CI"],
        "summary": "I fixed the flaky test in /home/bob/proj/tests/test_api.py by adding a retry so "
                   "that CI stays green.",
        "category": "episode",
        "valence": 0.75,  # "fixed"
        "arousal": 0.4,
        "dominance": 0.7,
        "importance": None,
        "facts": [],  # no profile statement (layered tiers, issue 15)
        "source": "heuristic",
    }
    assert got.to_dict(iso=True)["when"] == "2024-05-15T09:30:00+00:00"
    json.dumps(got.to_dict(iso=True))


def test_empty_event():
    got = ex({"content": "   "})
    assert got == Extraction(source="heuristic")


def test_extract_many_and_determinism():
    events = ["I love tea.", {"content": "My name is Bob.", "actor": "user"}]
    first = H.extract_many(events, now=NOW)
    assert [e.category for e in first] == ["preference", "fact"]
    assert H.extract_many(events, now=NOW) == first
    assert isinstance(H, Extractor)


def test_bad_event_type():
    with pytest.raises(TypeError):
        H.extract(42)  # type: ignore[arg-type]


# ============================================================================ LLM: server
from scripted_llm import FakeLLM, completion, llm  # noqa: E402, F401  (the scripted server and its fixture)


@pytest.fixture(autouse=True)
def _no_llm_env(monkeypatch):
    for name in ("PGMEM_LLM_BASE_URL", "PGMEM_LLM_MODEL", "PGMEM_LLM_API_KEY", "PGMEM_LLM_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)


def warnings_of(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "pgmem.extraction" and r.levelno >= logging.WARNING]


GOOD = {
    "who": "user",
    "what": "User moved from Berlin to Oslo for a new job",
    "when": "2024-05-01",
    "where": "Oslo",
    "why": "a new job",
    "how": "by train",
    "topics": ["relocation", "job"],
    "entities": ["Berlin", "Oslo"],
    "summary": "User relocated to Oslo.",
    "category": "fact",
    "valence": 0.7,
    "arousal": 0.4,
    "dominance": 0.6,
    "importance": 0.8,
}
TEXT = "I moved from Berlin to Oslo for a new job."


def make_llm(state: FakeLLM, **kw: Any) -> LLMExtractor:
    kw.setdefault("model", "test-model")
    kw.setdefault("timeout", 5.0)
    kw.setdefault("backoff", 0.01)
    return LLMExtractor(state.base_url, **kw)


# ============================================================================ LLM: tests
def test_llm_good_answer_is_used(llm, caplog):
    llm.answer(200, completion(json.dumps(GOOD)))
    got = make_llm(llm).extract(TEXT, now=NOW)
    assert got.source == "llm"
    # the LLM stated no profile facts, so the heuristic's stand (layered tiers, issue 15)
    facts = [{"key": "location", "value": "Oslo", "confidence": 0.9, "statement": "I moved from Berlin to Oslo",
              "rule": "location", "previous": "Berlin"}]
    assert got.to_dict() == {**GOOD, "when": datetime(2024, 5, 1, tzinfo=UTC), "facts": facts, "source": "llm"}
    assert len(llm.requests) == 1 and not warnings_of(caplog)


def test_llm_request_body_and_headers(llm):
    llm.answer(200, completion(json.dumps(GOOD)))
    make_llm(llm, api_key="sk-test").extract(
        {"content": TEXT, "actor": "user", "ts": "2024-05-15T08:00:00Z"}, now=NOW)
    (req,) = llm.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == "Bearer sk-test"
    assert req["headers"]["Content-Type"] == "application/json"
    body = req["body"]
    assert body["model"] == "test-model"
    assert body["temperature"] == 0
    assert body["response_format"] == {"type": "json_object"}
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user"]
    system = body["messages"][0]["content"]
    for key in ("who", "what", "when", "where", "why", "how", "topics", "entities", "summary",
                "category", "valence", "arousal", "dominance", "importance"):
        assert f'"{key}"' in system
    user = json.loads(body["messages"][1]["content"])
    assert user["event"] == {"content": TEXT, "who": "user", "when": "2024-05-15T08:00:00+00:00"}
    assert user["current_time"] == NOW.isoformat()


def test_llm_no_authorization_without_key(llm):
    llm.answer(200, completion(json.dumps(GOOD)))
    make_llm(llm).extract(TEXT, now=NOW)
    assert "Authorization" not in llm.requests[0]["headers"]


def test_llm_event_fields_win(llm):
    llm.answer(200, completion(json.dumps({**GOOD, "who": "someone", "where": "Mars"})))
    got = make_llm(llm).extract(
        {"content": TEXT, "actor": "alice", "ts": 1715774400, "where": "#moving"}, now=NOW)
    assert (got.who, got.when, got.where) == ("alice", datetime(2024, 5, 15, 12, tzinfo=UTC), "#moving")
    assert got.source == "llm" and got.why == "a new job"


def test_llm_fenced_json_is_accepted(llm, caplog):
    llm.answer(200, completion("```json\n" + json.dumps(GOOD, indent=2) + "\n```"))
    got = make_llm(llm).extract(TEXT, now=NOW)
    assert got.source == "llm" and got.summary == "User relocated to Oslo."
    assert not warnings_of(caplog)


def test_llm_json_inside_prose_is_accepted(llm):
    llm.answer(200, completion("Here you go: " + json.dumps(GOOD) + " Hope it helps."))
    assert make_llm(llm).extract(TEXT, now=NOW).source == "llm"


def test_llm_malformed_json_falls_back_with_one_warning(llm, caplog):
    caplog.set_level(logging.DEBUG, logger="pgmem.extraction")
    llm.answer(200, completion('{"who": "user", "what": '))
    got = make_llm(llm, retries=2).extract(TEXT, now=NOW)
    assert got == H.extract(TEXT, now=NOW)
    assert got.source == "heuristic"
    (warning,) = warnings_of(caplog)
    assert llm.base_url + "/chat/completions" in warning.getMessage()
    assert "test-model" in warning.getMessage()
    assert "malformed JSON" in warning.getMessage()
    assert len(llm.requests) == 3  # retried, then gave up


def test_llm_retry_after_500(llm, caplog):
    llm.answer(500, {"error": "boom"})
    llm.answer(200, completion(json.dumps(GOOD)))
    got = make_llm(llm, retries=2).extract(TEXT, now=NOW)
    assert got.source == "llm" and got.where == "Oslo"
    assert len(llm.requests) == 2
    assert not warnings_of(caplog)


def test_llm_retry_after_429(llm):
    llm.answer(429, {"error": "slow down"})
    llm.answer(200, completion(json.dumps(GOOD)))
    assert make_llm(llm).extract(TEXT, now=NOW).source == "llm"
    assert len(llm.requests) == 2


def test_llm_persistent_500_falls_back(llm, caplog):
    llm.answer(503, {"error": "overloaded"})
    got = make_llm(llm, retries=2).extract(TEXT, now=NOW)
    assert got.source == "heuristic" and got == H.extract(TEXT, now=NOW)
    assert len(llm.requests) == 3
    (warning,) = warnings_of(caplog)
    assert "HTTP 503" in warning.getMessage()


def test_llm_4xx_is_not_retried(llm, caplog):
    llm.answer(401, {"error": "bad key"})
    got = make_llm(llm, retries=3).extract(TEXT, now=NOW)
    assert got.source == "heuristic"
    assert len(llm.requests) == 1
    (warning,) = warnings_of(caplog)
    assert "HTTP 401" in warning.getMessage() and "bad key" in warning.getMessage()


def test_llm_wrong_path_is_a_4xx(llm, caplog):
    llm.answer(200, completion(json.dumps(GOOD)))
    got = LLMExtractor(llm.base_url.replace("/v1", "/v2"), "m", backoff=0.01).extract(TEXT, now=NOW)
    assert got.source == "heuristic" and len(llm.requests) == 1
    assert len(warnings_of(caplog)) == 1


def test_llm_timeout_falls_back_in_bounded_time(llm, caplog):
    llm.answer(200, completion(json.dumps(GOOD)), delay=3.0)
    timeout, retries, backoff = 0.3, 1, 0.05
    extractor = make_llm(llm, timeout=timeout, retries=retries, backoff=backoff)
    start = time.monotonic()
    got = extractor.extract(TEXT, now=NOW)
    elapsed = time.monotonic() - start
    assert got.source == "heuristic"
    assert timeout * (retries + 1) <= elapsed < timeout * (retries + 1) + backoff + 1.0
    assert len(llm.requests) == retries + 1
    (warning,) = warnings_of(caplog)
    assert "timed out" in warning.getMessage()


def test_llm_connection_refused_falls_back(caplog):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    extractor = LLMExtractor(f"http://127.0.0.1:{port}/v1", "m", retries=1, backoff=0.01)
    got = extractor.extract(TEXT, now=NOW)
    assert got.source == "heuristic" and got == H.extract(TEXT, now=NOW)
    (warning,) = warnings_of(caplog)
    assert f"127.0.0.1:{port}" in warning.getMessage() and "connection" in warning.getMessage()


def test_llm_non_json_body_and_missing_choices(llm, caplog):
    llm.answer(200, b"<html>proxy error</html>")
    llm.answer(200, {"unexpected": True})
    got = make_llm(llm, retries=1).extract(TEXT, now=NOW)
    assert got.source == "heuristic" and len(llm.requests) == 2
    assert len(warnings_of(caplog)) == 1


def test_llm_out_of_range_values_are_coerced_or_dropped(llm):
    text = "The quarterly report is ready."  # heuristic: episode, neutral emotion
    heuristic = H.extract(text, now=NOW)
    llm.answer(200, completion(json.dumps({
        "who": "null",                 # a null word -> heuristic value
        "what": "  Quarterly   report\nready ",
        "when": "not a date",          # unparseable -> dropped
        "where": ["not", "a", "string"],
        "why": 42,                     # number -> "42"
        "topics": "Reports, Quarterly , reports",
        "entities": ["Q3", 7, None, "", "Q3"],
        "summary": "s" * 300,
        "category": "banana",          # not a category -> heuristic
        "valence": 7,                  # out of range -> heuristic
        "arousal": "0.8",              # numeric string -> 0.8
        "dominance": True,             # bool -> dropped
        "importance": 1.02,            # tiny overshoot -> clamped
        "extra": "ignored",
    })))
    got = make_llm(llm).extract(text, now=NOW)
    assert got.source == "llm"
    assert got.who is None  # the event names no actor and the heuristic has none
    assert got.what == "Quarterly report ready"
    assert got.when is None and got.where is None
    assert got.why == "42"
    assert got.topics == ["reports", "quarterly"]
    assert got.entities == ["Q3", "7"]  # numbers coerced to text, empties dropped
    assert got.summary == "s" * 159 + "…"
    assert got.category == heuristic.category == "episode"
    assert got.valence == heuristic.valence == 0.5
    assert got.arousal == 0.8
    assert got.dominance == heuristic.dominance
    assert got.importance == 1.0


def test_llm_category_synonyms_and_percentages(llm):
    llm.answer(200, completion(json.dumps({"category": "Preferences", "valence": "70%",
                                           "arousal": -3})))
    got = make_llm(llm).extract("I love tea!", now=NOW)
    assert got.category == "preference" and got.valence == 0.7
    assert got.arousal == H.extract("I love tea!", now=NOW).arousal


def test_llm_empty_content_skips_the_server(llm):
    llm.answer(200, completion(json.dumps(GOOD)))
    got = make_llm(llm).extract({"content": "", "actor": "user"}, now=NOW)
    assert got.source == "heuristic" and got.who == "user" and llm.requests == []


def test_llm_extract_many(llm):
    llm.answer(200, completion(json.dumps(GOOD)))
    got = make_llm(llm).extract_many([TEXT, TEXT], now=NOW)
    assert [g.source for g in got] == ["llm", "llm"] and len(llm.requests) == 2


# ============================================================================ configuration
def test_llm_reads_environment(monkeypatch, llm):
    monkeypatch.setenv("PGMEM_LLM_BASE_URL", llm.base_url + "/")
    monkeypatch.setenv("PGMEM_LLM_MODEL", "env-model")
    monkeypatch.setenv("PGMEM_LLM_API_KEY", "env-key")
    monkeypatch.setenv("PGMEM_LLM_TIMEOUT", "7.5")
    extractor = LLMExtractor()
    assert extractor.url == llm.base_url + "/chat/completions"
    assert (extractor.model, extractor.api_key, extractor.timeout) == ("env-model", "env-key", 7.5)
    llm.answer(200, completion(json.dumps(GOOD)))
    assert extractor.extract(TEXT, now=NOW).source == "llm"
    assert llm.requests[0]["headers"]["Authorization"] == "Bearer env-key"
    assert llm.requests[0]["body"]["model"] == "env-model"


def test_llm_configuration_errors(monkeypatch):
    with pytest.raises(ValueError, match="PGMEM_LLM_BASE_URL"):
        LLMExtractor(model="m")
    with pytest.raises(ValueError, match="PGMEM_LLM_MODEL"):
        LLMExtractor("http://127.0.0.1:9/v1")
    assert LLMExtractor("http://h/v1/chat/completions", "m").url == "http://h/v1/chat/completions"
    with pytest.raises(ValueError):
        LLMExtractor("http://h/v1", "m", timeout=0)
    monkeypatch.setenv("PGMEM_LLM_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="PGMEM_LLM_TIMEOUT"):
        LLMExtractor("http://127.0.0.1:9/v1", "m")


def test_make_extractor(monkeypatch):
    assert isinstance(make_extractor(), HeuristicExtractor)
    assert isinstance(make_extractor("heuristic"), HeuristicExtractor)
    monkeypatch.setenv("PGMEM_LLM_BASE_URL", "http://127.0.0.1:11434/v1")
    monkeypatch.setenv("PGMEM_LLM_MODEL", "qwen")
    chosen = make_extractor()
    assert isinstance(chosen, LLMExtractor) and chosen.model == "qwen"
    assert isinstance(make_extractor("auto"), LLMExtractor)
    assert isinstance(make_extractor("heuristic"), HeuristicExtractor)
    assert isinstance(make_extractor("llm"), LLMExtractor)
    with pytest.raises(ValueError, match="unknown extractor kind"):
        make_extractor("magic")
