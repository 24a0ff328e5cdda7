"""The pure parts of the LoCoMo harness (bench/locomo.py): evidence ids, session times, the
stored text of a turn, and the metric. The data here is made up in LoCoMo's format; the real
file is never read by the tests (it is CC BY-NC evaluation data outside the repository)."""
from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import locomo  # noqa: E402

KNOWN = {"D1:1", "D1:2", "D1:3", "D8:6", "D9:17", "D11:26"}


def test_evidence_ids_split_on_commas_semicolons_and_spaces():
    valid, dropped = locomo.parse_evidence(["D8:6; D9:17", "D1:3,D1:1", "D1:2 D1:3"], KNOWN)
    assert valid == ["D8:6", "D9:17", "D1:3", "D1:1", "D1:2"]  # file order, repeats kept once
    assert dropped == []


def test_malformed_evidence_ids_are_dropped_not_guessed():
    valid, dropped = locomo.parse_evidence(["D:11:26", "D", "D1:1", "D99:1"], KNOWN)
    assert valid == ["D1:1"]
    assert dropped == ["D:11:26", "D", "D99:1"]  # "D:11:26" is not repaired into D11:26


def test_evidence_as_a_single_string():
    assert locomo.parse_evidence("D1:1;D1:2", KNOWN) == (["D1:1", "D1:2"], [])


@pytest.mark.parametrize("text, expected", [
    ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)),
    ("10:37 am on 27 June, 2023", datetime(2023, 6, 27, 10, 37, tzinfo=timezone.utc)),
    ("12:09 am on 1 January, 2024", datetime(2024, 1, 1, 0, 9, tzinfo=timezone.utc)),
    ("12:30 pm on 13 Sept, 2023".replace("Sept", "Sep"), datetime(2023, 9, 13, 12, 30, tzinfo=timezone.utc)),
])
def test_session_times(text, expected):
    assert locomo.parse_session_time(text) == expected


def test_session_time_that_is_not_one_says_what_is_expected():
    with pytest.raises(ValueError, match="1:56 pm on 8 May, 2023"):
        locomo.parse_session_time("yesterday")


def test_a_shared_photo_caption_is_appended():
    assert locomo.turn_text({"text": "Look at this!", "blip_caption": "a photo of a dog"}) == \
        "Look at this! [shares a photo of a dog]"
    assert locomo.turn_text({"text": " Hi ", "img_url": ["x"]}) == "Hi"


def _sample():
    return {"sample_id": "conv-x", "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bob",
        "session_2_date_time": "9:00 am on 2 May, 2023",
        "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "Back from Lisbon."}],
        "session_1_date_time": "8:00 pm on 1 May, 2023",
        "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "Where is the conference?"},
                      {"speaker": "Bob", "dia_id": "D1:2", "text": "In Lisbon.", "blip_caption": "a photo of a bridge"}],
    }, "qa": [
        {"question": "Where was the conference?", "answer": "Lisbon", "evidence": ["D1:1", "D1:2"], "category": 4},
        {"question": "Did Bob go?", "adversarial_answer": "yes", "evidence": ["D1:2"], "category": 5},
        {"question": "When?", "answer": "May", "evidence": ["D:1:2"], "category": 2},
        {"question": "Who came back?", "answer": "Ann", "evidence": ["D2:1; D1:1"], "category": 1},
    ]}


def test_conversation_turns_are_in_session_order_with_their_session_time():
    c = locomo.parse_conversation(_sample())
    assert [t.dia_id for t in c.turns] == ["D1:1", "D1:2", "D2:1"]  # session 1 before session 2
    assert [t.index for t in c.turns] == [0, 1, 2]
    assert c.turns[1].text == "In Lisbon. [shares a photo of a bridge]"
    assert c.turns[2].when == datetime(2023, 5, 2, 9, 0, tzinfo=timezone.utc)
    assert c.tenant == "locomo-conv-x"


def test_questions_kept_are_categories_1_to_4_with_a_valid_evidence_id():
    c = locomo.parse_conversation(_sample())
    # category 5 is left out; the category-2 question has only a malformed id and is left out too
    assert [(q.index, q.category, q.evidence) for q in c.questions] == [(0, 4, ["D1:1", "D1:2"]), (3, 1, ["D2:1", "D1:1"])]


def test_turn_events_carry_who_when_session_and_the_dia_id():
    c = locomo.parse_conversation(_sample())
    ev = locomo.turn_events(c)
    assert ev[1] == {"content": "In Lisbon. [shares a photo of a bridge]", "who": "Bob",
                     "when": "2023-05-01T20:00:00+00:00", "ts": "2023-05-01T20:00:00+00:00",
                     "session_id": "conv-x:session_1", "event_id": "conv-x:D1:2",
                     "metadata": {"locomo": "conv-x", "dia_id": "D1:2", "session": 1}}


def test_recall_at_k_is_the_share_of_evidence_turns_in_the_top_k():
    ranked = ["D1:2", "D9:17", "D1:1", "D8:6"]
    ev = ["D1:1", "D1:2", "D8:6"]
    assert locomo.recall_at(ranked, ev, 1) == pytest.approx(1 / 3)
    assert locomo.recall_at(ranked, ev, 3) == pytest.approx(2 / 3)
    assert locomo.recall_at(ranked, ev, 10) == pytest.approx(1.0)


def test_recall_through_a_turn_to_memory_map():
    # turns D1:1 and D1:2 were folded into memory 7 by the gate: memory 7 finds both
    key = {"D1:1": 7, "D1:2": 7, "D8:6": 9}.get
    assert locomo.recall_at([7, 3], ["D1:1", "D1:2", "D8:6"], 1, key) == pytest.approx(2 / 3)
    assert locomo.evidence_ranks([3, 7, 7, 9], ["D1:2", "D8:6", "D9:17"], key) == {"D1:2": 2, "D8:6": 4, "D9:17": None}


def test_summary_by_category_averages_per_question():
    rows = [{"category": 1, "ranks": {"a": 1, "b": None}},     # multi-hop: R@1 .5
            {"category": 4, "ranks": {"c": 3}},                # single-hop: R@1 0, R@5 1
            {"category": 4, "ranks": {"d": 12, "e": 30}}]      # R@20 .5
    s = locomo.summarize(rows)
    assert s["all"]["n"] == 3
    assert s["all"]["R@1"] == pytest.approx(0.5 / 3)
    assert s["all"]["R@5"] == pytest.approx((0.5 + 1) / 3)
    assert s["all"]["R@20"] == pytest.approx((0.5 + 1 + 0.5) / 3)
    assert s["multi-hop"] == {"n": 1, "R@1": 0.5, "R@5": 0.5, "R@10": 0.5, "R@20": 0.5}
    assert s["single-hop"]["R@10"] == pytest.approx(0.5)
    assert s["temporal"] == {"n": 0, "R@1": None, "R@5": None, "R@10": None, "R@20": None}


def test_bm25_tokens_and_baseline_text():
    assert locomo.bm25_tokens("Caroline: I'm at the LGBTQ group!") == ["caroline", "i", "m", "at", "the", "lgbtq", "group"]
    t = locomo.Turn("D1:1", 1, 0, "Ann", "Hi", datetime(2023, 5, 1, tzinfo=timezone.utc))
    assert locomo.baseline_text(t) == "Ann: Hi"


def test_question_slices():
    assert locomo.parse_slice("0:40") == slice(0, 40)
    assert locomo.parse_slice("7") == slice(7, 8)
    assert locomo.parse_slice(":5") == slice(None, 5)
    assert locomo.parse_slice(None) == slice(None)
