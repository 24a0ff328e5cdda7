#!/usr/bin/env python3
"""Generate pgmem's labelled retrieval-evaluation set (bench/data/).

Writes, next to this script:

* ``data/conversations/<name>.jsonl`` -- one multi-session conversation per file, in the
  JSONL event format of ``examples/README.md`` (what ``pgmem ingest`` and
  ``MemoryClient.remember_many`` read);
* ``data/questions.json`` -- the labelled questions (format: ``bench/EVAL.md``).

Conversations: ``alex`` (frontend developer in Toronto: patient-portal redesign, a knee
injury before a half marathon, a move that gets postponed), ``noor`` (ecology PhD student
in Bristol: bumblebee fieldwork, GLMMs in R, a conference abstract), ``diego`` (bakery
owner in Austin: suppliers, an oven, hiring, a loan, a farmers market) and ``demo`` (a byte
copy of ``examples/demo_conversation.jsonl``: maya, tom and priya, with new questions
written against its event ids).

Deterministic and standard library only: one ``random.Random(SEED)`` drawn in a fixed
order, fixed JSON key order, ``\\n`` line endings, UTF-8. Every line of the conversations
and every question is written out below by hand; the random generator only fills slots in
a few templated tool outputs (search results, forecasts), spaces the timestamps and places
the generic "filler" requests (a pool of unrelated questions people ask assistants) inside
sessions. Questions refer to events by *key*; the generator resolves keys to event ids,
so a label can never point at the wrong event.

Usage::

    python bench/make_eval_data.py            # (re)write bench/data/
    python bench/make_eval_data.py --check    # exit 1 if the files are stale or invalid
    python bench/make_eval_data.py --stats    # counts per conversation and question type
    python bench/make_eval_data.py --show [QID ...]   # questions with the text of their labelled events
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

SEED = 20260706
HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
CONV_DIR = DATA / "conversations"
QUESTIONS_FILE = DATA / "questions.json"
DEMO_SOURCE = HERE.parent / "examples" / "demo_conversation.jsonl"
AGENT_ID = "assistant"
TYPES = ("single-fact", "multi-hop", "temporal", "preference-update", "no-answer")
LATEST_TS = "2026-11-15T00:00:00Z"  # every event is older: pgmem refuses created_at in the future


# =============================================================================== DSL
@dataclass
class Turn:
    actor: str
    content: str
    key: str | None = None
    where: str | None = None
    category: str | None = None
    meta: dict = field(default_factory=dict)
    supersedes: str | None = None


def U(content, key=None, cat=None, sup=None, where=None):
    return Turn("user", content, key=key, category=cat, supersedes=sup, where=where)


def A(content, key=None):
    return Turn("assistant", content, key=key)


def T(tool, content, key=None, where=None, args=None):
    return Turn("tool:" + tool, content, key=key, where=where, meta={"tool": tool, "args": args or {}})


@dataclass
class Session:
    sid: str
    start: str  # "YYYY-MM-DD HH:MM" UTC
    where: str
    title: str
    turns: list


@dataclass
class Conversation:
    name: str
    user: str
    sessions: list
    questions: list


def Q(qid, qtype, question, rel=None, sup=None, as_of=None, note="", user=None):
    return {"id": qid, "type": qtype, "question": question, "as_of": as_of, "rel": rel or {},
            "sup": sup or [], "note": note, "user": user}


# ======================================================================= filler pool
# Unrelated one-off requests, as people make them between real topics. They are the
# distractors every memory store accumulates; none of them answers a question.
FILLERS = [
    ("Quick one: what's 180 Fahrenheit in Celsius?", "About 82°C."),
    ("Rewrite 'pls send the doc asap' so it sounds polite.", "Could you send me the document when you get a chance today? Thank you!"),
    ("Synonym for 'robust' in a report, please.", "Depending on the sense: resilient, sturdy, reliable or well-tested."),
    ("How many minutes is 2.75 hours?", "165 minutes."),
    ("What's the capital of Australia? Settling a bet.", "Canberra, not Sydney."),
    ("How long do I boil an egg for a jammy yolk?", "About 6.5 minutes from boiling water, then straight into ice water."),
    ("Affect vs effect, one line.", "'Affect' is usually the verb (to influence), 'effect' the noun (the result)."),
    ("How do I undo my last git commit but keep the changes?", "git reset --soft HEAD~1"),
    ("Funny Wi-Fi network name?", "'Pretty Fly for a Wi-Fi', 'The LAN Before Time' or 'Bill Wi the Science Fi'."),
    ("What's 15% of 86.40?", "12.96."),
    ("How do I get a red wine stain out of a cotton shirt?", "Blot, rinse from the back with cold water, then a mix of dish soap and hydrogen peroxide (test a hidden spot first), and wash cold."),
    ("Recommend a history podcast with short episodes.", "'History Daily' (about 15 minutes an episode) or 'Noble Blood'."),
    ("What year did the Berlin Wall fall?", "1989, on 9 November."),
    ("Fewer emails or less emails?", "Fewer emails: emails are countable."),
    ("Write a haiku about Mondays.", "Alarm's second plea / steam climbs from the kettle spout / inbox, open wide"),
    ("How many tablespoons are in a quarter cup?", "Four."),
    ("What does HTTP status 418 mean?", "'I'm a teapot', an April Fools' joke from RFC 2324 that some servers still implement."),
    ("Shortcut to reopen a closed browser tab?", "Ctrl+Shift+T (Cmd+Shift+T on a Mac)."),
    ("How do I decline a meeting politely?", "'Thanks for including me. I can't join this one, but I'm happy to read the notes and follow up async.'"),
    ("How do I keep basil alive indoors?", "Sunniest window, water when the top centimetre of soil is dry, pinch off flower buds and harvest from the top."),
    ("What's the boiling point of water at 2,000 metres?", "About 93°C."),
    ("How do I centre a div these days?", "On the parent: display: flex; justify-content: center; align-items: center;"),
    ("Plural of octopus?", "'Octopuses' is standard; 'octopi' is common but etymologically off."),
    ("Best way to clean a cast-iron pan?", "Hot water and a brush, no long soaks; dry it on the stove and wipe a thin film of oil on while it's warm."),
    ("Board game for four adults who don't play much?", "Ticket to Ride or Codenames; Wingspan if they like something calmer."),
    ("How do I make a bash script stop at the first error?", "Put set -euo pipefail near the top."),
    ("Summarise Hamlet in two sentences.", "A Danish prince learns his uncle murdered his father to take the throne and marry his mother. His hesitation about revenge ends with almost everyone dead, Hamlet included."),
    ("How long can cooked rice stay in the fridge?", "About 3-4 days, cooled within an hour of cooking."),
    ("What's the difference between 'i.e.' and 'e.g.'?", "'i.e.' means 'that is' (restating); 'e.g.' means 'for example'."),
    ("Convert 5 miles to kilometres.", "About 8.05 km."),
    ("Can you suggest a name for a book club?", "'Spine Tinglers', 'Prose Before Bros', 'The Dog-Eared Society' or 'Between the Lines'."),
    ("Why is the sky blue, short version?", "Air molecules scatter short (blue) wavelengths of sunlight much more than long (red) ones, so blue light reaches us from every direction."),
    ("How do I take a screenshot of one window on Windows?", "Alt+Print Screen copies the active window; Win+Shift+S lets you pick a region."),
    ("Good stretch for a stiff neck at the desk?", "Chin tucks: pull your chin straight back, hold 5 seconds, 10 times; then slow ear-to-shoulder tilts."),
    ("What's a polite way to ask for a deadline extension?", "'I want to do this properly and need two more days; could I send it on Thursday instead of Tuesday?'"),
    ("How many ounces in a pound?", "Sixteen."),
    ("Give me a quick fact to open a presentation.", "Honey found in Egyptian tombs was still edible after about 3,000 years."),
    ("What's the time difference between London and Tokyo in winter?", "Tokyo is 9 hours ahead of London in winter (8 in British summer time)."),
    ("Is it 'who' or 'whom' in 'to ___ it may concern'?", "'Whom': it's the object of 'to'."),
    ("How do I split a PDF into two files on a Mac?", "Open it in Preview, show thumbnails, drag the pages you want to the desktop, or print to PDF with a page range."),
]


# ======================================================================= tool templates
def alex_apartment_listings(rng: random.Random) -> str:
    rows = [("417 Brunswick Avenue", "1 bed, 2nd floor of a house, cats allowed", 2350)]
    for addr, desc in (("88 Walmer Road", "1 bed + den, no pets"), ("12 Madison Avenue", "1 bed, basement, cats allowed"),
                       ("560 Spadina Road", "1 bed, high-rise, pets on approval"), ("31 Admiral Road", "junior 1 bed, no pets")):
        rows.append((addr, desc, rng.randrange(2150, 2750, 25)))
    rng.shuffle(rows)
    lines = ["Rentals: The Annex, Toronto, 1 bedroom, max CAD 2,400/month, available Sep 2026"]
    for i, (addr, desc, price) in enumerate(rows, 1):
        lines.append(f"{i}. {addr} - {desc} - CAD {price:,}/month - https://rentals.example/to/{addr.split()[0]}")
    return "\n".join(lines)


def alex_movers(rng: random.Random) -> str:
    rows = [("Two Guys Moving", "flat CAD 1,150, boxes included")]
    for name in ("Annex Movers Co.", "Queen East Relocation", "BudgetHaul Toronto"):
        rows.append((name, f"CAD {rng.randrange(130, 190, 5)}/hour, 3-hour minimum, {rng.choice([2, 3])} movers"))
    lines = ["Movers, Leslieville -> The Annex, 1-bedroom, Sat 29 Aug 2026"]
    for i, (name, price) in enumerate(rows, 1):
        lines.append(f"{i}. {name}: {price}, rated {round(rng.uniform(4.0, 4.9), 1)}/5")
    return "\n".join(lines)


def alex_omakase(rng: random.Random) -> str:
    rows = [("Kaito Omakase", "Ossington Ave", 185), ("Sora Counter", "Baldwin St", None),
            ("Hinoki", "Queen St W", None), ("Umi no Ie", "Dundas St W", None)]
    lines = ["web_search(\"omakase Toronto Saturday 25 July two people\")"]
    for i, (name, street, price) in enumerate(rows, 1):
        price = price or rng.randrange(140, 260, 5)
        lines.append(f"{i}. {name} ({street}) - {rng.choice([14, 16, 17, 18])}-course counter menu, CAD {price} per person, "
                     f"{rng.choice(['7pm seating available', 'waitlist only', '8:30pm seating available', '6pm seating available'])}")
    return "\n".join(lines)


def weather(place: str, day: str, rng: random.Random, base: int, extra: str) -> str:
    t1 = base + rng.randint(-2, 1)
    t2 = t1 + rng.randint(3, 6)
    t3 = t2 + rng.randint(1, 4)
    hum = rng.randint(48, 82)
    return f"{place} - forecast {day}: 07:00 {t1}°C, 10:00 {t2}°C, 13:00 {t3}°C, humidity {hum}%, {extra}"


def noor_gift_search(rng: random.Random) -> str:
    rows = [("Aramex", "3-5 working days", rng.randint(24, 38)), ("DHL Express", "2-4 working days", rng.randint(41, 62)),
            ("Royal Mail International Tracked", "7-12 working days", rng.randint(14, 22))]
    lines = ["web_search(\"reliable parcel delivery UK to Amman Jordan\")"]
    for i, (name, eta, price) in enumerate(rows, 1):
        lines.append(f"{i}. {name}: {eta}, from £{price} for a small parcel up to 1 kg, tracked")
    return "\n".join(lines)


def diego_repair_search(rng: random.Random) -> str:
    rows = ["Texas Oven Service", "Capital Kitchen Repair", "Hill Country Restaurant Equipment"]
    lines = ["web_search(\"Bongard deck oven repair Austin TX\")"]
    for i, name in enumerate(rows, 1):
        lines.append(f"{i}. {name} - {rng.choice(['services Bongard and MIWE', 'commercial ovens, all brands', 'deck and rack ovens'])}"
                     f" - call-out fee ${rng.randrange(95, 180, 5)} - rated {round(rng.uniform(4.1, 4.9), 1)}/5")
    return "\n".join(lines)


def diego_oven_quotes(rng: random.Random) -> str:
    rows = [("Rational iCombi Pro 10-1/1", 32400), ("Unox Cheftop Mind.Maps Plus 10", None),
            ("Bongard Cervap compact deck oven, 3 decks", None)]
    lines = ["web_search(\"second oven quote bakery Austin combi deck\")"]
    for i, (name, price) in enumerate(rows, 1):
        price = price or rng.randrange(21000, 39000, 100)
        lines.append(f"{i}. {name}: ${price:,} installed, lead time {rng.choice([2, 3, 4, 5])} weeks")
    return "\n".join(lines)


# =================================================================== conversation: alex
def alex(rng: random.Random) -> Conversation:
    W, M, P = "chat:web/alex", "chat:mobile/alex", "/home/alex/code/patient-portal"
    CAL = "calendar:alex@lumen.example"
    S = [
        Session("s01", "2026-07-06 12:30", W, "Alex introduces himself, work and running", [
            U("Hi! I'm Alex Romero. I'd like you to keep track of work and life stuff for me this summer.", cat="fact"),
            A("Hi Alex, happy to. Tell me a bit about yourself and I'll remember the important parts."),
            U("I'm a frontend developer at Lumen Health here in Toronto, mostly React and TypeScript. The office is at 220 King Street West.", key="job", cat="fact"),
            A("Got it: frontend developer at Lumen Health (React, TypeScript), office at 220 King Street West, Toronto.", key="job_ack"),
            U("My big thing this summer is the redesign of the patient portal. I'm the tech lead and the beta has to ship on Friday 14 August.", key="project", cat="fact"),
            A("Patient portal redesign, you're the tech lead, beta due Friday 14 August. That's about five and a half weeks; want to sketch milestones later?", key="project_ack"),
            U("Yes, later this week. Some personal preferences first."),
            U("I run on coffee: two double espressos every morning before I open the laptop, and one more after lunch.", key="coffee_old", cat="preference"),
            A("Two double espressos in the morning and one after lunch, noted."),
            U("For code you write for me: tabs, four wide, and no trailing commas. I find trailing commas ugly.", key="tabs_old", cat="preference"),
            A("Understood: tabs with width 4 and no trailing commas in the code I give you.", key="tabs_old_ack"),
            U("I'm also training for the Toronto Waterfront half marathon on Sunday 18 October.", key="race", cat="fact"),
            U("Goal is under 1:45. My personal best is 1:51 from last year's race in Hamilton.", key="goal_old", cat="preference"),
            A("Sub-1:45 means about 4:58 per kilometre, six minutes faster than your PB. A 14-week block from now fits well.", key="goal_old_ack"),
            U("And I have a cat, Miso. Three-year-old grey tabby, very opinionated.", key="cat", cat="fact"),
            A("Miso, the opinionated grey tabby. Noted."),
            U("What does my week look like?"),
            T("calendar", "Calendar alex@lumen.example, 6-12 Jul 2026 (America/Toronto):\n- Mon 06 Jul 10:00-11:00 Portal sprint planning\n- Wed 08 Jul 18:30-19:30 Tempo run, Beaches Running Club\n- Thu 09 Jul 14:00-15:00 Design review with Hana Kim\n- Sat 11 Jul 07:00-09:00 Long run", where=CAL, args={"range": "2026-07-06/2026-07-12"}),
            A("Sprint planning today at 10, a tempo run with the Beaches club on Wednesday evening, the design review with Hana on Thursday and a long run on Saturday morning."),
        ]),
        Session("s02", "2026-07-09 23:05", M, "Apartment hunting in the Annex; Miso and moving", [
            U("Apartment hunt: I'm leaving my place in Leslieville. Looking for a one-bedroom in the Annex, under 2,400 a month, and it must allow cats.", key="apt_search"),
            T("web_search", alex_apartment_listings(rng), key="apt_listings", args={"query": "1 bedroom Annex Toronto cats allowed under 2400"}),
            A("Two fit the budget and allow cats: 417 Brunswick Avenue (2nd floor of a house) and 12 Madison Avenue (basement). Brunswick is the better light and a 4-minute walk to Spadina station."),
            U("Viewing the Brunswick one tomorrow at 6."),
            U("My partner Sam is moving in with me. Sam is pescatarian and obsessed with Japanese food, if you ever help with dinners.", key="sam_food", cat="fact"),
            A("Noted: Sam is pescatarian and loves Japanese food."),
            U("Miso eats Purina chicken kibble, dry food twice a day, in case you help me order supplies.", key="miso_food_old", cat="preference"),
            A("Noted: chicken kibble, twice a day."),
            U("How do I make moving day less stressful for her?"),
            A("Set up one quiet room first (bed, litter, water, a worn T-shirt of yours), keep her in it with the door shut while the movers work, and plug in a Feliway diffuser a few days before."),
        ]),
        Session("s03", "2026-07-11 15:20", M, "Lease signed; movers booked", [
            U("We signed the lease! One-bedroom at 417 Brunswick Avenue in the Annex, 2,350 dollars a month, cats allowed. It starts on 1 September.", key="apt_new", cat="fact"),
            A("Congratulations! 417 Brunswick Avenue, 2,350 a month from 1 September. Want to book movers now? Late-August weekends go fast.", key="apt_ack"),
            U("Yes, get me quotes for a one-bedroom, Leslieville to the Annex, Saturday 29 August."),
            T("web_search", alex_movers(rng), key="movers_search", args={"query": "movers Toronto 1 bedroom Leslieville Annex 29 August"}),
            A("Two Guys Moving is the only flat rate (1,150 with boxes); the hourly ones come to about the same for a one-bedroom but can run over."),
            U("Booked Two Guys Moving for Saturday 29 August at 8am. 1,150 flat, they bring the boxes.", key="movers_old", cat="fact"),
            T("calendar", "Created event in alex@lumen.example: Sat 29 Aug 2026 08:00-14:00 \"Move to 417 Brunswick Ave (Two Guys Moving)\"", key="movers_cal_old", where=CAL),
            A("It's in your calendar. I'll remind you a week before to change your address with the bank and with Lumen's HR."),
            U("Did my long run this morning: 16 km at 5:25 per km, felt strong."),
            A("Good pace for this stage. Keep long runs easy; the sub-1:45 work happens in the tempo sessions."),
        ]),
        Session("s04", "2026-07-13 13:05", W, "Portal: date-fns upgrade breaks the date picker; WCAG; milestones", [
            U("Portal tests are red since I bumped date-fns to v3. The date picker suite."),
            T("shell", "$ npm test -- DatePicker\n FAIL  src/components/DatePicker/DatePicker.test.tsx\n  ● DatePicker › renders weeks starting on Monday\n    expect(received).toBe(expected)\n    Expected: \"Mon\"\n    Received: \"Sun\"\n  ● DatePicker › disables dates before today\n    TypeError: Cannot read properties of undefined (reading 'weekStartsOn')\nTests: 2 failed, 46 passed, 48 total", key="test1", where=P, args={"cmd": "npm test -- DatePicker", "cwd": P}),
            A("date-fns v3 no longer picks weekStartsOn up from your old options object, and the locales moved. Import enCA from 'date-fns/locale' and pass { locale: enCA, weekStartsOn: 1 } from the DatePicker's shared options.", key="datefns_fix"),
            U("That was it. Put weekStartsOn: 1 in the shared dateOptions module.", key="datefns_done"),
            T("shell", "$ npm test -- DatePicker\n PASS  src/components/DatePicker/DatePicker.test.tsx\nTests: 48 passed, 48 total\nTime: 6.81 s", where=P, args={"cmd": "npm test -- DatePicker", "cwd": P}),
            U("FYI: Hana Kim reviews all my portal PRs. She owns the design system.", key="reviewer", cat="fact"),
            A("Noted: Hana Kim, owner of the design system, reviews your portal PRs."),
            U("Hard requirement from compliance: the portal must meet WCAG 2.1 AA before the beta goes out.", key="wcag", cat="fact"),
            A("WCAG 2.1 AA before the beta. The usual gaps in portals are colour contrast, focus order in modals, and form errors that screen readers don't announce. Worth running axe in CI now.", key="wcag_ack"),
            U("How should error toasts be announced?"),
            A("Render one live region at app start: role=\"status\" (aria-live=\"polite\") for info and role=\"alert\" for errors, and only change its text when a toast appears."),
            U("Milestones, agreed with the PM: feature freeze Friday 7 August, QA week 10-13 August, beta launch Friday 14 August.", key="milestones", cat="fact"),
            A("Three dates to hold: freeze 7 Aug, QA 10-13 Aug, launch 14 Aug. That leaves about three and a half weeks of feature work."),
        ]),
        Session("s05", "2026-07-16 22:40", W, "Anniversary dinner; long-run forecast", [
            U("Personal: Sam and I have our fifth anniversary on Saturday 25 July. I want to plan a proper dinner.", key="anniv", cat="fact"),
            A("Five years, congratulations! Do you have a place in mind, or shall I search?"),
            U("Search for an omakase counter, something special."),
            T("web_search", alex_omakase(rng), args={"query": "omakase Toronto Saturday 25 July two people"}),
            A("Kaito Omakase on Ossington has a 7pm seating on the 25th; its menu is almost all seafood, which suits a pescatarian."),
            U("Booked Kaito Omakase on Ossington for 7pm on the 25th, two seats at the counter, 185 dollars each.", key="anniv_booking", cat="fact"),
            A("Lovely. I'll remind you on the Friday before."),
            U("What's the weather for my long run on Saturday morning?"),
            T("weather", weather("Toronto, ON", "Sat 18 Jul 2026", rng, 22, "humidex 38, UV 9, thunderstorms possible after 16:00"), key="wx1", args={"place": "Toronto", "date": "2026-07-18"}),
            A("Hot and humid by 10. Start at 6, carry water, and slow down by 10-15 seconds per km.", key="wx1_ack"),
            U("Plan for Saturday then: 18 km on the Martin Goodman Trail, starting 6am at 5:30 per km.", key="longrun1"),
        ]),
        Session("s06", "2026-07-21 12:50", W, "Prettier adopted; appointment list performance", [
            U("Team decision today: we adopted Prettier with the default settings, so 2-space indentation and trailing commas everywhere. I've made peace with spaces; please use that style from now on.", key="tabs_new", cat="preference", sup="tabs_old"),
            A("Switching: 2-space indentation and trailing commas (Prettier defaults) in any code I give you.", key="tabs_new_ack"),
            U("The appointment list gets slow when you type in the search box. The profiler says 400 re-renders for one word."),
            A("Each keystroke re-filters and re-renders every row. Debounce the input (250 ms), memoise the filtered list with useMemo keyed on the debounced query, and wrap the row component in React.memo.", key="perf_fix"),
            T("shell", "$ npm run bench:appointments\nscenario: type 'cardio' in search (500 appointments)\nrenders: 14 (before: 402)\nscripting: 38 ms (before: 1,240 ms)", key="perf_bench", where=P, args={"cmd": "npm run bench:appointments", "cwd": P}),
            U("14 renders now. Huge."),
            U("Hana wants the new colour tokens merged before the freeze. Remind me Thursday."),
            A("I'll remind you Thursday morning about Hana's colour tokens."),
        ]),
        Session("s07", "2026-07-26 21:15", M, "Anniversary recap; knee pain on the long run", [
            U("The anniversary dinner at Kaito last night was perfect. Sam loved the uni course.", key="anniv_recap"),
            A("So glad it was a good night! Five years well celebrated."),
            U("Less good: my right knee started hurting at km 14 of this morning's long run. Sharp pain on the outside of the knee, I had to walk the last 4 km.", key="knee"),
            A("Pain on the outside of the knee that starts mid-run is often IT band syndrome. Stop running until a physio has looked at it, and ice it for 15 minutes a few times a day.", key="knee_ack"),
            U("Booked a physio: Dr. Anita Rao at Bloor West Physiotherapy, Thursday 30 July at 5:30pm.", key="physio_booking", cat="fact"),
            T("calendar", "Created event in alex@lumen.example: Thu 30 Jul 2026 17:30-18:15 \"Physio: Dr. Anita Rao, Bloor West Physiotherapy\"", where=CAL),
            U("Ice or heat tonight?"),
            A("Ice for the first 48 hours, 15 minutes at a time with a cloth between; heat only later, for stiffness, never right after a run."),
        ]),
        Session("s08", "2026-07-30 22:45", M, "First physio visit: IT band syndrome; new race goal", [
            U("Back from the physio. Dr. Rao says it's IT band syndrome. No running for two weeks, then easy runs only. Daily foam rolling, clamshells and side planks.", key="physio1"),
            A("So: two weeks without running (until about 13 August), then easy runs only, with foam rolling, clamshells and side planks every day.", key="physio1_ack"),
            U("Which means sub-1:45 is off. New goal for the Waterfront half: finish under 2 hours, pain-free.", key="goal_new", cat="preference", sup="goal_old"),
            A("New target: under 2:00 and pain-free, about 5:40 per km. Realistic if the knee settles by mid-August.", key="goal_new_ack"),
            U("Write me a 15-minute daily rehab routine."),
            A("- 3 min foam roller on the outer thigh (not on the knee itself)\n- 3 x 15 clamshells each side\n- 3 x 30 s side plank each side\n- 2 x 12 single-leg glute bridges\n- 2 min hip-flexor stretch each side"),
            T("calendar", "Created event in alex@lumen.example: Thu 13 Aug 2026 17:30-18:00 \"Physio follow-up: Dr. Rao\"", where=CAL),
            U("Can I cycle to work in the meantime?"),
            A("Yes, if it doesn't hurt: keep the saddle high enough that the knee is only slightly bent at the bottom of the stroke."),
        ]),
        Session("s09", "2026-08-04 12:40", W, "Caffeine quit; axe contrast errors; Hana's vacation", [
            U("Health kick: I've quit caffeine as of this week. Only decaf or rooibos tea in the mornings now.", key="coffee_new", cat="preference", sup="coffee_old"),
            A("Caffeine-free: decaf or rooibos in the mornings. A week or two of headaches is normal at the start.", key="coffee_new_ack"),
            U("Axe found a pile of contrast errors in the portal."),
            T("shell", "$ npx @axe-core/cli http://localhost:3000/appointments --tags wcag2aa\n23 violations found\n  color-contrast (19): .helper-text #9e9e9e on #ffffff (ratio 2.68:1, needs 4.5:1)\n  label (3): input[name=\"insurance-number\"]\n  aria-dialog-name (1): .modal-container", key="axe", where=P, args={"cmd": "npx @axe-core/cli --tags wcag2aa", "cwd": P}),
            A("Most of it is one token: helper text #9e9e9e on white is 2.68:1. #767676 is the lightest grey that reaches 4.5:1 on white; change the token and 19 of them go away. The other four need a label on the insurance number field and aria-labelledby on the modal.", key="axe_fix"),
            U("Heads-up: Hana is on vacation 10 to 21 August. Marcus Lee will review my PRs while she's away.", key="hana_vacation", cat="fact"),
            A("Marcus Lee reviews your PRs from 10 to 21 August while Hana is away."),
        ]),
        Session("s10", "2026-08-07 21:30", W, "Feature freeze; Carla's visit", [
            U("Feature freeze done: 61 PRs merged this sprint and the beta branch is cut.", key="freeze"),
            A("Well done. Now protect QA week from new scope."),
            U("Family news: my sister Carla is visiting from Madrid, 27 August to 3 September. She'll stay with us.", key="sister", cat="fact"),
            A("Carla visits from Madrid from 27 August to 3 September and stays with you.", key="sister_ack"),
            U("She loves jazz. Anything good on while she's here?"),
            T("web_search", "web_search(\"jazz Toronto 27 August - 3 September 2026\")\n1. The Rex Hotel Jazz & Blues Bar - two shows nightly; Sat 29 Aug 21:30: Heavyweights Brass Band\n2. Jazz Bistro - Thu 27 Aug: Laila Biali trio\n3. Toronto Harbourfront - free outdoor jazz, Sun 30 Aug 19:00", args={"query": "jazz Toronto 27 August - 3 September 2026"}),
            A("The Rex has two shows every night (Saturday the 29th is a brass band), and Harbourfront has a free outdoor concert on Sunday the 30th."),
        ]),
        Session("s11", "2026-08-12 23:00", M, "The move is postponed; QA blockers; Miso's vet", [
            U("Landlord called: the Brunswick apartment won't be ready on 1 September, the floors are being redone. The move is now Saturday 5 September. Two Guys Moving rebooked for 9am, same price.", key="movers_new", cat="fact", sup="movers_old"),
            T("calendar", "Updated event in alex@lumen.example: \"Move to 417 Brunswick Ave (Two Guys Moving)\" Sat 29 Aug 08:00 -> Sat 05 Sep 2026 09:00-15:00", key="movers_cal_new", where=CAL),
            A("Updated: moving on Saturday 5 September at 9am. Your Leslieville lease ends 31 August, so check whether you can stay a few extra days.", key="movers_new_ack"),
            U("Already sorted, we can stay until the 6th."),
            U("QA found four blockers. Two are in the date picker again."),
            T("shell", "$ npm test -- DatePicker\n FAIL  src/components/DatePicker/DatePicker.test.tsx\n  ● DatePicker › keeps the selected day across the DST change\n    Expected: \"2026-11-01\"\n    Received: \"2026-10-31\"\n  ● DatePicker › parses typed dates in en-CA\n    RangeError: Invalid time value\nTests: 2 failed, 51 passed, 53 total", key="test2", where=P, args={"cmd": "npm test -- DatePicker", "cwd": P}),
            A("Both are time-zone bugs: the picker builds dates with new Date(y, m, d) and serialises them with toISOString(), which shifts to UTC. Keep days as plain 'yyyy-MM-dd' strings, parse input with parseISO and print with format(); never toISOString() for a calendar day.", key="test2_fix"),
            U("Also, Miso's annual shots are due 20 August. Her vet is Dr. Felix Wong at Riverside Animal Hospital.", key="vet", cat="fact"),
            A("I'll remind you on the 18th to book Dr. Wong at Riverside Animal Hospital."),
        ]),
        Session("s12", "2026-08-13 22:50", M, "Physio follow-up: cleared for easy runs", [
            U("Physio follow-up today. The knee is much better. Dr. Rao cleared me for easy runs: 5 km max, three times a week, then add about 10% a week. The race is still realistic if it stays pain-free.", key="physio2"),
            A("Great news. Easy 5 km three times a week plus 10% a week gets you to long runs of 12-14 km by early October: enough for a pain-free sub-2:00.", key="physio2_ack"),
            U("Beta launches tomorrow. Nervous."),
            A("You froze on time and QA closed the blockers. Have the rollback runbook open and a dashboard on the login error rate, then let it go."),
        ]),
        Session("s13", "2026-08-18 13:00", W, "Beta shipped; Safari login errors; Miso's allergy", [
            U("The portal beta went out on Friday: 1,200 patients invited. But logins from Safari fail about 3% of the time.", key="beta"),
            T("shell", "$ grep -m1 -A3 'RangeError' logs/portal-web-2026-08-17.log\n2026-08-17T14:02:11Z ERROR [login] RangeError: Invalid time value\n  at parseSessionExpiry (session.ts:42)\n  userAgent: Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 Version/17.5 Mobile/15E148 Safari/604.1\n  input: \"2026-08-17 16:02:11\"", key="safari_log", where=P, args={"cmd": "grep RangeError logs/portal-web-2026-08-17.log", "cwd": P}),
            A("Safari's Date parser rejects 'YYYY-MM-DD HH:mm:ss' with a space where Chrome accepts it, and the session expiry comes from the API in that format. Have the API send ISO 8601 with a Z (or replace the space with 'T' and use parseISO).", key="safari_fix"),
            U("Patched: the API now sends ISO timestamps with Z. Errors gone."),
            U("Miso update from the vet: she's allergic to chicken, that's why she's been scratching. She's on a salmon-based food from now on, no more chicken kibble.", key="miso_allergy", cat="preference", sup="miso_food_old"),
            A("Noted: Miso is allergic to chicken and eats salmon-based food now. I'll keep chicken out of any supplies I suggest.", key="miso_allergy_ack"),
            U("Did her shots too, all done until next year."),
        ]),
        Session("s14", "2026-08-27 22:30", M, "Carla arrives; packing; a run together", [
            U("Carla landed this afternoon. We're taking her to The Rex on Saturday.", key="carla_arrived"),
            A("Enjoy! The 21:30 show is the brass band."),
            U("What should I pack first with a bit over a week to go?"),
            A("Books, off-season clothes and anything on walls first; then the kitchen except one pan, one plate set and the kettle. Leave Miso's things for last and pack them in a clearly marked box."),
            U("Weather for Saturday? Carla wants to join me for a run."),
            T("weather", weather("Toronto, ON", "Sat 29 Aug 2026", rng, 17, "sunny, wind W 10 km/h"), key="wx2", args={"place": "Toronto", "date": "2026-08-29"}),
            A("Ideal running weather early on, sunny and fresh.", key="wx2_ack"),
            U("Easy 6 km with Carla on Saturday morning along the Beaches boardwalk, then.", key="run_with_carla"),
        ]),
    ]
    Qs = [
        # single-fact
        Q("alex-sf-01", "single-fact", "Where does Alex work?", {"job": 2, "job_ack": 1}, note="Lumen Health, Toronto (frontend, React/TypeScript), office 220 King Street West."),
        Q("alex-sf-02", "single-fact", "What is my cat called?", {"cat": 2}, note="Miso, a three-year-old grey tabby."),
        Q("alex-sf-03", "single-fact", "When does the patient portal beta ship?", {"project": 2, "milestones": 2, "project_ack": 1}, note="Friday 14 August (freeze 7 Aug, QA 10-13 Aug)."),
        Q("alex-sf-04", "single-fact", "What's the address of my new apartment?", {"apt_new": 2, "apt_ack": 1, "apt_listings": 1}, note="417 Brunswick Avenue, the Annex, CAD 2,350/month."),
        Q("alex-sf-05", "single-fact", "Which accessibility standard does the portal have to meet?", {"wcag": 2, "wcag_ack": 1}, note="WCAG 2.1 AA before the beta (compliance requirement)."),
        Q("alex-sf-06", "single-fact", "Why did logins fail in Safari after the beta launch?", {"safari_fix": 2, "safari_log": 2, "beta": 1}, note="Safari rejects 'YYYY-MM-DD HH:mm:ss' (space) in Date parsing: RangeError in parseSessionExpiry; fixed by ISO 8601 with Z."),
        Q("alex-sf-07", "single-fact", "How did we fix the date picker tests after the date-fns upgrade?", {"datefns_fix": 2, "datefns_done": 2, "test1": 1}, note="date-fns v3: pass { locale: enCA, weekStartsOn: 1 } from the shared dateOptions module."),
        Q("alex-sf-08", "single-fact", "Who is Miso's vet?", {"vet": 2}, note="Dr. Felix Wong, Riverside Animal Hospital."),
        Q("alex-sf-09", "single-fact", "Which restaurant did I book for our anniversary?", {"anniv_booking": 2, "anniv_recap": 1}, note="Kaito Omakase on Ossington, 7pm on 25 July."),
        Q("alex-sf-10", "single-fact", "How did we speed up the appointment list search?", {"perf_fix": 2, "perf_bench": 1}, note="Debounce 250 ms, useMemo on the filtered list, React.memo rows: 402 -> 14 renders."),
        # multi-hop
        Q("alex-mh-01", "multi-hop", "Will my sister still be in Toronto on moving day?", {"sister": 2, "movers_new": 2, "sister_ack": 1, "movers_new_ack": 1, "movers_cal_new": 1},
          sup=["movers_old", "movers_cal_old"], note="Carla is here 27 Aug - 3 Sep (s10); the move moved to Sat 5 Sep (s11), so no. The old date (29 Aug) would give the wrong answer."),
        Q("alex-mh-02", "multi-hop", "How far is my new apartment from the office?", {"apt_new": 2, "job": 2, "job_ack": 1, "apt_ack": 1}, note="Needs 417 Brunswick Avenue (s03) and 220 King Street West (s01)."),
        Q("alex-mh-03", "multi-hop", "Who will review my portal PRs during QA week?", {"milestones": 2, "hana_vacation": 2, "reviewer": 1}, note="QA week is 10-13 Aug (s04); Hana is away 10-21 Aug, so Marcus Lee reviews (s09)."),
        Q("alex-mh-04", "multi-hop", "Is the restaurant I booked for our anniversary a good fit for Sam's diet?", {"anniv_booking": 2, "sam_food": 2}, note="Kaito Omakase, a seafood counter menu (s05), and Sam is pescatarian (s02): yes."),
        Q("alex-mh-05", "multi-hop", "Given what the physio said most recently, can I still run my October race?", {"race": 2, "physio2": 2, "physio2_ack": 1}, note="Toronto Waterfront half, 18 Oct (s01) + cleared for easy runs, race realistic if pain-free (s12)."),
        Q("alex-mh-06", "multi-hop", "Which vet should I ask about Miso's food allergy, and what can't she eat?", {"vet": 2, "miso_allergy": 2, "miso_allergy_ack": 1}, note="Dr. Felix Wong, Riverside Animal Hospital (s11) + allergic to chicken (s13)."),
        # temporal
        Q("alex-t-01", "temporal", "What did the physio tell me last Thursday?", {"physio2": 2, "physio2_ack": 1}, as_of="2026-08-17T14:00:00Z", note="Asked Mon 17 Aug: last Thursday = 13 Aug follow-up (cleared for easy runs). The 30 Jul visit is the distractor."),
        Q("alex-t-02", "temporal", "What did the physio tell me at my appointment on 30 July?", {"physio1": 2, "physio1_ack": 1}, as_of="2026-08-20T12:00:00Z", note="First visit: IT band syndrome, two weeks off, rehab exercises. The newer 13 Aug visit is the distractor (recency points the wrong way)."),
        Q("alex-t-03", "temporal", "Which tests failed last Wednesday?", {"test2": 2, "test2_fix": 1}, as_of="2026-08-17T14:00:00Z", note="Wed 12 Aug: DST and en-CA parsing failures in DatePicker. The 13 Jul date-fns failure is the distractor."),
        Q("alex-t-04", "temporal", "What happened with my knee on Sunday?", {"knee": 2, "knee_ack": 1}, as_of="2026-07-28T12:00:00Z", note="Asked Tue 28 Jul: Sunday 26 Jul, pain outside the right knee at km 14."),
        Q("alex-t-05", "temporal", "What did the forecast say for my long run on Saturday 18 July?", {"wx1": 2, "wx1_ack": 1}, as_of="2026-08-31T12:00:00Z", note="The 16 Jul forecast for 18 Jul (hot, humid). The 29 Aug forecast is the distractor."),
        Q("alex-t-06", "temporal", "What did I tell you yesterday about the move?", {"movers_new": 2, "movers_cal_new": 1, "movers_new_ack": 1}, sup=["movers_old", "movers_cal_old"], as_of="2026-08-13T15:00:00Z", note="Asked 13 Aug: on 12 Aug the move was postponed to Sat 5 Sep, 9am."),
        Q("alex-t-07", "temporal", "What did the accessibility check report on Tuesday?", {"axe": 2, "axe_fix": 1}, as_of="2026-08-07T20:00:00Z", note="Asked Fri 7 Aug: Tue 4 Aug axe run, 23 violations (19 contrast)."),
        # preference-update
        Q("alex-p-01", "preference-update", "What do I drink in the morning these days?", {"coffee_new": 2, "coffee_new_ack": 1}, sup=["coffee_old"], note="Decaf or rooibos (quit caffeine, s09); the two double espressos (s01) are superseded."),
        Q("alex-p-02", "preference-update", "When am I moving to the new apartment?", {"movers_new": 2, "movers_cal_new": 2, "movers_new_ack": 1}, sup=["movers_old", "movers_cal_old"], note="Saturday 5 September, 9am (s11); 29 August (s03) is superseded."),
        Q("alex-p-03", "preference-update", "Should the code you write for me use tabs or spaces?", {"tabs_new": 2, "tabs_new_ack": 1}, sup=["tabs_old", "tabs_old_ack"], note="2 spaces and trailing commas (Prettier, s06); tabs (s01) superseded."),
        Q("alex-p-04", "preference-update", "What's my goal time for the Waterfront half marathon?", {"goal_new": 2, "goal_new_ack": 1}, sup=["goal_old", "goal_old_ack"], note="Under 2 hours, pain-free (s08); sub-1:45 (s01) superseded."),
        Q("alex-p-05", "preference-update", "What food does Miso eat?", {"miso_allergy": 2, "miso_allergy_ack": 1}, sup=["miso_food_old"], note="Salmon-based food (chicken allergy, s13); chicken kibble (s02) superseded."),
        # no-answer
        Q("alex-n-01", "no-answer", "What's my dog's name?", note="Alex has a cat (Miso), no dog."),
        Q("alex-n-02", "no-answer", "What is my blood type?", note="Never mentioned."),
        Q("alex-n-03", "no-answer", "When is my next dentist appointment?", note="Never mentioned (there are physio and vet appointments)."),
        Q("alex-n-04", "no-answer", "Which gym am I a member of?", note="Never mentioned (he runs with the Beaches Running Club)."),
        Q("alex-n-05", "no-answer", "What did Hana say about the new company logo?", note="Hana appears (reviews, colour tokens) but no logo was ever discussed."),
    ]
    return Conversation("alex", "alex", S, Qs)


# =================================================================== conversation: noor
def noor(rng: random.Random) -> Conversation:
    W, M = "chat:web/noor", "chat:mobile/noor"
    R = "/home/noor/phd/analysis"
    CAL = "calendar:noor.haddad@bristol.example"
    S = [
        Session("s01", "2026-08-03 09:10", W, "Noor introduces herself, her thesis and fieldwork", [
            U("Hello! I'm Noor Haddad, a third-year PhD student in ecology at the University of Bristol.", key="intro", cat="fact"),
            A("Hi Noor! What's your research about?"),
            U("My thesis is about bumblebees in urban gardens: which garden features predict bumblebee abundance and diversity.", key="thesis", cat="fact"),
            U("My supervisor is Dr. Helen Marsh.", key="supervisor", cat="fact"),
            U("We meet every Wednesday at 2pm in her office, Life Sciences building, room 2.14.", key="meeting_old", cat="fact"),
            A("Noted: weekly meetings with Dr. Helen Marsh, Wednesdays at 14:00 in Life Sciences 2.14.", key="meeting_old_ack"),
            U("Personal: I'm vegetarian, in case you ever help with food.", key="diet_old", cat="preference"),
            A("Vegetarian, noted."),
            U("For references I use Mendeley, and the department wants Harvard style.", key="refmgr_old", cat="preference"),
            A("Mendeley with Harvard style, got it.", key="refmgr_old_ack"),
            U("This month is fieldwork: transect walks in 12 private gardens around Bristol, every dry day between 10am and 4pm, until 31 August.", key="fieldwork", cat="fact"),
            A("12 gardens, dry days 10:00-16:00, through 31 August. Want a weather check on fieldwork mornings?", key="fieldwork_ack"),
            U("Yes please, starting tomorrow."),
            U("And the big deadline: the full draft of chapter 2 goes to Helen on Wednesday 30 September.", key="deadline_ch2", cat="fact"),
            A("Chapter 2 draft to Helen by Wednesday 30 September. That's eight weeks, four of them fieldwork."),
        ]),
        Session("s02", "2026-08-04 07:30", M, "First transect day", [
            U("Morning! Good day for transects?"),
            T("weather", weather("Bristol, GB", "Tue 04 Aug 2026", rng, 15, "sunny intervals, rain 10%, wind SW 14 km/h"), key="wx_n1", args={"place": "Bristol", "date": "2026-08-04"}),
            A("Dry and mild, wind under 15 km/h: good transect conditions. A 10:00 start works.", key="wx_n1_ack"),
            U("Transect log, 4 August: garden 3 (Redland Road) 14 bumblebees, mostly Bombus terrestris; garden 7 (Cotham Hill) 41, lots of B. pascuorum on the lavender.", key="walk1"),
            A("41 at Cotham Hill is your highest single-walk count so far."),
            U("I live in Redland with two flatmates, Jess and Tomasz, so garden 3 is a five-minute walk.", key="flat", cat="fact"),
            U("I cycle to the other sites on my old green Dawes touring bike.", key="bike", cat="fact"),
            A("Handy. Cotham Hill is about ten minutes by bike from Redland."),
        ]),
        Session("s03", "2026-08-12 15:30", W, "Supervision 12 Aug; first GLMM", [
            U("Just had my meeting with Helen. She wants garden size as a covariate and thinks I should drop the gardens with fewer than five walks.", key="helen1"),
            A("So: add garden size as a covariate, and exclude gardens with under five walks. Which ones are they?", key="helen1_ack"),
            U("Gardens 2, 9 and 11, they kept getting rained out.", key="dropped"),
            U("I'm fitting a Poisson GLMM with lme4: counts ~ flower_richness + garden_size + (1|garden) + (1|date).", key="model_old", cat="fact"),
            T("shell", "$ Rscript analysis/models/fit_glmm.R\nWarning message:\nIn checkConvergence(...) :\n  Model failed to converge with max|grad| = 0.0123 (tol = 0.002, component 1)\nboundary (singular) fit: see help('isSingular')", key="r_err1", where=R, args={"cmd": "Rscript analysis/models/fit_glmm.R", "cwd": "/home/noor/phd"}),
            A("Two things: scale the predictors (garden_size is in square metres, so it dwarfs flower_richness) and try glmerControl(optimizer = \"bobyqa\"). The singular fit means the date random effect has about zero variance; consider dropping it.", key="r_fix1"),
            U("Scaling fixed it. Dropped (1|date), it converges now."),
            T("shell", "$ Rscript analysis/models/fit_glmm.R\nGeneralized linear mixed model fit by maximum likelihood (Laplace) [glmerMod]\n Family: poisson  ( log )\n     AIC 1842.6\nFixed effects:\n                 Estimate Std. Error z value Pr(>|z|)\nflower_richness    0.41       0.06     6.83   <0.001\ngarden_size        0.22       0.09     2.44    0.015", key="poisson_fit", where=R, args={"cmd": "Rscript analysis/models/fit_glmm.R", "cwd": "/home/noor/phd"}),
            A("Flower richness has the strong effect; garden size is smaller but significant in this model."),
        ]),
        Session("s04", "2026-08-17 10:05", W, "Conference plans; bouldering; transect log", [
            U("Conference planning: I want to present at the British Ecological Society annual meeting in Liverpool, 14 to 17 December.", key="bes", cat="fact"),
            U("I'll submit a poster, I don't feel ready for a talk.", key="talk_old", cat="preference"),
            A("A poster at the BES annual meeting in Liverpool, 14-17 December. Let me check the abstract deadline.", key="talk_old_ack"),
            T("web_search", "web_search(\"BES annual meeting 2026 abstract deadline\")\n1. BES Annual Meeting 2026, Liverpool ACC, 14-17 December - britishecologicalsociety.example/annual-meeting: \"Abstract submission closes Friday 4 September 2026, 23:59 BST. Talks and posters.\"\n2. BES student travel grants - \"Apply by 4 September; up to £400 for student members.\"", key="bes_deadline", args={"query": "BES annual meeting 2026 abstract deadline"}),
            A("Abstracts close Friday 4 September at 23:59 BST. There's also a student travel grant of up to £400, same deadline.", key="bes_deadline_ack"),
            U("Oh nice, I'm a student member. I'll apply for the grant."),
            U("Please never book anything for me on Tuesday evenings, that's bouldering at The Climbing Academy.", key="climbing", cat="fact"),
            A("Tuesday evenings are for bouldering, noted."),
            U("Transect log, 17 August: garden 7 (Cotham Hill) 33 bumblebees, garden 5 (St Andrews Park allotment) 27, garden 12 (Bishopston) 9.", key="walk2"),
            A("Cotham Hill stays your top site."),
        ]),
        Session("s05", "2026-08-20 18:40", W, "Mendeley to Zotero; mum's birthday", [
            U("I've given up on Mendeley, it keeps duplicating my library. Migrated everything to Zotero with Better BibTeX. Please give me Zotero instructions from now on.", key="refmgr_new", cat="preference", sup="refmgr_old"),
            A("Zotero with Better BibTeX from now on. For Harvard, install the 'Cite Them Right 12th edition - Harvard' style.", key="refmgr_new_ack"),
            U("How do I make the citation keys stable?"),
            A("In Better BibTeX's preferences set the key formula (e.g. auth.lower + year + shorttitle(1,1)), then select all items and choose 'Pin BibTeX key' so they never change."),
            U("My mum's birthday is 19 September. She lives in Amman. Remind me to send something by the 10th.", key="mum", cat="fact"),
            A("Reminder set for 10 September: a gift for your mum in Amman, birthday 19 September."),
            U("What ships reliably to Jordan?"),
            T("web_search", noor_gift_search(rng), args={"query": "reliable parcel delivery UK to Amman Jordan"}),
            A("Aramex is the usual choice for Jordan: a few working days and tracked, at a reasonable price."),
        ]),
        Session("s06", "2026-08-26 15:20", W, "Supervision 26 Aug; overdispersion; last transect", [
            U("Meeting with Helen today. She says drop the wind variable, it's just noise, and she wants a map of the 12 gardens as figure 1.", key="helen2"),
            A("Two changes: wind out of the model, and a site map as figure 1.", key="helen2_ack"),
            U("She also asked me to check the Poisson model for overdispersion.", key="overdisp"),
            A("Compare the sum of squared Pearson residuals with the residual degrees of freedom: a ratio well above 1 means overdispersion. performance::check_overdispersion(model) does it in one line."),
            U("Map: what's the easiest way in R?"),
            A("sf for the points, ggplot2 with geom_sf, and ggspatial for the scale bar and north arrow; an OpenStreetMap basemap via maptiles if you want streets."),
            U("Weather for my last transect this afternoon?"),
            T("weather", weather("Bristol, GB", "Wed 26 Aug 2026", rng, 16, "cloudy, rain 30% after 17:00, wind W 18 km/h"), key="wx_n2", args={"place": "Bristol", "date": "2026-08-26"}),
            U("Last transect log, 26 August: garden 7 (Cotham Hill) 38, garden 3 (Redland Road) 11. Fieldwork is basically done.", key="walk3"),
            A("That closes fieldwork. Cotham Hill was the top site on every walk."),
        ]),
        Session("s07", "2026-09-01 11:00", W, "Overdispersion; negative binomial model; going vegan; abstract draft", [
            U("Ran the overdispersion check Helen wanted:"),
            T("shell", "$ Rscript analysis/models/check_dispersion.R\ndispersion ratio = 3.82, p < 0.001 (Pearson chi2 = 1547.3, rdf = 405)", key="r_disp", where=R, args={"cmd": "Rscript analysis/models/check_dispersion.R", "cwd": "/home/noor/phd"}),
            A("A ratio of 3.8 is strong overdispersion: the Poisson standard errors are too small. Fit a negative binomial GLMM instead, e.g. glmmTMB(..., family = nbinom2).", key="disp_ack"),
            U("Switched the analysis to a negative binomial GLMM with glmmTMB. The Poisson model is out; report the negative binomial one everywhere.", key="model_new", cat="fact", sup="model_old"),
            T("shell", "$ Rscript analysis/models/fit_nb.R\n Family: nbinom2  ( log )\n     AIC 1611.9   (Poisson: 1842.6)\nConditional model:\n                 Estimate Std. Error z value Pr(>|z|)\nflower_richness    0.38       0.09     4.22   <0.001\ngarden_size        0.19       0.12     1.60    0.110\nDispersion parameter for nbinom2 family: 2.7", key="nb_fit", where=R, args={"cmd": "Rscript analysis/models/fit_nb.R", "cwd": "/home/noor/phd"}),
            A("AIC drops from 1842.6 to 1611.9, and garden size is no longer significant (p = 0.11) once the overdispersion is modelled: worth a sentence in the discussion.", key="model_new_ack"),
            U("Personal update: I've gone fully vegan since the start of September. No dairy, no eggs.", key="diet_new", cat="preference", sup="diet_old"),
            A("Vegan from September: no meat, dairy or eggs. Noted.", key="diet_new_ack"),
            U("Drafting the BES abstract. Title: 'Flower richness, not garden size, predicts bumblebee abundance in urban gardens'. 250 words max.", key="abstract"),
            A("Strong title: it states the finding. Open with the gap, then 12 gardens and 4 weeks of transects, then the negative binomial result with effect sizes."),
            U("Tighten my first sentence: 'Urban gardens are increasingly recognised as being potentially important habitats for bumblebees.'"),
            A("'Urban gardens may be important bumblebee habitats.'"),
        ]),
        Session("s08", "2026-09-03 19:15", W, "Talk instead of poster; supervision moves to Thursdays", [
            U("Change of plan: Helen convinced me, I submitted the BES abstract as a talk, not a poster.", key="talk_new", cat="preference", sup="talk_old"),
            A("A talk at BES then. Standard talks there are 12 minutes plus 3 for questions.", key="talk_new_ack"),
            U("Travel grant application sent too, I asked for £350 for the train and three nights.", key="grant"),
            U("Also, Helen is moving our weekly meeting: from next week it's Thursdays at 10am, same room.", key="meeting_new", cat="fact", sup="meeting_old"),
            A("Weekly meeting now on Thursdays at 10:00 in Life Sciences 2.14, starting next week.", key="meeting_new_ack"),
            T("calendar", "Updated recurring event in noor.haddad@bristol.example: \"Supervision with Helen Marsh\" Wed 14:00 -> Thu 10:00 from Thu 10 Sep 2026, room LS 2.14", key="meeting_cal", where=CAL),
            U("Easy high-protein vegan dinner for tonight?"),
            A("Crispy tofu with a peanut-lime sauce over rice noodles and edamame: about 35 g of protein a plate, 25 minutes."),
        ]),
        Session("s09", "2026-09-10 09:50", W, "Supervision 10 Sep; lab meeting; map script error", [
            U("Helen liked the negative binomial results. She wants the garden-size result framed as 'no evidence of an effect', not 'no effect'.", key="helen3"),
            A("Good distinction: the interval for garden size is wide and includes 0, so absence of evidence, not evidence of absence."),
            U("I'm presenting at the lab meeting on Thursday 17 September, 20 minutes.", key="labmeet", cat="fact"),
            U("Mum's gift: I ordered a silver olive-branch necklace, shipping to Amman in 5-7 days.", key="gift"),
            A("Just in time for the 19th."),
            U("New error when I build the figure:"),
            T("shell", "$ Rscript analysis/figures/fig1_map.R\nError in st_transform.sfc(st_geometry(x), crs, ...) :\n  cannot transform sfc object with missing crs\nExecution halted", key="r_err2", where="/home/noor/phd/analysis/figures", args={"cmd": "Rscript analysis/figures/fig1_map.R", "cwd": "/home/noor/phd"}),
            A("Your garden points have no CRS. Set it when you build them: st_as_sf(gardens, coords = c(\"lon\", \"lat\"), crs = 4326), then st_transform(..., 27700) for the British National Grid.", key="r_fix2"),
            U("Fixed, the map looks great."),
        ]),
        Session("s10", "2026-09-15 13:30", W, "Methods section; BES registration", [
            U("Writing the methods section. How do I cite glmmTMB properly?"),
            A("Brooks et al. (2017) 'glmmTMB balances speed and flexibility among packages for zero-inflated generalized linear mixed modeling', The R Journal 9(2): 378-400. In Zotero, add it by DOI: 10.32614/RJ-2017-066.", key="cite"),
            U("BES registration is open. Early-bird is £295 for student members until 30 September.", key="conf_reg"),
            U("The form asks for dietary requirements and accessibility needs. I'll fill it in tonight.", key="conf_form"),
            A("Register before the 30th for the early-bird rate; the grant result usually comes after, and it covers registration retroactively."),
            U("How long should the methods section be?"),
            A("For a thesis chapter, 1,500-2,500 words: sites, transect protocol, the exclusion rule (fewer than five walks), the model and its diagnostics."),
        ]),
        Session("s11", "2026-09-24 16:10", W, "Lab meeting feedback; chapter progress", [
            U("The lab meeting went well last week. Main feedback: show raw counts per garden before the model.", key="labfeedback"),
            A("A dot plot of counts per garden, ordered by flower richness, would do that in one figure."),
            U("Chapter 2 is at 9,800 words. Six days to Helen's deadline."),
            A("Then freeze the analysis now and spend the days on the discussion and figures."),
            U("Is 'data' singular or plural in ecology journals?"),
            A("Most ecology journals treat it as plural ('the data were'); check the style guide, but plural is the safe default."),
        ]),
        Session("s12", "2026-10-01 10:30", W, "Chapter sent; abstract accepted", [
            U("Sent chapter 2 to Helen on Tuesday night, a day before the deadline!", key="ch2_sent"),
            A("Congratulations! Now rest for a couple of days."),
            U("And BES accepted my abstract as a talk, Tuesday 15 December, session on urban ecology.", key="talk_accepted"),
            A("Great news: Tuesday 15 December in the urban ecology session. Book the train to Liverpool early; advance fares go fast."),
        ]),
        Session("s13", "2026-10-06 17:00", W, "Helen's comments; train to Liverpool; grant", [
            U("Helen sent her comments on chapter 2: mostly happy, but she wants the discussion cut by a third and a supplementary table with all the models I fitted.", key="helen_ch2"),
            A("Cut the literature recap first; keep the garden-size paragraph, it is your most interesting result."),
            U("Booked the train to Liverpool: Bristol Temple Meads to Liverpool Lime Street, Monday 14 December at 07:15, changing at Birmingham New Street.", key="train"),
            T("calendar", "Created event in noor.haddad@bristol.example: Mon 14 Dec 2026 07:15-10:50 \"Train BRI -> LIV (change at Birmingham New Street)\"", where=CAL),
            U("And the travel grant came through: £350.", key="grant_ok"),
            A("That covers the train and most of the hotel."),
            U("How do I make a supplementary table comparing the models in R?"),
            A("performance::compare_performance(m_pois, m_nb, rank = TRUE) gives AIC, BIC, R² and RMSE side by side; pipe it into gt::gt() or knitr::kable() for the document."),
            U("Mum loved the necklace, she wore it at her birthday dinner.", key="gift_recap"),
            A("Lovely, it arrived in time after all."),
        ]),
    ]
    Qs = [
        Q("noor-sf-01", "single-fact", "Which university am I at?", {"intro": 2}, note="University of Bristol (third-year ecology PhD)."),
        Q("noor-sf-02", "single-fact", "What is my thesis about?", {"thesis": 2}, note="Which garden features predict bumblebee abundance and diversity in urban gardens."),
        Q("noor-sf-03", "single-fact", "Who are my flatmates?", {"flat": 2}, note="Jess and Tomasz (Redland)."),
        Q("noor-sf-04", "single-fact", "When is my mum's birthday?", {"mum": 2}, note="19 September (she lives in Amman)."),
        Q("noor-sf-05", "single-fact", "Which evening do I go bouldering?", {"climbing": 2}, note="Tuesday evenings, The Climbing Academy."),
        Q("noor-sf-06", "single-fact", "When is the chapter 2 draft due?", {"deadline_ch2": 2}, note="Wednesday 30 September, to Helen."),
        Q("noor-sf-07", "single-fact", "How do I fix the missing CRS error in my map script?", {"r_fix2": 2, "r_err2": 1}, note="st_as_sf(..., crs = 4326), then st_transform(..., 27700)."),
        Q("noor-sf-08", "single-fact", "How should I cite glmmTMB?", {"cite": 2}, note="Brooks et al. (2017), The R Journal 9(2): 378-400."),
        Q("noor-sf-09", "single-fact", "How much can the BES student travel grant cover?", {"bes_deadline": 2, "bes_deadline_ack": 2, "grant": 1}, note="Up to £400 for student members (she asked for £350)."),
        Q("noor-sf-10", "single-fact", "What gift did I order for my mum?", {"gift": 2}, note="A silver olive-branch necklace, shipping to Amman."),
        Q("noor-mh-01", "multi-hop", "Who is my supervisor and when do we meet now?", {"supervisor": 2, "meeting_new": 2, "meeting_new_ack": 1, "meeting_cal": 1}, sup=["meeting_old", "meeting_old_ack"], note="Dr. Helen Marsh (s01) + Thursdays 10:00 (s08; Wednesdays 14:00 superseded)."),
        Q("noor-mh-02", "multi-hop", "How many gardens am I surveying, and which one had the most bumblebees?", {"fieldwork": 2, "walk1": 2, "walk2": 1, "walk3": 1}, note="12 gardens (s01); Cotham Hill, garden 7, 41 on 4 Aug (s02)."),
        Q("noor-mh-03", "multi-hop", "Which model's results go in the chapter 2 draft, and when is it due?", {"deadline_ch2": 2, "model_new": 2, "model_new_ack": 1}, sup=["model_old"], note="Negative binomial GLMM (s07) + 30 September (s01)."),
        Q("noor-mh-04", "multi-hop", "Is the BES abstract deadline before or after my lab meeting presentation?", {"bes_deadline": 2, "labmeet": 2, "bes_deadline_ack": 1}, note="Abstracts close 4 Sep (s04); lab meeting 17 Sep (s09): before."),
        Q("noor-mh-05", "multi-hop", "What should I put as dietary requirement on the BES registration form?", {"conf_form": 2, "diet_new": 2, "diet_new_ack": 1}, sup=["diet_old"], note="The form asks for dietary requirements (s10); she is vegan since September (s07), not vegetarian (s01)."),
        Q("noor-mh-06", "multi-hop", "Who asked me to check for overdispersion, and what did the check show?", {"overdisp": 2, "r_disp": 2, "disp_ack": 1}, note="Helen asked (s06); the check showed a dispersion ratio of 3.82 (s07 tool output)."),
        Q("noor-t-01", "temporal", "What did Helen say in our meeting last Wednesday?", {"helen2": 2, "helen2_ack": 1, "overdisp": 1}, as_of="2026-08-31T12:00:00Z", note="Asked Mon 31 Aug: Wed 26 Aug (drop wind, map as figure 1, check overdispersion). The 12 Aug meeting is the distractor."),
        Q("noor-t-02", "temporal", "What did Helen want changed at our meeting on 12 August?", {"helen1": 2, "helen1_ack": 1, "dropped": 1}, as_of="2026-09-20T12:00:00Z", note="Garden size as a covariate, drop gardens with fewer than five walks. Later meetings are distractors."),
        Q("noor-t-03", "temporal", "How many bumblebees did I count at Cotham Hill on Monday?", {"walk2": 2}, as_of="2026-08-19T12:00:00Z", note="Asked Wed 19 Aug: Monday 17 Aug, 33 at Cotham Hill (41 on 4 Aug is the distractor)."),
        Q("noor-t-04", "temporal", "What was the R error I got on Thursday?", {"r_err2": 2, "r_fix2": 1}, as_of="2026-09-14T12:00:00Z", note="Asked Mon 14 Sep: Thu 10 Sep, 'cannot transform sfc object with missing crs'. The 12 Aug convergence warning is the distractor."),
        Q("noor-t-05", "temporal", "What was the weather forecast on my first transect day?", {"wx_n1": 2, "wx_n1_ack": 1}, as_of="2026-09-01T12:00:00Z", note="4 Aug forecast (dry, mild). The 26 Aug forecast is the distractor."),
        Q("noor-t-06", "temporal", "What did I tell you on Thursday about the BES abstract?", {"talk_new": 2, "talk_new_ack": 1}, sup=["talk_old"], as_of="2026-09-07T12:00:00Z", note="Asked Mon 7 Sep: Thu 3 Sep, submitted as a talk."),
        Q("noor-p-01", "preference-update", "What's my diet?", {"diet_new": 2, "diet_new_ack": 1}, sup=["diet_old"], note="Vegan since September (s07); vegetarian (s01) superseded."),
        Q("noor-p-02", "preference-update", "Which reference manager should you give me instructions for?", {"refmgr_new": 2, "refmgr_new_ack": 1}, sup=["refmgr_old", "refmgr_old_ack"], note="Zotero with Better BibTeX (s05); Mendeley superseded."),
        Q("noor-p-03", "preference-update", "Am I presenting a poster or a talk at BES?", {"talk_new": 2, "talk_new_ack": 1, "talk_accepted": 2}, sup=["talk_old", "talk_old_ack"], note="A talk (s08, accepted s12); the poster plan (s04) superseded."),
        Q("noor-p-04", "preference-update", "When is my weekly supervision meeting?", {"meeting_new": 2, "meeting_new_ack": 1, "meeting_cal": 1}, sup=["meeting_old", "meeting_old_ack"], note="Thursdays 10:00 (s08); Wednesdays 14:00 superseded."),
        Q("noor-p-05", "preference-update", "Which statistical model am I using for the bee counts?", {"model_new": 2, "model_new_ack": 1, "nb_fit": 1}, sup=["model_old", "poisson_fit"], note="Negative binomial GLMM with glmmTMB (s07); Poisson GLMM superseded."),
        Q("noor-n-01", "no-answer", "What's the name of my cat?", note="No pet mentioned."),
        Q("noor-n-02", "no-answer", "When is my viva?", note="Never mentioned."),
        Q("noor-n-03", "no-answer", "Which journal did I submit chapter 1 to?", note="Chapter 1 never discussed."),
        Q("noor-n-04", "no-answer", "What is my partner's name?", note="Never mentioned."),
        Q("noor-n-05", "no-answer", "What's my flight number to Liverpool?", note="No flight mentioned (the assistant suggests the train)."),
    ]
    return Conversation("noor", "noor", S, Qs)


# ================================================================== conversation: diego
def diego(rng: random.Random) -> Conversation:
    W, M = "chat:web/diego", "chat:mobile/diego"
    CAL = "calendar:diego@panaderiasol.example"
    S = [
        Session("s01", "2026-09-07 14:10", W, "Diego introduces the bakery", [
            U("Hola! I'm Diego Álvarez. I own Panadería Sol, a bakery on East Cesar Chavez Street in Austin.", key="intro", cat="fact"),
            A("Hi Diego! How can I help with the bakery?"),
            U("Small team: Ana runs the front counter, Beto does the night bake, and I do everything else.", key="staff", cat="fact"),
            U("We're open Tuesday to Sunday, 7am to 3pm. Closed Mondays, that's my admin day.", key="hours_old", cat="fact"),
            A("Open Tuesday-Sunday 7:00-15:00, Mondays closed for admin. Noted.", key="hours_old_ack"),
            U("Flour comes from Hill Country Mills: 50-pound bags at 28 dollars, delivered Thursdays.", key="flour_old", cat="fact"),
            U("We go through about 30 bags a month.", key="flour_use", cat="fact"),
            A("Around 30 bags a month at $28 is about $840 a month on flour.", key="flour_ack"),
            U("Our sourdough loaf sells for 8 dollars; conchas are 2.50.", key="price_old", cat="fact"),
            U("Saturdays we also have a stall at the downtown SFC farmers market, Republic Square, 9 to 1.", key="market_old", cat="fact"),
            A("The shop Tuesday-Sunday plus the Saturday stall at Republic Square, 9-1."),
            U("Our accountant is Rosa Delgado, she does the books and the quarterly taxes.", key="accountant_old", cat="fact"),
            U("Remind me: Q3 estimated taxes are due 15 September.", key="q3tax"),
            A("I'll remind you on Friday the 11th."),
        ]),
        Session("s02", "2026-09-10 15:30", M, "The deck oven loses heat; Café Ruta", [
            U("The deck oven is acting up. It's a 2009 Bongard, and the bottom deck loses about 40 degrees by mid-morning.", key="oven"),
            A("A deck that can't hold temperature under load is usually a failing heating element or a drifting thermostat. Worth a technician before it dies on a Saturday."),
            T("web_search", diego_repair_search(rng), args={"query": "Bongard deck oven repair Austin TX"}),
            A("Texas Oven Service services Bongard; I'd call them first."),
            U("Texas Oven Service came out: the bottom deck's heating element is failing. The part is 1,850 dollars, ships from France, arrives 22 September.", key="oven_tech"),
            A("So until the 22nd, bake the heavy loaves on the top decks and keep the bottom one for conchas and cookies.", key="oven_tech_ack"),
            U("Also: Café Ruta orders 40 conchas every Friday, pickup 6:30am.", key="wholesale", cat="fact"),
            A("Café Ruta: 40 conchas every Friday at 6:30. That's a Thursday-night bake for Beto."),
        ]),
        Session("s03", "2026-09-14 16:00", W, "Hiring a pastry baker; loan; Q3 tax", [
            U("I need to hire a pastry baker. Budget is 20 dollars an hour, 35 hours a week.", key="hiring"),
            A("That's about $36,400 a year. Want a job post?"),
            U("Yes, write the job post."),
            A("Pastry Baker - Panadería Sol (East Austin)\n$20/hour, 35 hours/week, early mornings, Tuesday-Sunday rotation.\nYou'll make conchas, orejas, empanadas and seasonal pan dulce in a small, friendly team.\n2+ years of pastry experience; food handler card. Send a few photos of your work to jobs@panaderiasol.example.", key="jobpost"),
            U("Also thinking about a second oven. Applying for a 40,000 dollar SBA microloan through LiftFund.", key="loan", cat="fact"),
            A("LiftFund will want tax returns, a quote for the oven and a simple cash-flow projection."),
            T("calendar", "Created event in diego@panaderiasol.example: Thu 17 Sep 2026 10:00-11:00 \"LiftFund loan meeting\"", where=CAL),
            U("Paid the Q3 estimated tax today, 3,420 dollars. Rosa sent me the voucher.", key="tax_paid"),
            A("Done a day early. I'll note it."),
        ]),
        Session("s04", "2026-09-17 18:20", W, "Candidates; loan meeting; Lucía's play", [
            U("Two candidates for the pastry job: Marisol Vega, six years in a hotel pastry kitchen, and Kevin Tran, two years of bread, eager to learn pastry.", key="candidates"),
            A("Marisol can start producing on day one; Kevin is a longer bet. A paid trial shift for both would settle it."),
            U("LiftFund meeting went well: they need two years of tax returns and a quote for the oven.", key="loan_meeting"),
            T("web_search", diego_oven_quotes(rng), key="oven_quotes", args={"query": "second oven quote bakery Austin combi deck"}),
            A("The Rational iCombi Pro gives you steam and convection for pastries; the Bongard deck is the like-for-like option for bread."),
            U("Family: my daughter Lucía is nine. Her school play is Friday 23 October at 6pm, she's a tree and very proud.", key="daughter", cat="fact"),
            A("Lucía's play: Friday 23 October at 6pm. The shop closes at 3, so you'll make it easily."),
        ]),
        Session("s05", "2026-09-22 20:00", W, "Oven fixed; Marisol hired; flour supplier switch", [
            U("The element arrived and the tech installed it this morning. The bottom deck holds 450 now.", key="oven_fixed"),
            A("Great, back to full capacity."),
            U("Hired Marisol! She starts Monday 5 October; we'll do her training on my admin day.", key="hired", cat="fact"),
            A("Welcome Marisol: first day Monday 5 October, training while the shop is closed.", key="hired_ack"),
            U("Hill Country Mills raised their price to 33 dollars a bag. I'm switching to Barton Creek Grain: 24 dollars per 50-pound bag, delivered Tuesdays.", key="flour_new", cat="fact", sup="flour_old"),
            A("Barton Creek Grain at $24 a bag, Tuesday deliveries. At 30 bags a month that saves you $270 against the new Hill Country price.", key="flour_new_ack"),
            U("Write a polite email to Hill Country Mills ending the standing order."),
            A("Subject: Ending our standing flour order\n\nHi team, thank you for years of great flour and reliable Thursday deliveries. With the new pricing we've decided to move to another supplier, so please cancel our standing order after this week's delivery. All the best, Diego Álvarez, Panadería Sol"),
        ]),
        Session("s06", "2026-09-26 22:10", M, "Slow Saturday; market moves to Sundays; price rise", [
            U("Slow day at the Saturday market, we sold about 60% of what we brought. Too hot, 36 degrees.", key="market_sat"),
            U("I'm moving the stall: from October we'll be at the Mueller farmers market on Sundays, 10 to 2, instead of Saturdays downtown.", key="market_new", cat="fact", sup="market_old"),
            A("From October: Sundays 10-2 at Mueller instead of Saturdays at Republic Square. Don't forget to give SFC notice.", key="market_new_ack"),
        ]),
        Session("s07", "2026-10-01 19:00", W, "Price rise; cholesterol; new accountant; inspection scheduled", [
            U("The sourdough goes up to 9 dollars from today, 1 October. Butter and electricity went up.", key="price_new", cat="fact", sup="price_old"),
            A("Sourdough at $9 from today. Most regulars accept a dollar if you say why.", key="price_new_ack"),
            U("Make me a sign for the price change, short and friendly."),
            A("\"From 1 October our sourdough is $9. Same flour-water-salt-and-patience loaf; butter and power just got pricier. Gracias for baking with us!\""),
            U("Doctor visit: my cholesterol is high, 245. She wants me to cut back on butter and pastries myself, which is ironic.", key="health"),
            A("Ironic indeed. Taste-testing is part of the job, but a bite is enough for quality control."),
            U("Rosa is retiring at the end of October. We're moving to Brightline CPA; our contact there is Jamal Wright.", key="accountant_new", cat="fact", sup="accountant_old"),
            A("From November: Brightline CPA, contact Jamal Wright. Ask Rosa for the ledger and the Q3 filings before she goes.", key="accountant_new_ack"),
            U("Health inspection is scheduled for Thursday 8 October.", key="inspection"),
            T("web_search", "web_search(\"Austin Public Health food establishment inspection checklist\")\n1. Austin Public Health - Routine inspection report form: hand sinks stocked, cold holding at 41°F or below, thermometers in every cooler, food handler cards on site\n2. Common violations in bakeries: missing thermometers, uncovered flour bins, date labels on prepared fillings", args={"query": "Austin Public Health food establishment inspection checklist"}),
            A("The usual bakery misses: a thermometer in every cooler, covered and labelled flour bins, date labels on fillings, food handler cards on site."),
        ]),
        Session("s08", "2026-10-06 21:00", W, "Marisol's first day; first Barton Creek delivery; loan approved", [
            U("Marisol's first day went great. She made the best conchas we've ever sold.", key="marisol_day1"),
            U("The first Barton Creek delivery came this morning: 12 bags, and the quality is excellent.", key="flour_first"),
            A("Good start with both."),
            U("LiftFund approved the loan! 40,000 dollars at 8.5% over five years.", key="loan_approved", cat="fact"),
            A("Congratulations! That's about $820 a month.", key="loan_ack"),
            U("Which of the ovens should I buy?"),
            A("For pastry volume with Marisol, the Rational iCombi Pro: steam for pan dulce and it fits the loan with room for installation."),
        ]),
        Session("s09", "2026-10-08 22:30", M, "Inspection passed; first Mueller market ahead", [
            U("Inspection today: passed with a score of 96. The only note was a missing thermometer in the reach-in fridge.", key="inspection_result"),
            A("96 is an excellent score. A $10 thermometer closes that note."),
            U("First Sunday at Mueller this weekend. What's the weather going to be?"),
            T("weather", weather("Austin, TX", "Sun 11 Oct 2026", rng, 22, "sunny, wind S 12 km/h, UV 8"), key="wx_d1", args={"place": "Austin", "date": "2026-10-11"}),
            A("Warm and sunny by midday: bring a canopy and keep the butter pastries in the cooler until they're needed.", key="wx_d1_ack"),
        ]),
        Session("s10", "2026-10-12 16:00", W, "Sold out at Mueller; second oven ordered", [
            U("First Sunday at Mueller: sold out by 12:30! 180 conchas and 45 sourdough loaves.", key="mueller1"),
            A("Sold out by 12:30 on day one: bring more next Sunday."),
            U("Ordered the second oven: a Rational iCombi Pro 10-1/1, 32,400 dollars, delivery on 2 November.", key="oven_ordered", cat="fact"),
            A("Delivery Monday 2 November, the admin day: a good day for installation."),
            U("Lucía needs a tree costume for the play. Ideas that don't take more than an evening?"),
            A("A brown long-sleeve top and leggings for the trunk, a headband with felt or paper leaves glued on, and a few leaves pinned to the sleeves."),
        ]),
        Session("s11", "2026-10-19 15:30", W, "Earlier opening from November", [
            U("Decision: from Tuesday 3 November we open at 6:30am instead of 7, for the commuter crowd. Closing stays at 3.", key="hours_new", cat="fact", sup="hours_old"),
            A("From 3 November: 6:30-15:00, Tuesday to Sunday.", key="hours_new_ack"),
            U("Beto will start 30 minutes earlier to make it work.", key="schedule"),
            U("September numbers: revenue 38,200 dollars, and flour cost is down since the switch.", key="sales_sep"),
            A("Good month. The flour switch alone is worth over $100 a month."),
            U("Write an Instagram post announcing the new hours."),
            A("\"Early birds, this one's for you: from Tuesday 3 November, Panadería Sol opens at 6:30am! Conchas and coffee before work. See you at the counter.\""),
        ]),
        Session("s12", "2026-10-26 15:00", W, "Lucía's play; Brightline's first meeting", [
            U("Lucía's play was on Friday. She was the best tree in Texas.", key="play"),
            A("Of course she was!"),
            U("First meeting with Jamal at Brightline CPA today. He wants monthly bookkeeping instead of quarterly.", key="brightline"),
            U("How do I depreciate the new oven? Section 179?"),
            A("Section 179 lets you deduct the whole $32,400 in 2026 if the oven is in service by 31 December; Jamal will check it against your income."),
        ]),
        Session("s13", "2026-11-03 23:00", W, "New oven installed; first 6:30 opening", [
            U("The Rational was installed yesterday. Took two guys and a pallet jack.", key="oven_installed"),
            U("First day opening at 6:30: 22 customers before 7am.", key="first_630"),
            A("The commuter crowd showed up. Worth a note in a month to see if it holds."),
            U("Thanksgiving pie orders: we take them until Friday 20 November."),
            T("calendar", "Created event in diego@panaderiasol.example: Fri 20 Nov 2026 \"Last day for Thanksgiving pie orders\"", where=CAL),
            A("In the calendar. A sign at the counter from next week will help."),
        ]),
        Session("s14", "2026-11-08 18:00", W, "Thanksgiving pies; bookkeeping; Mueller forecast", [
            U("We have 64 Thanksgiving pie orders so far: 30 pecan, 22 pumpkin and 12 apple.", key="pies"),
            A("64 pies over two bake days is doable if Beto preps the crusts on the Monday before."),
            U("Marisol wants to add a guava and cream cheese pastry. What should we charge?"),
            A("Similar pastries in East Austin sell for $4-5; at your costs, $4.50 keeps a healthy margin."),
            U("Jamal set up monthly bookkeeping in QuickBooks; the first monthly close is 10 December.", key="quickbooks"),
            A("Then send him the October receipts this week so the first close is clean."),
            U("Weather for next Sunday's market at Mueller?"),
            T("weather", weather("Austin, TX", "Sun 15 Nov 2026", rng, 13, "clear, wind N 15 km/h, cooler front overnight"), key="wx_d2", args={"place": "Austin", "date": "2026-11-15"}),
            A("A cool, clear morning: bring a heater for the coffee urn and the canopy sides."),
        ]),
    ]
    Qs = [
        Q("diego-sf-01", "single-fact", "What's the name of my bakery and where is it?", {"intro": 2}, note="Panadería Sol, East Cesar Chavez Street, Austin."),
        Q("diego-sf-02", "single-fact", "Who runs the front counter?", {"staff": 2}, note="Ana."),
        Q("diego-sf-03", "single-fact", "How many bags of flour do we use a month?", {"flour_use": 2, "flour_ack": 1}, note="About 30 (50-lb bags)."),
        Q("diego-sf-04", "single-fact", "What was wrong with the deck oven?", {"oven_tech": 2, "oven": 1}, note="Bottom deck heating element failing; part $1,850."),
        Q("diego-sf-05", "single-fact", "How big is Café Ruta's weekly order?", {"wholesale": 2}, note="40 conchas every Friday, 6:30am pickup."),
        Q("diego-sf-06", "single-fact", "Who did I hire as pastry baker and when does she start?", {"hired": 2, "hired_ack": 1}, note="Marisol (Vega), Monday 5 October."),
        Q("diego-sf-07", "single-fact", "What score did we get in the health inspection?", {"inspection_result": 2}, note="96 (missing thermometer in the reach-in fridge)."),
        Q("diego-sf-08", "single-fact", "How big is the loan and what's the interest rate?", {"loan_approved": 2, "loan_ack": 1}, note="$40,000 at 8.5% over five years (LiftFund)."),
        Q("diego-sf-09", "single-fact", "What's my cholesterol level?", {"health": 2}, note="245."),
        Q("diego-sf-10", "single-fact", "Which second oven did I buy?", {"oven_ordered": 2, "oven_installed": 1}, note="Rational iCombi Pro 10-1/1, $32,400."),
        Q("diego-mh-01", "multi-hop", "How much will a month of flour cost with the new supplier?", {"flour_use": 2, "flour_new": 2, "flour_new_ack": 1}, sup=["flour_old", "flour_ack"], note="30 bags (s01) x $24 at Barton Creek Grain (s05) = $720; the $840 at Hill Country's old price is superseded."),
        Q("diego-mh-02", "multi-hop", "Was Marisol already working at the bakery on the day of the health inspection?", {"hired": 2, "inspection": 2, "marisol_day1": 1, "inspection_result": 1}, note="Starts 5 Oct (s05), inspection 8 Oct (s07): yes."),
        Q("diego-mh-03", "multi-hop", "Will the new oven arrive before we start opening at 6:30?", {"oven_ordered": 2, "hours_new": 2}, note="Delivery 2 Nov (s10); 6:30 opening from 3 Nov (s11): yes, a day before."),
        Q("diego-mh-04", "multi-hop", "Does the second oven fit within the loan amount?", {"oven_ordered": 2, "loan_approved": 2, "loan": 1}, note="$32,400 oven (s10) vs $40,000 loan (s08): yes."),
        Q("diego-mh-05", "multi-hop", "Who prepared the Q3 tax voucher, and who does our books now?", {"tax_paid": 2, "accountant_new": 2, "accountant_old": 1}, note="Rosa (s03); Brightline CPA / Jamal Wright (s07)."),
        Q("diego-mh-06", "multi-hop", "When and where is our farmers market stall now, and what does a sourdough loaf cost?", {"market_new": 2, "price_new": 2, "market_new_ack": 1, "price_new_ack": 1}, sup=["market_old", "price_old"], note="Sundays 10-2 at Mueller (s06) + $9 (s07); Saturday downtown and $8 superseded."),
        Q("diego-t-01", "temporal", "What did the oven repair technician tell me two weeks ago?", {"oven_tech": 2, "oven_tech_ack": 1}, as_of="2026-09-24T15:00:00Z", note="10 Sep: failing bottom element, part arrives 22 Sep. The 22 Sep install is the distractor."),
        Q("diego-t-02", "temporal", "How did the market go last Saturday?", {"market_sat": 2}, as_of="2026-09-29T15:00:00Z", note="Sat 26 Sep: slow, 60% sold, 36 degrees."),
        Q("diego-t-03", "temporal", "What did I tell you on Monday about hiring?", {"hiring": 2, "jobpost": 1}, as_of="2026-09-17T12:00:00Z", note="Mon 14 Sep: pastry baker, $20/hour, 35 h/week."),
        Q("diego-t-04", "temporal", "How did the inspection go last Thursday?", {"inspection_result": 2}, as_of="2026-10-12T15:00:00Z", note="Thu 8 Oct: 96. The 1 Oct scheduling message is not the answer."),
        Q("diego-t-05", "temporal", "What did I tell you on Monday about Brightline?", {"brightline": 2}, as_of="2026-10-29T15:00:00Z", note="Mon 26 Oct: Jamal wants monthly bookkeeping. The 1 Oct switch to Brightline is not the answer."),
        Q("diego-t-06", "temporal", "What was the forecast for our first Sunday market at Mueller?", {"wx_d1": 2, "wx_d1_ack": 1}, as_of="2026-10-20T15:00:00Z", note="The 8 Oct forecast for Sun 11 Oct."),
        Q("diego-p-01", "preference-update", "Who supplies our flour?", {"flour_new": 2, "flour_new_ack": 1, "flour_first": 1}, sup=["flour_old"], note="Barton Creek Grain (s05); Hill Country Mills superseded."),
        Q("diego-p-02", "preference-update", "Which day is our farmers market stall?", {"market_new": 2, "market_new_ack": 1, "mueller1": 1}, sup=["market_old"], note="Sundays at Mueller (s06); Saturdays downtown superseded."),
        Q("diego-p-03", "preference-update", "How much is a sourdough loaf?", {"price_new": 2, "price_new_ack": 1}, sup=["price_old"], note="$9 from 1 Oct (s07); $8 superseded."),
        Q("diego-p-04", "preference-update", "What time does the bakery open?", {"hours_new": 2, "hours_new_ack": 1, "first_630": 1}, sup=["hours_old", "hours_old_ack"], note="6:30am from 3 Nov (s11); 7am superseded."),
        Q("diego-p-05", "preference-update", "Who is our accountant?", {"accountant_new": 2, "accountant_new_ack": 1, "brightline": 1}, sup=["accountant_old"], note="Brightline CPA, Jamal Wright (s07); Rosa Delgado superseded."),
        Q("diego-n-01", "no-answer", "What's my wife's name?", note="Never mentioned."),
        Q("diego-n-02", "no-answer", "Which bank holds the business account?", note="Never mentioned (LiftFund is the lender)."),
        Q("diego-n-03", "no-answer", "What is Beto's phone number?", note="Never mentioned."),
        Q("diego-n-04", "no-answer", "When does the lease on the bakery building end?", note="Never mentioned."),
        Q("diego-n-05", "no-answer", "How much did the Instagram ad campaign cost?", note="There was an Instagram post, no paid campaign."),
    ]
    return Conversation("diego", "diego", S, Qs)


# ================================================================ conversation: demo
def demo_questions() -> list:
    """Questions over examples/demo_conversation.jsonl (keys are its event ids, prefix 'demo-')."""
    d = lambda x: "demo-" + x  # noqa: E731
    r = lambda **kw: {d(k.replace("_", "-")): v for k, v in kw.items()}  # noqa: E731
    return [
        Q("demo-sf-01", "single-fact", "what is maya allergic to", r(s01_t006=2, s05_t019=2, s11_t008=2, s01_t008=1), user="maya", note="Peanuts (severe). Stated three times (s01, s05, s11). From demo_queries.json."),
        Q("demo-sf-02", "single-fact", "pgbouncer pool settings and status for orders-service", r(s09_t003=2, s09_t010=2, s07_t024=1, s09_t004=1, s09_t011=1), user="maya", note="pool_mode=transaction, default_pool_size=40; SHOW POOLS 212 clients on 40 servers. From demo_queries.json."),
        Q("demo-sf-03", "single-fact", "cannot borrow self.entries as mutable because it is also borrowed as immutable", r(s06_t002=2, s06_t003=2, s06_t005=1), user="tom", note="Tom's E0502 in src/log.rs and the fix. From demo_queries.json."),
        Q("demo-sf-04", "single-fact", "where does maya live?", r(s01_t004=2, s11_t012=1, s01_t005=1), user="maya", note="Berlin (Kreuzberg)."),
        Q("demo-sf-05", "single-fact", "when is maya's birthday?", r(s05_t026=2, s05_t027=1), user="maya", note="3 November."),
        Q("demo-sf-06", "single-fact", "what is Priya's target time for the half marathon?", r(s04_t008=2, s04_t006=1), user="priya", note="Sub 1:50 at the Amsterdam half marathon, 18 Oct."),
        Q("demo-sf-07", "single-fact", "which hostel did Tom book in Kyoto?", r(s10_t010=2, s10_t007=1, s10_t006=1), user="tom", note="Kamogawa Hostel, 23-27 Oct, private twin, ¥5,200 each."),
        Q("demo-mh-01", "multi-hop", "suggest a restaurant near maya's hotel in Lisbon that is safe for her", r(s05_t015=2, s01_t006=2, s11_t010=1, s11_t011=1, s05_t019=1, s11_t008=1), user="maya",
          note="Hotel Casa do Largo, Alfama (s05) + peanut allergy (s01) -> Tasca do Chafariz. From demo_queries.json."),
        Q("demo-mh-02", "multi-hop", "is tom's Raft project due before his flight to Japan", r(s02_t024=2, s10_t002=2, s02_t025=1, s12_t001=1), sup=[d("s02-t007")], user="tom",
          note="Due Fri 16 Oct (s02) vs flight Sun 18 Oct (s10; the 17 Oct date of s02 is superseded). From demo_queries.json."),
        Q("demo-mh-03", "multi-hop", "who is on call while maya is at the wedding in Lisbon", r(s05_t008=2, s08_t013=2, s08_t012=2, s05_t016=1), sup=[d("s04-t004")], user=["maya", "priya"],
          note="Across users: Maya in Lisbon 9-12 Oct (s05); Priya swapped the rotation (s08): Jonas primary 5-11 Oct. The draft (s04) had Maya. From demo_queries.json."),
        Q("demo-mh-04", "multi-hop", "dietary restrictions to consider when ordering food for the team", r(s04_t015=2, s01_t006=2, s08_t016=1, s05_t019=1, s11_t008=1), user=["maya", "priya"],
          note="Across users: Priya lactose intolerant, Maya peanut allergy. From demo_queries.json (Tom is not on the team)."),
        Q("demo-mh-05", "multi-hop", "how many days after submitting his Raft project does Tom fly to Japan?", r(s12_t001=2, s10_t002=2, s12_t002=1, s10_t003=1, s10_t004=1), sup=[d("s02-t007")], user="tom",
          note="Submitted 13 Oct (s12), flies Sun 18 Oct (s10; 17 Oct in s02 is superseded): five days."),
        Q("demo-t-01", "temporal", "what went wrong with the deploy last week", r(s07_t008=2, s07_t011=2, s07_t020=2, s07_t009=1, s07_t010=1, s07_t015=1, s07_t019=1), user="maya", as_of="2026-09-29T12:00:00Z",
          note="Asked 29 Sep: the 22 Sep cutover failed on connection exhaustion. From demo_queries.json."),
        Q("demo-t-02", "temporal", "what did we find out about the stuck Postgres subscription on Tuesday the 8th?", r(s03_t014=2, s03_t017=2, s03_t015=1, s03_t016=1, s03_t019=1), user="maya", as_of="2026-09-14T12:00:00Z",
          note="8 Sep: rds.logical_replication must be 1 on the source (static, needs a reboot)."),
        Q("demo-t-03", "temporal", "what was the Kyoto weather forecast tom got yesterday?", r(s12_t011=2, s12_t012=1), user="tom", as_of="2026-10-14T12:00:00Z",
          note="13 Oct forecast for 23-27 Oct; the 3 Sep climate normals are the distractor."),
        Q("demo-t-04", "temporal", "what did tom say about his raft tests last Friday?", r(s10_t021=2, s10_t024=2, s10_t022=1, s10_t023=1), user="tom", as_of="2026-10-06T12:00:00Z",
          note="Fri 2 Oct: one failing replication test, fixed by truncating at the conflict. The 17 Sep election tests are the distractor."),
        Q("demo-t-05", "temporal", "what did Priya change in the on-call calendar on Thursday?", r(s08_t012=2, s08_t013=2, s08_t014=1), user="priya", as_of="2026-09-25T12:00:00Z",
          note="Thu 24 Sep: swapped Maya and Jonas. The 10 Sep draft is the distractor."),
        Q("demo-p-01", "preference-update", "which editor does maya use now", r(s09_t015=2, s09_t016=1), sup=[d("s01-t010"), d("s01-t011")], user="maya",
          note="Neovim (s09); VS Code (s01) superseded. From demo_queries.json."),
        Q("demo-p-02", "preference-update", "what are the dates of tom's japan trip now?", r(s10_t002=2, s10_t003=1, s10_t004=1), sup=[d("s02-t007")], user="tom",
          note="18-29 Oct (s10); 17-28 Oct (s02) superseded."),
        Q("demo-p-03", "preference-update", "who is primary on-call from 5 to 11 October?", r(s08_t013=2, s08_t012=2), sup=[d("s04-t004")], user="priya",
          note="Jonas Weber after the swap (s08); the draft (s04) had Maya."),
        Q("demo-p-04", "preference-update", "is tom getting the JR pass?", r(s06_t015=2, s10_t019=2, s06_t017=1), sup=[d("s02-t020")], user="tom",
          note="Yes, the 7-day pass (s06, confirmed s10); the s02 advice (point-to-point is cheaper) is superseded."),
        Q("demo-p-05", "preference-update", "on which day does tom activate his JR pass?", r(s10_t003=2, s10_t020=1), sup=[d("s06-t019")], user="tom",
          note="23 Oct (s10, after the flight change); 22 Oct (s06) superseded."),
        Q("demo-p-06", "preference-update", "when is the orders-service cutover now?", r(s07_t024=2, s07_t025=2), sup=[d("s01-t022"), d("s03-t023")], user="maya", as_of="2026-09-25T12:00:00Z",
          note="Asked 25 Sep: retry on Tue 29 Sep (s07); 22 Sep (s01, s03) superseded."),
        Q("demo-n-01", "no-answer", "what is maya's dog called?", user="maya", note="No dog."),
        Q("demo-n-02", "no-answer", "what is Tom's student ID number?", user="tom", note="Never mentioned."),
        Q("demo-n-03", "no-answer", "which airline is Priya flying to the conference with?", user="priya", note="No conference or flight for Priya."),
        Q("demo-n-04", "no-answer", "what's maya's favourite football team?", user="maya", note="Never mentioned."),
    ]


# ============================================================================ render
def _ts(s: str) -> datetime:
    return datetime.strptime(s, "%Y-%m-%d %H:%M").replace(tzinfo=timezone.utc)


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def render_conversation(conv: Conversation, rng: random.Random, fillers: list) -> tuple[list, dict]:
    """Events (dicts in the JSONL format) and key -> event_id."""
    events, keys = [], {}
    for sess in conv.sessions:
        turns = list(sess.turns)
        # 1-3 filler exchanges, at the start, the end, or where the user opens a new topic
        # (an assistant turn followed by a user turn), never inside an exchange
        for _ in range(rng.choice([1, 1, 2, 2, 3])):
            if not fillers:
                break
            q, a = fillers.pop()
            spots = [0, len(turns)] + [i for i in range(1, len(turns))
                                       if turns[i - 1].actor == "assistant" and turns[i].actor == "user"]
            at = rng.choice(spots)
            turns = turns[:at] + [U(q), A(a)] + turns[at:]
        t = _ts(sess.start)
        for n, turn in enumerate(turns, 1):
            if n > 1:
                t += timedelta(seconds=rng.randint(20, 140) if turn.actor == "user" else
                               rng.randint(4, 28) if turn.actor == "assistant" else rng.randint(1, 7))
            eid = f"{conv.name}-{sess.sid}-t{n:03d}"
            ev = {"event_id": eid, "ts": _iso(t), "session_id": f"{conv.name}-{sess.sid}", "user_id": conv.user,
                  "agent_id": AGENT_ID, "actor": turn.actor, "content": turn.content}
            ev["where"] = turn.where or sess.where
            if turn.category:
                ev["category"] = turn.category
            meta = dict(turn.meta)
            if turn.supersedes:
                meta["supersedes"] = keys[turn.supersedes]
            if meta:
                ev["metadata"] = meta
            events.append(ev)
            if turn.key:
                if turn.key in keys:
                    raise SystemExit(f"{conv.name}: duplicate key {turn.key}")
                keys[turn.key] = eid
    return events, keys


def resolve_questions(conv_name: str, user, qs: list, keys: dict) -> list:
    out = []
    for q in qs:
        def res(k):
            if k in keys:
                return keys[k]
            raise SystemExit(f"{q['id']}: unknown key {k!r}")
        out.append({
            "id": q["id"], "conversation": conv_name, "type": q["type"], "question": q["question"],
            "user_id": q["user"] or user,
            **({"as_of": q["as_of"]} if q["as_of"] else {}),
            "relevant": {res(k): g for k, g in q["rel"].items()},
            "superseded": [res(k) for k in q["sup"]],
            "note": q["note"],
        })
    return out


def build() -> tuple[dict, list]:
    """{conversation name: JSONL text} and the question list."""
    rng = random.Random(SEED)
    pool = list(FILLERS)
    files, questions = {}, []
    for make in (alex, noor, diego):
        conv = make(rng)
        fillers = pool[:]
        rng.shuffle(fillers)
        events, keys = render_conversation(conv, rng, fillers)
        files[conv.name] = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events)
        questions += resolve_questions(conv.name, conv.user, conv.questions, keys)
    demo = DEMO_SOURCE.read_text(encoding="utf-8")
    files["demo"] = demo
    demo_ids = {json.loads(line)["event_id"]: json.loads(line)["event_id"] for line in demo.splitlines() if line.strip()}
    questions += resolve_questions("demo", None, demo_questions(), demo_ids)
    return files, questions


# ========================================================================== validate
def validate(files: dict, questions: list) -> list[str]:
    problems = []
    events = {}
    users_of = {}
    for name, text in files.items():
        last_ts = {}
        for i, line in enumerate(text.splitlines(), 1):
            try:
                e = json.loads(line)
            except ValueError as ex:
                problems.append(f"{name}.jsonl:{i}: not JSON ({ex})")
                continue
            for f in ("event_id", "ts", "content"):
                if not isinstance(e.get(f), str) or not e[f].strip():
                    problems.append(f"{name}.jsonl:{i}: missing {f}")
            eid = e.get("event_id")
            if eid in events:
                problems.append(f"{name}.jsonl:{i}: duplicate event_id {eid}")
            events[eid] = (name, e)
            try:
                datetime.strptime(e["ts"], "%Y-%m-%dT%H:%M:%SZ")
            except (KeyError, ValueError):
                problems.append(f"{eid}: ts {e.get('ts')!r} is not YYYY-MM-DDTHH:MM:SSZ")
            if e.get("ts", "") >= LATEST_TS:
                problems.append(f"{eid}: ts {e['ts']} is not before {LATEST_TS}")
            sid = e.get("session_id")
            if sid in last_ts and e["ts"] <= last_ts[sid]:
                problems.append(f"{eid}: ts not increasing within session {sid}")
            last_ts[sid] = e.get("ts")
            users_of.setdefault(e.get("user_id"), set()).add(name)
    for u, convs in users_of.items():
        if len(convs) > 1:
            problems.append(f"user {u!r} appears in several conversations: {sorted(convs)}")
    seen = set()
    for q in questions:
        qid = q["id"]
        if qid in seen:
            problems.append(f"{qid}: duplicate question id")
        seen.add(qid)
        if q["type"] not in TYPES:
            problems.append(f"{qid}: unknown type {q['type']}")
        if q["conversation"] not in files:
            problems.append(f"{qid}: unknown conversation {q['conversation']}")
        users = q["user_id"] if isinstance(q["user_id"], list) else [q["user_id"]]
        as_of = q.get("as_of")
        if q["type"] == "temporal" and not as_of:
            problems.append(f"{qid}: temporal question without as_of")
        if (q["type"] == "no-answer") != (not q["relevant"]):
            problems.append(f"{qid}: no-answer questions (and only they) have no relevant events")
        if q["type"] == "preference-update" and not q["superseded"]:
            problems.append(f"{qid}: preference-update without superseded events")
        if q["type"] == "multi-hop":
            sess = {events[e][1]["session_id"] for e, g in q["relevant"].items() if g == 2 and e in events}
            if len(sess) < 2:
                problems.append(f"{qid}: multi-hop needs grade-2 events from at least two sessions")
        for eid in list(q["relevant"]) + q["superseded"]:
            if eid not in events:
                problems.append(f"{qid}: unknown event {eid}")
                continue
            name, e = events[eid]
            if name != q["conversation"]:
                problems.append(f"{qid}: {eid} belongs to conversation {name}")
            if e.get("user_id") not in users:
                problems.append(f"{qid}: {eid} belongs to user {e.get('user_id')}, not {users}")
            if as_of and e["ts"] > as_of:
                problems.append(f"{qid}: {eid} ({e['ts']}) is after as_of {as_of}")
        for eid, g in q["relevant"].items():
            if g not in (1, 2):
                problems.append(f"{qid}: grade {g} of {eid} is not 1 or 2")
        if set(q["relevant"]) & set(q["superseded"]):
            problems.append(f"{qid}: an event is both relevant and superseded")
        new_ts = max((events[e][1]["ts"] for e, g in q["relevant"].items() if g == 2 and e in events), default="")
        for eid in q["superseded"]:
            if eid in events and events[eid][1]["ts"] >= new_ts:
                problems.append(f"{qid}: superseded {eid} is not older than the newest answer")
    counts = Counter(q["type"] for q in questions)
    for t in TYPES:
        if counts[t] < 10:
            problems.append(f"only {counts[t]} questions of type {t} (want >= 10)")
    return problems


# ============================================================================== main
def write(files: dict, questions: list) -> None:
    CONV_DIR.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (CONV_DIR / f"{name}.jsonl").write_text(text, encoding="utf-8", newline="\n")
    QUESTIONS_FILE.write_text(json.dumps(questions, ensure_ascii=False, indent=2) + "\n", encoding="utf-8", newline="\n")


def stats(files: dict, questions: list) -> None:
    print(f"{'conversation':<12} {'events':>6} {'sessions':>8} {'users':>5}  first - last")
    for name, text in files.items():
        evs = [json.loads(x) for x in text.splitlines() if x.strip()]
        print(f"{name:<12} {len(evs):>6} {len({e['session_id'] for e in evs}):>8} {len({e['user_id'] for e in evs}):>5}"
              f"  {min(e['ts'] for e in evs)[:10]} - {max(e['ts'] for e in evs)[:10]}")
    print(f"total events: {sum(len(t.splitlines()) for t in files.values())}; questions: {len(questions)}")
    c = Counter((q["conversation"], q["type"]) for q in questions)
    print(f"{'':<12}" + "".join(f"{t:>18}" for t in TYPES))
    for name in files:
        print(f"{name:<12}" + "".join(f"{c[(name, t)]:>18}" for t in TYPES))
    print(f"{'all':<12}" + "".join(f"{sum(c[(n, t)] for n in files):>18}" for t in TYPES))


def show(files: dict, questions: list, ids: list) -> None:
    events = {}
    for text in files.values():
        for line in text.splitlines():
            e = json.loads(line)
            events[e["event_id"]] = e
    for q in questions:
        if ids and q["id"] not in ids:
            continue
        print(f"\n[{q['id']}] ({q['type']}, user {q['user_id']}{', as_of ' + q['as_of'] if q.get('as_of') else ''}) {q['question']}")
        print(f"  note: {q['note']}")
        for eid, g in q["relevant"].items():
            e = events[eid]
            print(f"  {g} {eid} {e['ts']} {e['actor']}: {e['content'][:150]!r}")
        for eid in q["superseded"]:
            e = events[eid]
            print(f"  S {eid} {e['ts']} {e['actor']}: {e['content'][:150]!r}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the files on disk are invalid or differ from a fresh run")
    ap.add_argument("--stats", action="store_true", help="print counts per conversation and question type")
    ap.add_argument("--show", nargs="*", metavar="QID", help="print questions with the text of their labelled events")
    args = ap.parse_args(argv)
    files, questions = build()
    problems = validate(files, questions)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    if args.show is not None:
        show(files, questions, args.show)
        return 0
    if args.check:
        stale = [n for n, text in files.items() if not (CONV_DIR / f"{n}.jsonl").exists()
                 or (CONV_DIR / f"{n}.jsonl").read_text(encoding="utf-8") != text]
        qtext = json.dumps(questions, ensure_ascii=False, indent=2) + "\n"
        if not QUESTIONS_FILE.exists() or QUESTIONS_FILE.read_text(encoding="utf-8") != qtext:
            stale.append("questions.json")
        extra = sorted(p.stem for p in CONV_DIR.glob("*.jsonl") if p.stem not in files) if CONV_DIR.exists() else []
        if stale or extra:
            print(f"stale: {stale}; unexpected: {extra}; run python bench/make_eval_data.py", file=sys.stderr)
            return 1
        print(f"ok: {len(files)} conversations, {len(questions)} questions, up to date")
        return 0
    if args.stats:
        stats(files, questions)
        return 0
    write(files, questions)
    stats(files, questions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
