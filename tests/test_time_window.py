"""The time grammar of a question (pgmem.time_window, sql/199_time_window.sql; issue 29, item 3).

Phrasings written here, not taken from LoCoMo's dev file: relative ("two weekends ago", "the
week before last", "a couple of weeks ago", "last Friday"), named ("last Christmas", "Easter
2024", "Thanksgiving", "the 4th of July"), anchored to a date the question names, through that date ("two
days before 7 July, 2023", "the week after New Year's Day 2023") and ranges ("between June 3 and June 9
2022"), each resolved against the day the question is asked (as_of). Every expected
window is worked out from the calendar by hand in the comments. One database for the module:
each test is one read-only call.
"""
from __future__ import annotations

import uuid
from datetime import date, datetime, timezone

import pytest

from conftest import TEMPLATE, _janitor, connect

THU = datetime(2023, 8, 10, 15, 0, tzinfo=timezone.utc)   # a Thursday
SUN = datetime(2023, 8, 13, 9, 0, tzinfo=timezone.utc)    # a Sunday
JAN = datetime(2024, 1, 10, 12, 0, tzinfo=timezone.utc)   # a Wednesday in January


@pytest.fixture(scope="module")
def tconn(cluster):
    name = f"t_time_{uuid.uuid4().hex[:10]}"
    j = _janitor(cluster, name, TEMPLATE)
    j.init()
    try:
        with connect(cluster.dsn(name)) as c:
            yield c
    finally:
        j.drop()


def window(c, text: str, as_of: datetime):
    rows = c.execute("select lo, hi, tau_days, month, phrase from pgmem.time_window(%s, %s)", (text, as_of)).fetchall()
    assert len(rows) <= 1
    if not rows:
        return None
    lo, hi, tau, month, phrase = rows[0]
    return (lo.date() if lo else None, hi.date() if hi else None, tau, month)


D = date


@pytest.mark.parametrize("text, as_of, want", [
    # ---- dates, with and without a year (no year: the latest on or before the day asked)
    ("What did we cook on 2023-03-18?", THU, (D(2023, 3, 18), D(2023, 3, 19), 3.5, None)),
    ("the dentist on 3rd of March 2022", THU, (D(2022, 3, 3), D(2022, 3, 4), 3.5, None)),
    ("What happened on Sept. 5, 2021?", THU, (D(2021, 9, 5), D(2021, 9, 6), 3.5, None)),
    ("what did she say on March 3", THU, (D(2023, 3, 3), D(2023, 3, 4), 3.5, None)),
    ("the party on 20 December", THU, (D(2022, 12, 20), D(2022, 12, 21), 3.5, None)),  # December 2023 is ahead
    ("the flight on 31 June 2023", THU, None),  # no such day: no window rather than an error
    # ---- months, parts of months, weeks of a month, seasons, years, decades
    ("invoices from October of 2022", THU, (D(2022, 10, 1), D(2022, 11, 1), 7.0, None)),
    ("in late March 2023", THU, (D(2023, 3, 21), D(2023, 4, 1), 7.0, None)),
    ("at the beginning of April 2022", THU, (D(2022, 4, 1), D(2022, 4, 11), 7.0, None)),
    ("during the second week of May 2023", THU, (D(2023, 5, 8), D(2023, 5, 15), 3.5, None)),
    ("the last week of February 2024", THU, (D(2024, 2, 23), D(2024, 3, 1), 3.5, None)),  # a leap year
    ("the hike in winter 2022", THU, (D(2022, 12, 1), D(2023, 3, 1), 14.0, None)),
    ("the trip in autumn of 2020", THU, (D(2020, 9, 1), D(2020, 12, 1), 14.0, None)),
    ("songs from the 80s", THU, (D(1980, 1, 1), D(1990, 1, 1), 180.0, None)),
    ("what did she study in 2019?", THU, (D(2019, 1, 1), D(2020, 1, 1), 30.0, None)),
    ("Where did they go in September?", THU, (None, None, 7.0, 9)),  # that month of any year
    ("in the second week of November", THU, (None, None, 7.0, 11)),  # no year: as the month alone
    # ---- named days
    ("what did I buy last Christmas", THU, (D(2022, 12, 25), D(2022, 12, 26), 3.5, None)),
    ("what did I buy last Christmas", JAN, (D(2023, 12, 25), D(2023, 12, 26), 3.5, None)),
    ("plans for next Easter", THU, (D(2024, 3, 31), D(2024, 4, 1), 3.5, None)),
    ("the Easter 2019 egg hunt", THU, (D(2019, 4, 21), D(2019, 4, 22), 3.5, None)),
    ("dinner at Thanksgiving 2022", THU, (D(2022, 11, 24), D(2022, 11, 25), 3.5, None)),
    ("fireworks on the 4th of July", THU, (D(2023, 7, 4), D(2023, 7, 5), 3.5, None)),
    ("the New Year's Eve party", THU, (D(2022, 12, 31), D(2023, 1, 1), 3.5, None)),
    ("flowers for Mother's Day", THU, (D(2023, 5, 14), D(2023, 5, 15), 3.5, None)),
    # ---- relative to the day asked
    ("what did we do two weekends ago", THU, (D(2023, 7, 29), D(2023, 7, 31), 2.0, None)),
    ("who called last weekend", SUN, (D(2023, 8, 12), D(2023, 8, 14), 2.0, None)),  # asked on its Sunday
    ("the week before last", THU, (D(2023, 7, 24), D(2023, 7, 31), 3.5, None)),
    ("a couple of weeks ago", THU, (D(2023, 7, 24), D(2023, 7, 31), 3.5, None)),
    ("a few days ago", THU, (D(2023, 8, 7), D(2023, 8, 8), 1.0, None)),
    ("eleven months ago", THU, (D(2022, 8, 26), D(2022, 9, 25), 7.0, None)),
    ("the day before yesterday", THU, (D(2023, 8, 8), D(2023, 8, 9), 1.0, None)),
    ("anything last night?", THU, (D(2023, 8, 9), D(2023, 8, 10), 1.0, None)),
    ("what did the coach say last Friday", THU, (D(2023, 8, 4), D(2023, 8, 5), 1.0, None)),
    ("what did the coach say on Thursday", THU, (D(2023, 8, 3), D(2023, 8, 4), 1.0, None)),  # not today
    ("what is planned for next Tuesday", THU, (D(2023, 8, 15), D(2023, 8, 16), 1.0, None)),
    ("the past 3 weeks", THU, (D(2023, 7, 20), D(2023, 8, 11), 3.5, None)),
    ("earlier this month", THU, (D(2023, 8, 1), D(2023, 9, 1), 7.0, None)),
    ("next month", JAN, (D(2024, 2, 1), D(2024, 3, 1), 7.0, None)),
    ("what did we do last summer", THU, (D(2022, 6, 1), D(2022, 9, 1), 14.0, None)),  # this one has not ended
    ("what did we do last summer", JAN, (D(2023, 6, 1), D(2023, 9, 1), 14.0, None)),
    ("skiing this winter", JAN, (D(2023, 12, 1), D(2024, 3, 1), 14.0, None)),
    ("anything lately", THU, (D(2023, 7, 11), D(2023, 8, 11), 7.0, None)),
    # ---- anchored to a period the question names
    ("two days before 7 July, 2023", THU, (D(2023, 7, 5), D(2023, 7, 8), 1.0, None)),
    ("the week after New Year's Day 2023", THU, (D(2023, 1, 1), D(2023, 1, 9), 3.5, None)),
    ("three months prior to March 2023", THU, (D(2022, 12, 1), D(2023, 4, 1), 7.0, None)),
    ("the day after Christmas 2022", THU, (D(2022, 12, 25), D(2022, 12, 27), 1.0, None)),
    ("a week before last Christmas", THU, (D(2022, 12, 18), D(2022, 12, 26), 3.5, None)),
    ("the Sunday before 14 March 2023", THU, (D(2023, 3, 12), D(2023, 3, 15), 1.0, None)),  # a Tuesday
    ("the weekend before April 10, 2023", THU, (D(2023, 4, 8), D(2023, 4, 11), 2.0, None)),  # a Monday
    ("the note written on May 2,2022", THU, (D(2022, 5, 2), D(2022, 5, 3), 3.5, None)),
    # ---- ranges (the first date takes the second's year)
    ("Where was Ana between June 3 and June 9 2022?", THU, (D(2022, 6, 3), D(2022, 6, 10), 3.5, None)),
    ("from 3 March to 10 March 2024", THU, (D(2024, 3, 3), D(2024, 3, 11), 3.5, None)),
    ("from June 2021 until September 2021", THU, (D(2021, 6, 1), D(2021, 10, 1), 7.0, None)),
    # ---- the most precise period wins; no time, no window
    ("In 2022, what did she do on 14 May, 2022?", THU, (D(2022, 5, 14), D(2022, 5, 15), 3.5, None)),
    ("someone often mentions tennis and a novel", THU, None),
    ("Which doctor did she see?", THU, None),
    ("What did Caroline decide about the market?", THU, None),
    ("", THU, None),
])
def test_time_window_grammar(tconn, text, as_of, want):
    assert window(tconn, text, as_of) == want


def test_named_days_across_years(tconn):
    """Easter (the computus) and Thanksgiving (the fourth Thursday of November) against dates
    from the calendar."""
    easter = {2000: D(2000, 4, 23), 2008: D(2008, 3, 23), 2011: D(2011, 4, 24), 2019: D(2019, 4, 21),
              2024: D(2024, 3, 31), 2025: D(2025, 4, 20), 2038: D(2038, 4, 25)}
    for y, d in easter.items():
        assert tconn.execute("select pgmem._named_day('easter', %s)", (y,)).fetchone()[0] == d
    thanksgiving = {2021: D(2021, 11, 25), 2022: D(2022, 11, 24), 2023: D(2023, 11, 23), 2024: D(2024, 11, 28)}
    for y, d in thanksgiving.items():
        assert tconn.execute("select pgmem._named_day('thanksgiving', %s)", (y,)).fetchone()[0] == d
    assert tconn.execute("select pgmem._named_day('no such day', 2023)").fetchone()[0] is None


def test_every_kind_of_the_grammar_is_tested(tconn):
    """Each kind of period pgmem._time_kinds lists is reached by a phrasing above (and tells its
    kind from the text it matched)."""
    kinds = [r[0] for r in tconn.execute("select kind from pgmem._time_kinds() order by ord").fetchall()]
    examples = {"iso": "2023-03-18", "dmy": "3 march 2022", "mdy": "sept 5, 2021", "named_year": "easter 2019",
                "month_part": "late march 2023", "week_of": "the second week of may 2023", "my": "october of 2022",
                "season_year": "winter 2022", "dm": "march 3", "named": "last christmas", "decade": "the 80s",
                "year": "2019", "rel_day": "yesterday", "ago": "2 weekends ago", "before_last": "the week before last",
                "past_n": "past 3 weeks", "rel_unit": "last friday", "weekday": "thursday", "recent": "lately",
                "month": "in september"}
    assert set(kinds) == set(examples)
    for k in kinds:
        assert tconn.execute("select pgmem._time_kind(%s)", (examples[k],)).fetchone()[0] == k, k


def test_a_question_without_a_time_skips_the_grammar_cheaply(tconn):
    """A question without a time word costs one pattern test: no periods are located."""
    assert tconn.execute("select count(*) from pgmem.time_window('What did Caroline research?', %s)",
                         (THU,)).fetchone()[0] == 0


@pytest.mark.parametrize("text", ["999999999999 days ago", "2023-13-45", "99999 years ago", "9999 years ago",
                                  "9999 years before 7 July, 2023", "the 31st of February 2023", "on 31 June",
                                  "between 2023-02-30 and 2023-02-31"])
def test_dates_that_do_not_exist_give_no_window_and_no_error(tconn, text):
    assert window(tconn, text, THU) is None
