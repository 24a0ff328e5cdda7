#!/usr/bin/env python3
"""Generate the bundled multi-session demo conversation for pgmem.

Writes two files next to this script:

* ``demo_conversation.jsonl`` -- the events that ``make demo`` ingests with
  ``pgmem ingest examples/demo_conversation.jsonl`` (one JSON object a line;
  the format is documented in ``examples/README.md``);
* ``demo_queries.json`` -- the demo queries, each with the event ids that
  answer it (the ids are resolved here, so the two files always agree).

The generator is deterministic: standard library only, a single
``random.Random(42)`` drawn from in a fixed order, stable key order in every
JSON object, ``\\n`` line endings, UTF-8.  Running it twice produces
byte-identical files (``--check`` verifies the files on disk are current).

Almost all content is hand-written below, session by session.  The random
generator only fills slots (prices, ratings, latencies, gaps between turns)
in the few templated tool outputs (flight, hotel, hostel, restaurant search
results) and in the timestamps.

Duplicates are deliberate and marked so that tests can check the merge job:

* ``metadata.near_duplicate_of``: the same fact restated in other words in a
  later event (e.g. "I'm allergic to peanuts." / "Just a reminder, I have a
  peanut allergy.");
* ``metadata.exact_duplicate_of``: byte-identical content repeated later (a
  re-pasted error, a cached search result, the same calendar listing);
* ``metadata.supersedes``: a newer fact or preference that replaces an older
  one (VS Code -> Neovim; Tom's trip moved by a day).  Not a duplicate: both
  should be kept, the newer one should win for "now" questions.

Usage::

    python examples/make_demo_conversation.py            # (re)write both files
    python examples/make_demo_conversation.py --check    # exit 1 if stale or invalid
    python examples/make_demo_conversation.py --stats    # print counts
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

SEED = 42
HERE = Path(__file__).resolve().parent
EVENTS_FILE = HERE / "demo_conversation.jsonl"
QUERIES_FILE = HERE / "demo_queries.json"
AGENT_ID = "assistant"

OMIT = object()  # sentinel: leave the optional "where" field out of this event


@dataclass
class Turn:
    actor: str
    content: str | None  # None only for exact duplicates (content copied)
    key: str | None = None  # label used to refer to this event below
    where: object = None  # None: session default; OMIT: no "where" field
    category: str | None = None
    meta: dict = field(default_factory=dict)
    near: str | None = None  # key of the event this restates
    exact: str | None = None  # key of the event this repeats byte for byte
    supersedes: str | None = None  # key of the older fact this replaces
    at: str | None = None  # "HH:MM:SS" UTC on the session's day, pins the ts
    gap: int | None = None  # extra seconds before this turn (a pause)


def U(content, **kw):
    return Turn("user", content, **kw)


def A(content, **kw):
    return Turn("assistant", content, **kw)


def T(tool, content, args=None, **kw):
    meta = kw.pop("meta", {})
    meta = {"tool": tool, "args": args or {}, **meta}
    return Turn("tool:" + tool, content, meta=meta, **kw)


@dataclass
class Session:
    sid: str
    user: str
    start: str  # ISO 8601 UTC
    where: object  # default "where" of the session's turns (a str, or OMIT)
    title: str
    turns: list


# --------------------------------------------------------------------------
# Templated tool outputs (the only place besides timing where rng is used)
# --------------------------------------------------------------------------

def tom_flight_search(rng: random.Random) -> str:
    options = [
        ("KLM", "via Amsterdam (AMS)", "KL1282 + KL861"),
        ("British Airways", "via London Heathrow (LHR)", "BA1435 + BA5"),
        ("Finnair", "via Helsinki (HEL)", "AY1366 + AY61"),
        ("Lufthansa", "via Frankfurt (FRA)", "LH963 + LH716"),
        ("Emirates", "via Dubai (DXB)", "EK24 + EK312"),
    ]
    rows = []
    for airline, via, flights in options:
        price = rng.randint(760, 1180)
        hours = rng.randint(15, 22)
        minutes = rng.choice([5, 10, 20, 25, 35, 40, 50, 55])
        rows.append([price, airline, via, flights, hours, minutes])
    # KLM is the one they end up on: make it the cheapest, as in real life
    cheapest = min(r[0] for r in rows)
    rows[0][0] = cheapest - rng.randint(12, 48)
    rows[0][4], rows[0][5] = 14, 25
    rows.sort(key=lambda r: r[0])
    lines = ["Results for: Edinburgh (EDI) -> Tokyo (HND/NRT), Sat 17 Oct - Wed 28 Oct 2026, 1 adult, economy"]
    for i, (price, airline, via, flights, h, m) in enumerate(rows, 1):
        code = "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(6))
        lines.append(
            f"{i}. {airline} {via}, {flights}: £{price} return per person, outbound {h}h {m:02d}m, 1 stop"
            f" - https://flights.example/r/{code}"
        )
    lines.append("Prices checked 2026-09-03 18:5x UTC; fares change often.")
    return "\n".join(lines)


def maya_flight_search(rng: random.Random) -> str:
    options = [
        ("TAP Air Portugal", "direct", "TP 541 BER 06:50 -> LIS 09:05", "TP 546 LIS 18:35 -> BER 22:55"),
        ("easyJet", "direct", "U2 5441 BER 13:20 -> LIS 15:40", "U2 5442 LIS 16:15 -> BER 20:30"),
        ("Lufthansa", "1 stop FRA", "LH 193 + LH 1166 BER 07:00 -> LIS 11:35", "LH 1173 + LH 198 LIS 17:05 -> BER 23:10"),
        ("Ryanair", "direct", "FR 2634 BER 17:55 -> LIS 20:15", "FR 2635 LIS 06:25 -> BER 10:45"),
    ]
    lines = ["Results for: Berlin (BER) -> Lisbon (LIS), out Fri 09 Oct 2026, back Mon 12 Oct 2026, 1 adult"]
    for i, (airline, stops, out, back) in enumerate(options, 1):
        price = rng.randint(168, 342)
        lines.append(f"{i}. {airline}, {stops}: out {out}; back {back}; EUR {price} incl. 1 cabin bag")
    lines.append("Source: https://flights.example/search?from=BER&to=LIS&d=2026-10-09&r=2026-10-12")
    return "\n".join(lines)


def alfama_hotel_search(rng: random.Random) -> str:
    hotels = [
        ("Casa do Largo", "Largo do Chafariz de Dentro", 164),
        ("Alfama Patio Rooms", "Rua de São Pedro", None),
        ("Hotel Miradouro Santa Luzia", "Largo de Santa Luzia", None),
        ("Sé Guesthouse", "Rua de São João da Praça", None),
        ("Pátio das Escadinhas", "Escadinhas de São Miguel", None),
    ]
    lines = ["Hotels in Alfama, Lisbon, 9-12 Oct 2026 (3 nights), 1 guest, sorted by guest rating"]
    rated = []
    for name, street, price in hotels:
        rating = round(rng.uniform(8.1, 9.4), 1)
        if price is None:
            price = rng.randint(128, 236)
        walk = rng.randint(4, 16)
        rated.append((rating, name, street, price, walk))
    rated.sort(key=lambda r: -r[0])
    for i, (rating, name, street, price, walk) in enumerate(rated, 1):
        slug = name.lower().replace(" ", "-").replace("é", "e").replace("á", "a")
        lines.append(
            f"{i}. {name}, {street} - {rating}/10 - EUR {price}/night - {walk} min walk to Santa Apolónia"
            f" - https://hotels.example/lisbon/{slug}"
        )
    return "\n".join(lines)


def kyoto_hostel_search(rng: random.Random) -> str:
    hostels = [
        ("Kamogawa Hostel", "Shimogyo-ku, 9 min walk from Kyoto Station", 5200),
        ("Hachijo Backpackers", "Minami-ku, 4 min walk from Kyoto Station", None),
        ("Shichijo Guest House", "Shimogyo-ku, 11 min walk from Kyoto Station", None),
        ("Toji Temple Lodge", "Minami-ku, 14 min walk from Kyoto Station", None),
        ("Gojo Riverside Hostel", "Shimogyo-ku, 2 stops on the Karasuma line", None),
    ]
    lines = ["Hostels near Kyoto Station, check-in Fri 23 Oct, check-out Tue 27 Oct 2026, 2 guests"]
    for i, (name, loc, price) in enumerate(hostels, 1):
        if price is None:
            price = rng.randrange(3900, 6800, 100)
        rating = round(rng.uniform(8.0, 9.3), 1)
        kitchen = "shared kitchen" if name in ("Kamogawa Hostel", "Toji Temple Lodge") else "no kitchen"
        room = rng.choice(["private twin", "private twin", "4-bed dorm", "6-bed dorm"])
        if name == "Kamogawa Hostel":
            room = "private twin"
        lines.append(f"{i}. {name} ({loc}) - ¥{price:,} per person/night, {room}, {kitchen}, rated {rating}")
    lines.append("Source: https://hostels.example/kyoto?near=kyoto-station&in=2026-10-23&out=2026-10-27")
    return "\n".join(lines)


def alfama_restaurant_search(rng: random.Random) -> str:
    places = [
        ("Tasca do Chafariz", "traditional Portuguese, live fado on Sundays", "3 min walk from Largo do Chafariz de Dentro"),
        ("Taberna Alfacinha", "petiscos, grilled sardines and bacalhau", "6 min walk"),
        ("Cantinho Maputo", "Mozambican: caril de amendoim (peanut curry), matapa", "5 min walk"),
        ("Mesa da Sé", "modern Portuguese tasting menu, max 8 guests per table", "12 min walk"),
        ("Casa dos Pastéis", "bakery-café, pastéis de nata, nut tarts", "4 min walk"),
    ]
    lines = ['web_search("restaurants Alfama Lisbon group dinner 6 people Sunday")']
    for i, (name, kind, dist) in enumerate(places, 1):
        rating = round(rng.uniform(4.2, 4.8), 1)
        reviews = rng.randint(180, 2400)
        slug = name.lower().replace(" ", "-").replace("é", "e")
        lines.append(f"{i}. {name} - {kind} - {dist} - {rating} ({reviews} reviews) - https://maps.example/place/{slug}")
    return "\n".join(lines)


# --------------------------------------------------------------------------
# The conversation, session by session
# --------------------------------------------------------------------------

def build_sessions(rng: random.Random) -> list[Session]:
    S = []

    # ---------------------------------------------------------------- s01
    S.append(Session("s01", "maya", "2026-09-01T07:12:00Z", "chat:web/maya",
                     "Maya introduces herself and plans the orders-service migration", [
        U("Hi! I'm Maya Okafor. I'll be using you for work and some personal planning over the next few weeks, "
          "so please remember the important bits.", key="maya_name", category="fact"),
        A("Nice to meet you, Maya. I'll keep track of what you tell me across sessions. What are you working on?"),
        U("I'm a backend engineer at Northwind Logistics. Mostly Python and Go, on the team that owns order processing.",
          key="maya_job", category="fact"),
        U("I live in Berlin (Kreuzberg), so use Berlin time for anything I schedule.",
          key="maya_city", category="fact"),
        A("Got it: backend engineer at Northwind Logistics (Python, Go, order processing), based in Berlin. "
          "I'll schedule in Europe/Berlin, which is CEST (UTC+2) until 25 October."),
        U("Also, important: I'm allergic to peanuts.", key="maya_peanut", category="fact"),
        U("If you ever suggest food or restaurants, keep that in mind.", category="preference"),
        A("Noted, peanut allergy. I'll flag dishes and cuisines where peanuts are common: satay, many Thai and "
          "Indonesian dishes, West African groundnut stews, and desserts with mixed nuts."),
        U("For coding help I prefer short answers with Python code examples rather than long explanations.",
          key="maya_pref_code", category="preference"),
        U("My editor is VS Code with the Vim keybindings extension and a dark theme. Terminal is zsh.",
          key="maya_vscode", category="preference"),
        A("Understood: short answers with Python snippets; VS Code with Vim keybindings, dark theme; zsh."),
        U("The big project this quarter: we're moving orders-service off two EC2 VMs running systemd units onto our "
          "EKS cluster, and at the same time upgrading its database from Postgres 12 to 15 on RDS.",
          key="migration_plan", category="context"),
        T("web_search",
          "1. Amazon RDS for PostgreSQL 12 end of standard support - docs.aws.amazon.com/AmazonRDS/latest/"
          "PostgreSQLReleaseNotes: \"RDS for PostgreSQL 12 reached end of standard support on February 28, 2025. "
          "Instances still running 12 are enrolled in RDS Extended Support, billed per vCPU-hour.\"\n"
          "2. Upgrading RDS PostgreSQL with logical replication for minimal downtime - aws.amazon.com/blogs/database\n"
          "3. pg_upgrade vs logical replication: choosing a major-version upgrade path - "
          "https://www.postgresql.org/docs/15/logical-replication.html",
          args={"query": "RDS PostgreSQL 12 end of standard support extended support cost"},
          where="https://docs.aws.amazon.com/AmazonRDS/latest/PostgreSQLReleaseNotes/"),
        A("Two risky changes at once. You could decouple them: move the service to Kubernetes first against the "
          "existing Postgres 12, then upgrade the database separately. Note that 12 has been on paid RDS Extended "
          "Support since February 2025, so the upgrade has a cost argument of its own."),
        U("They have to land together. Finance wants the Extended Support line gone by October, and I'd rather do "
          "one cutover than two. Logical replication is what I had in mind.", category="context"),
        A("Then a rough plan: 1) create RDS Postgres 15 and subscribe it to a publication on 12; 2) deploy "
          "orders-service to EKS staging against the 15 instance; 3) load-test; 4) cutover window: freeze writes, "
          "wait for replication lag to reach zero, sync sequences, switch DATABASE_URL, scale up the deployment, "
          "drain the VMs."),
        U("Don't forget sequences, we got burned by that in the last migration. How do I sync them?"),
        A("Logical replication does not copy sequence values. After the write freeze, on the new primary:\n"
          "```python\n"
          "cur.execute(\"\"\"SELECT s.relname, t.relname, a.attname FROM pg_depend d\n"
          "  JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'\n"
          "  JOIN pg_class t ON t.oid = d.refobjid\n"
          "  JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = d.refobjsubid\"\"\")\n"
          "for seq, table, col in cur.fetchall():\n"
          "    cur.execute(f\"SELECT setval('{seq}', (SELECT COALESCE(MAX({col}), 1) FROM {table}))\")\n"
          "```\nRun it as the last step before switching traffic.", category="skill"),
        U("What's a realistic timeline? I'd like to be done before October."),
        T("calendar",
          "Calendar maya@northwind.example, 2026-09-01 to 2026-09-30:\n"
          "- Tue 08 Sep 14:00-15:00 Migration design review (room Spree)\n"
          "- Thu 10 Sep 10:00-10:30 1:1 with Jonas\n"
          "- Tue 22 Sep 08:00-12:00 [tentative] orders-service cutover window\n"
          "- Fri 25 Sep all day Northwind offsite (Potsdam)",
          args={"action": "list", "calendar": "maya@northwind.example", "from": "2026-09-01", "to": "2026-09-30"},
          where="calendar:maya@northwind.example"),
        A("You already hold a tentative cutover window on Tue 22 Sep, 08:00-12:00. That leaves three weeks: staging "
          "green for the design review on 8 Sep, load test the week of 14 Sep, cutover on the 22nd."),
        U("Good, let's lock in the orders-service cutover for Tuesday 22 September, 08:00 to 12:00.",
          key="cutover_decision", category="episode"),
        U("Unrelated: my friend Inês is getting married in Lisbon on Saturday 10 October and I'm invited. "
          "Remind me to sort out flights soon.", key="lisbon_wedding", category="episode"),
        A("I'll remember: Inês's wedding in Lisbon, Saturday 10 October 2026. Want me to look at flights from "
          "Berlin now or later?"),
        U("Later, probably mid-September. Work first. I'll write the design doc tonight.",
          where="/home/maya/work/orders-service/docs/migration/orders-service-eks.md"),
    ]))

    # ---------------------------------------------------------------- s02
    S.append(Session("s02", "tom", "2026-09-03T18:40:00Z", "chat:mobile/tom",
                     "Tom introduces himself, Japan trip idea, Rust course", [
        U("hey, I'm Tom", key="tom_name", category="fact"),
        U("I'm a second-year computer science student at the University of Edinburgh",
          key="tom_uni", category="fact"),
        A("Hi Tom! What can I help with?"),
        U("uni stuff mostly, and planning a trip."),
        U("also I'm vegetarian, in case food comes up", key="tom_veg", category="fact"),
        A("Noted, vegetarian. What's the trip?"),
        U("my sister Lena and I want to do Japan in October. Tokyo first then Kyoto, 17 to 28 October",
          key="tom_trip1", category="episode"),
        A("Good timing: October is mild and dry-ish, though Kyoto's autumn leaves usually peak in mid to late "
          "November. Where are you flying from?"),
        U("Edinburgh, probably via London or Amsterdam. budget is about £1400 each for everything",
          key="tom_budget", category="fact"),
        T("web_search", tom_flight_search(rng),
          args={"query": "Edinburgh to Tokyo flights 17 October 2026 return 28 October"},
          where="https://flights.example/search?from=EDI&to=TYO&d=2026-10-17&r=2026-10-28"),
        A("Cheapest is KLM via Amsterdam, under £800 return with a 14.5-hour outbound. That leaves about £600 each "
          "for rail, beds and food, which is tight but doable. Fares on that route usually rise from late September."),
        U("also my birthday is on 14 October", key="tom_bday", category="fact"),
        U("so I'd like to do something fun that week before we leave"),
        A("Happy early birthday! 14 October is a Wednesday this year, three days before you'd fly."),
        U("what's the weather usually like in Kyoto late October?"),
        T("weather",
          "Kyoto, JP - climate normals, 20-31 October: average high 21°C, average low 11°C, "
          "rainfall 118 mm/month over ~8 rain days, sunrise 06:05, sunset 17:20 JST.",
          args={"location": "Kyoto, JP", "kind": "climate_normals", "period": "late-october"},
          where="https://weather.example/api/climate?city=Kyoto"),
        A("Mild: highs around 21°C, evenings near 11°C. A light jacket and a folding umbrella will do."),
        U("is the JR pass still worth it? heard it got way more expensive"),
        T("web_search",
          "1. Japan Rail Pass - official site (japanrailpass.net): Ordinary 7-day pass ¥50,000 per adult, "
          "14-day ¥80,000, 21-day ¥100,000. Prices revised on 1 October 2023 (7-day was ¥29,650).\n"
          "2. r/JapanTravel: \"Is the JR Pass still worth it after the price hike?\" - a Tokyo-Kyoto round trip on the "
          "Hikari is about ¥28,000, so the 7-day pass pays off only with extra long trips (Hiroshima, Kanazawa).\n"
          "3. JR Central: Nozomi and Mizuho services need a special ticket on top of the pass since October 2023.",
          key="jr_search", args={"query": "Japan Rail Pass price 2026 7 day worth it"},
          where="https://japanrailpass.net/en/purchase/price/"),
        A("For Tokyo-Kyoto and back only, point-to-point tickets (about ¥28,000 return) beat the 7-day pass "
          "(¥50,000). The pass pays off if you add a long day trip such as Hiroshima."),
        U("hmm we might do Hiroshima for a day. I'll think about it"),
        U("different topic: I'm learning Rust this term for my distributed systems course. "
          "I know Python pretty well but Rust is new to me", key="tom_rust", category="skill"),
        A("Good combination. What's the course project?"),
        U("we have to implement Raft in Rust. leader election first, then log replication. due 16 October",
          key="raft_deadline", category="fact"),
        A("Deadline noted: Raft project due Friday 16 October, the day before your flight. Start with the "
          "election timer and the RequestVote RPC; tokio plus a channel-based message bus keeps it testable."),
        U("pls keep answers short, I read these on my phone", key="tom_pref_short", category="preference"),
        A("Will do, short answers from now on."),
        U("cool. gonna sleep, early lab tomorrow"),
    ]))

    # ---------------------------------------------------------------- s03
    S.append(Session("s03", "maya", "2026-09-08T05:30:00Z", "slack:#infra",
                     "Maya debugs the staging deploy on EKS and logical replication", [
        U("Morning. The staging deploy of orders-service on EKS is in CrashLoopBackOff. Design review is at 14:00 "
          "and I'd like it green by then."),
        A("Let's see the pods and the logs of the previous container run."),
        T("shell",
          "$ kubectl -n orders-staging get pods\n"
          "NAME                             READY   STATUS             RESTARTS      AGE\n"
          "orders-api-7c9d8b6f5-2xkqp       0/1     CrashLoopBackOff   6 (41s ago)   9m12s\n"
          "orders-api-7c9d8b6f5-h8tzn       0/1     CrashLoopBackOff   6 (38s ago)   9m12s\n"
          "orders-worker-5f6b7d9c4-qq7lm    1/1     Running            0             9m12s",
          args={"cmd": "kubectl -n orders-staging get pods", "cwd": "/home/maya/work/orders-service"},
          meta={"exit_code": 0}, where="/home/maya/work/orders-service"),
        T("shell",
          "$ kubectl -n orders-staging logs orders-api-7c9d8b6f5-2xkqp --previous\n"
          "Traceback (most recent call last):\n"
          "  File \"/app/orders/db.py\", line 18, in <module>\n"
          "    engine = create_engine(os.environ[\"DATABASE_URL\"], pool_size=20, max_overflow=10)\n"
          "  File \"/usr/local/lib/python3.12/os.py\", line 714, in __getitem__\n"
          "    raise KeyError(key) from None\n"
          "KeyError: 'DATABASE_URL'",
          key="staging_keyerror",
          args={"cmd": "kubectl -n orders-staging logs orders-api-7c9d8b6f5-2xkqp --previous",
                "cwd": "/home/maya/work/orders-service"},
          meta={"exit_code": 0}, where="/home/maya/work/orders-service"),
        A("The API container has no DATABASE_URL. The worker runs, so the secret exists; it is probably only mounted "
          "into the worker. Check envFrom in deploy/helm/orders/templates/api-deployment.yaml."),
        U("You're right, the envFrom block is only in worker-deployment.yaml. Copy-paste miss from when I split the chart.",
          where="/home/maya/work/orders-service/deploy/helm/orders/templates/api-deployment.yaml"),
        A("Add it to the api container:\n```yaml\nenvFrom:\n  - secretRef:\n      name: orders-db\n```",
          where="/home/maya/work/orders-service/deploy/helm/orders/templates/api-deployment.yaml"),
        T("shell",
          "$ helm upgrade orders ./deploy/helm/orders -n orders-staging -f deploy/helm/values-staging.yaml\n"
          "Release \"orders\" has been upgraded. Happy Helming!\n"
          "NAME: orders\nLAST DEPLOYED: Tue Sep  8 09:52:10 2026\nNAMESPACE: orders-staging\n"
          "STATUS: deployed\nREVISION: 14",
          args={"cmd": "helm upgrade orders ./deploy/helm/orders -n orders-staging -f deploy/helm/values-staging.yaml",
                "cwd": "/home/maya/work/orders-service"},
          meta={"exit_code": 0}, where="/home/maya/work/orders-service", gap=1500),
        U("Now the API pods start but never become Ready. Events say: Readiness probe failed: HTTP probe failed "
          "with statuscode: 404", key="staging_probe404"),
        A("A 404 means the probe path doesn't exist. The chart probably probes /healthz while the FastAPI app "
          "serves /health."),
        U("Yep: app has /health, chart has /healthz. Classic.",
          where="/home/maya/work/orders-service/orders/api/health.py"),
        A("Change readinessProbe.httpGet.path to /health in values-staging.yaml and values-prod.yaml rather than "
          "adding an alias in the app; that keeps one health endpoint."),
        T("shell",
          "$ kubectl -n orders-staging get pods\n"
          "NAME                             READY   STATUS    RESTARTS   AGE\n"
          "orders-api-6d8f7c5b9-k2m4v       1/1     Running   0          2m3s\n"
          "orders-api-6d8f7c5b9-x9w2r       1/1     Running   0          2m1s\n"
          "orders-worker-5f6b7d9c4-qq7lm    1/1     Running   0          31m",
          args={"cmd": "kubectl -n orders-staging get pods", "cwd": "/home/maya/work/orders-service"},
          meta={"exit_code": 0}, where="/home/maya/work/orders-service"),
        U("Green. Now the Postgres side: the subscription on 15 is stuck, pg_stat_subscription shows nothing moving."),
        T("shell",
          "$ psql \"$ORDERS_PG15_URL\" -c 'select subname, received_lsn, latest_end_lsn, last_msg_receipt_time "
          "from pg_stat_subscription;'\n"
          "  subname   | received_lsn | latest_end_lsn | last_msg_receipt_time\n"
          "------------+--------------+----------------+-----------------------\n"
          " orders_sub |              |                |\n(1 row)",
          args={"cmd": "psql \"$ORDERS_PG15_URL\" -c 'select ... from pg_stat_subscription;'",
                "cwd": "/home/maya/work/orders-service"},
          meta={"exit_code": 0}, where="/home/maya/work/orders-service"),
        T("shell",
          "$ aws rds download-db-log-file-portion --db-instance-identifier orders-pg12 "
          "--log-file-name error/postgresql.log.2026-09-08-08 --output text | tail -2\n"
          "2026-09-08 08:14:02 UTC:10.20.3.41(52214):repl_user@orders:[2291]:ERROR:  logical decoding requires "
          "wal_level >= logical\n"
          "2026-09-08 08:14:02 UTC:10.20.3.41(52214):repl_user@orders:[2291]:STATEMENT:  CREATE_REPLICATION_SLOT "
          "\"orders_sub\" LOGICAL pgoutput NOEXPORT_SNAPSHOT",
          key="wal_level_error",
          args={"cmd": "aws rds download-db-log-file-portion --db-instance-identifier orders-pg12 ...",
                "cwd": "/home/maya/work/orders-service"},
          meta={"exit_code": 0}, where="/home/maya/work/orders-service"),
        A("On RDS, wal_level is set through the parameter rds.logical_replication = 1 in the source instance's "
          "parameter group. It is a static parameter, so the 12 instance needs a reboot.", category="skill"),
        U("Rebooting prod 12 needs a change ticket. I'll do it in tonight's maintenance window at 22:00.",
          category="episode"),
        A("After the reboot, drop and recreate the subscription (the slot was never created), then watch "
          "pg_stat_subscription until received_lsn advances."),
        U("Another one: orders_archive is partitioned by month on 12. Does logical replication handle partitions there?"),
        A("Not as a whole on 12: publish_via_partition_root arrived in Postgres 13. Add each partition to the "
          "publication individually and create matching partitions on 15 before subscribing.", category="skill"),
        U("Ugh, 26 partitions. I'll script it.", where="/home/maya/work/orders-service/scripts/publish_partitions.py"),
        U("Confirming for the review: the orders-service cutover stays on Tuesday 22 September, 08:00 to 12:00.",
          near="cutover_decision", category="episode"),
        U("Five-bullet summary for the design review, please."),
        A("- Target: orders-service on EKS + RDS Postgres 15, cutover Tue 22 Sep 08:00-12:00 CEST\n"
          "- Staging green after two chart fixes (missing envFrom on api, probe path /healthz -> /health)\n"
          "- Upgrade via logical replication; rds.logical_replication=1 on 12 needs tonight's reboot\n"
          "- orders_archive: 26 monthly partitions published individually (no publish_via_partition_root on 12)\n"
          "- Cutover steps: write freeze, lag 0, sync sequences, switch DATABASE_URL, scale up, drain VMs",
          key="design_summary"),
        U("Thanks, posting that in #orders-migration.", where="slack:#orders-migration"),
    ]))

    # ---------------------------------------------------------------- s04
    S.append(Session("s04", "priya", "2026-09-10T10:05:00Z", "slack:#oncall",
                     "Priya plans the October on-call rotation, alerts and postmortem template", [
        U("Hi, I'm Priya Raman, SRE lead at Northwind Logistics. I work remotely from Amsterdam.",
          key="priya_intro", category="fact"),
        A("Hi Priya, nice to meet you. What's on your plate?"),
        U("Finalising the October on-call rotation for the platform team. Can you pull the current draft?"),
        T("calendar",
          "Calendar platform-oncall@northwind.example, draft, 28 Sep - 25 Oct 2026:\n"
          "- 28 Sep - 04 Oct: primary Jonas Weber, secondary Priya Raman\n"
          "- 05 Oct - 11 Oct: primary Maya Okafor, secondary Luca Bianchi\n"
          "- 12 Oct - 18 Oct: primary Luca Bianchi, secondary Jonas Weber\n"
          "- 19 Oct - 25 Oct: primary Priya Raman, secondary Maya Okafor",
          key="oncall_draft",
          args={"action": "list", "calendar": "platform-oncall@northwind.example", "from": "2026-09-28", "to": "2026-10-25"},
          where="calendar:platform-oncall@northwind.example"),
        A("That's the draft. Four people, one week each as primary. Does anyone have leave in October yet?"),
        U("Not that I know of. For me it works: I'm running the Amsterdam half marathon on Sunday 18 October "
          "and I'm not on call that weekend.", key="priya_marathon", category="fact"),
        A("Right, 12-18 Oct is Luca primary with Jonas as secondary. Good luck with the race! Do you have a target time?"),
        U("Sub 1:50 would make me happy. The training plan has me at 42 km a week right now.", category="episode"),
        U("Work again: every alert in the orders namespace should link to a runbook. Our runbooks are Markdown "
          "files in the platform-runbooks repo and I prefer them that way over Confluence.",
          key="priya_runbooks", category="preference"),
        A("Then put the link in the rule's annotations.runbook_url, pointing at the rendered Markdown, e.g. "
          "https://git.northwind.example/platform/platform-runbooks/blob/main/orders/high-5xx.md"),
        U("Show me a 5xx-rate alert for orders-api. Threshold 2% over 5 minutes, same as we had on the VMs.",
          category="preference"),
        A("```yaml\n- alert: OrdersApiHigh5xx\n"
          "  expr: |\n"
          "    sum(rate(http_requests_total{namespace=\"orders\",app=\"orders-api\",code=~\"5..\"}[5m]))\n"
          "      / sum(rate(http_requests_total{namespace=\"orders\",app=\"orders-api\"}[5m])) > 0.02\n"
          "  for: 5m\n"
          "  labels: {severity: page, team: orders}\n"
          "  annotations:\n"
          "    summary: \"orders-api 5xx above 2% for 5 minutes\"\n"
          "    runbook_url: https://git.northwind.example/platform/platform-runbooks/blob/main/orders/high-5xx.md\n"
          "```", key="alert_rule", where="https://git.northwind.example/platform/alerts/blob/main/orders/api.yaml"),
        U("Also a template for postmortems. We do blameless postmortems, timeline in UTC, action items with owners "
          "and due dates.", key="priya_pm_pref", category="preference"),
        A("# Postmortem: <title>\n**Date:** <YYYY-MM-DD> | **Authors:** <names> | **Status:** draft\n"
          "## Summary\n## Impact\n(users affected, duration, error rate; times in UTC)\n"
          "## Timeline (UTC)\n| time | event |\n## Root cause\n## Contributing factors\n"
          "## What went well / what went badly\n## Action items\n| # | action | owner | due |\n"
          "_Blameless: describe systems and decisions, not people._", key="pm_template"),
        U("One personal thing: I'm lactose intolerant, so no dairy for me if you ever help with team catering.",
          key="priya_lactose", category="fact"),
        A("Noted: lactose intolerant, no dairy."),
        U("Maya Okafor is running the orders-service cutover on Tuesday 22 September, 08:00 to 12:00 Berlin time. "
          "I'll shadow it from the SRE side.", key="priya_shadow", category="episode"),
        A("Want a calendar hold and a reminder for that morning?"),
        U("Yes, start 07:45 Amsterdam time."),
        T("calendar",
          "Created event in priya@northwind.example: \"Shadow orders-service cutover (Maya)\" "
          "Tue 22 Sep 2026 07:45-12:00 Europe/Amsterdam, reminder 15 minutes before.",
          args={"action": "create", "calendar": "priya@northwind.example", "start": "2026-09-22T07:45:00+02:00",
                "end": "2026-09-22T12:00:00+02:00"},
          where="calendar:priya@northwind.example"),
        U("How do I stop alerts from paging during the cutover window without losing them?"),
        T("web_search",
          "1. Alertmanager documentation - Silences: \"Silences are a straightforward way to simply mute alerts for "
          "a given time. Incoming alerts are checked whether they match all the equality or regular expression "
          "matchers of an active silence.\" - https://prometheus.io/docs/alerting/latest/alertmanager/#silences\n"
          "2. amtool silence add --duration=4h 'namespace=\"orders\"' --comment=\"planned cutover\" - "
          "github.com/prometheus/alertmanager#amtool\n"
          "3. Inhibition rules vs silences for maintenance windows - a blog post comparing both approaches",
          args={"query": "alertmanager mute alerts during maintenance window silence vs inhibit"},
          where="https://prometheus.io/docs/alerting/latest/alertmanager/#silences"),
        A("Use a silence, not an inhibition rule: silenced alerts still fire and stay visible in Alertmanager, they "
          "just don't notify. For example:\n"
          "amtool silence add namespace=orders severity=page --start=2026-09-22T06:00:00Z --duration=4h "
          "--comment=\"orders-service cutover\"\n"
          "Keep the 5xx alert unsilenced if you want a human to look anyway.", category="skill"),
        U("I'll silence everything except OrdersApiHigh5xx then.", category="episode"),
    ]))

    # ---------------------------------------------------------------- s05
    S.append(Session("s05", "maya", "2026-09-15T17:20:00Z", "chat:web/maya",
                     "Maya books her trip to Lisbon", [
        U("Okay, Lisbon: Inês's wedding is on Saturday 10 October.", key="lisbon_wedding2", near="lisbon_wedding",
          category="episode"),
        U("I want to fly out Friday morning and come back Monday."),
        A("Berlin (BER) to Lisbon (LIS), out Friday 9 October, back Monday 12 October. Searching."),
        T("web_search", maya_flight_search(rng),
          args={"query": "flights BER LIS 9 October 2026 return 12 October"},
          where="https://flights.example/search?from=BER&to=LIS&d=2026-10-09&r=2026-10-12"),
        A("Only the TAP direct gets you in before noon on Friday (09:05). easyJet is the relaxed option, landing "
          "15:40. On the way back TAP leaves Lisbon at 18:35, which gives you most of Monday."),
        U("The 06:50 TAP flight is brutal but gives me the whole day. I'll take it, aisle seat.", category="episode"),
        A("I can't book for you. The fare is on tap.example under \"Lisbon, 9-12 Oct\"; send me the confirmation "
          "and I'll put it in your calendar."),
        U("Booked it myself. Confirmation K7QX2M. TP 541 BER 06:50 -> LIS 09:05 on Fri 9 Oct; "
          "back TP 546 LIS 18:35 -> BER 22:55 on Mon 12 Oct.", key="maya_flights", category="fact"),
        T("calendar",
          "Created 3 events in maya@northwind.example (Europe/Berlin):\n"
          "- Fri 09 Oct 2026 06:50-10:05 Flight TP 541 BER -> LIS (conf. K7QX2M)\n"
          "- Sat 10 Oct 2026 16:00-23:59 Inês & Rui's wedding, Lisbon\n"
          "- Mon 12 Oct 2026 19:35-22:55 Flight TP 546 LIS -> BER (conf. K7QX2M)",
          args={"action": "create", "calendar": "maya@northwind.example", "count": 3},
          where="calendar:maya@northwind.example"),
        T("calendar",
          "maya@northwind.example, 2026-10-09 to 2026-10-12 (Europe/Berlin):\n"
          "- Fri 09 Oct 06:50-10:05 Flight TP 541 BER -> LIS (conf. K7QX2M)\n"
          "- Sat 10 Oct 16:00-23:59 Inês & Rui's wedding, Lisbon\n"
          "- Mon 12 Oct 19:35-22:55 Flight TP 546 LIS -> BER (conf. K7QX2M)",
          key="lisbon_cal",
          args={"action": "list", "calendar": "maya@northwind.example", "from": "2026-10-09", "to": "2026-10-12"},
          where="calendar:maya@northwind.example"),
        A("All three are in your calendar (times in Berlin time, so Lisbon local times are one hour earlier)."),
        U("Hotel: somewhere walkable in Alfama, under 180 euros a night, three nights."),
        T("web_search", alfama_hotel_search(rng),
          args={"query": "hotel Alfama Lisbon 9-12 October 2026 under 180 EUR"},
          where="https://hotels.example/lisbon?district=alfama&in=2026-10-09&out=2026-10-12"),
        A("Casa do Largo fits best: EUR 164 a night, on Largo do Chafariz de Dentro at the bottom of Alfama, flat "
          "walk to the river and to Santa Apolónia metro."),
        U("Booked Casa do Largo in Alfama, Largo do Chafariz de Dentro, three nights from the 9th, 164 euros a night.",
          key="maya_hotel", category="fact"),
        U("Hmm, I just realised I'm primary on-call 5-11 October in Priya's draft rotation. That overlaps the trip.",
          key="maya_oncall_conflict", category="episode"),
        A("Yes, Friday 9 to Sunday 11 October overlap. Jonas is primary the week before (28 Sep - 4 Oct); swapping "
          "whole weeks with him is the cleanest fix."),
        U("I'll ask Priya to swap my week with Jonas's.", category="episode"),
        U("Just a reminder, I have a peanut allergy.", key="maya_peanut2", near="maya_peanut", category="fact"),
        U("Is there anything risky in Portuguese food?"),
        A("Traditional Portuguese cooking rarely uses peanuts. The risks are desserts with mixed nuts and some "
          "Mozambican or Angolan dishes that Lisbon has plenty of, e.g. caril de amendoim (peanut curry) and "
          "muamba. I'll flag those."),
        U("What's the weather usually like in Lisbon in early October?"),
        T("weather",
          "Lisbon, PT - climate normals, 1-15 October: average high 24°C, average low 15°C, sea 19°C, "
          "rainfall 35 mm over the fortnight, about 4 rain days.",
          args={"location": "Lisbon, PT", "kind": "climate_normals", "period": "early-october"},
          where="https://weather.example/api/climate?city=Lisbon"),
        A("Warm days around 24°C, evenings around 15°C, usually dry. The dress code matters more than the weather."),
        U("Dress code is 'garden formal', so I need to find something this weekend.", category="context"),
        U("One more thing for my profile: my birthday is 3 November.", key="maya_bday", category="fact"),
        A("Stored: birthday on 3 November (a Tuesday this year)."),
    ]))

    # ---------------------------------------------------------------- s06
    S.append(Session("s06", "tom", "2026-09-17T19:10:00Z", "chat:web/tom",
                     "Tom fights the borrow checker in his Raft project; JR pass decision", [
        U("rust question. the borrow checker hates my raft log code", where="/home/tom/uni/dsys/raft/src/log.rs"),
        U("error[E0502]: cannot borrow `self.entries` as mutable because it is also borrowed as immutable\n"
          "  --> src/log.rs:47:13\n"
          "   |\n"
          "45 |         let last = self.entries.last().unwrap();\n"
          "   |                    ------------ immutable borrow occurs here\n"
          "46 |         if entry.term >= last.term {\n"
          "47 |             self.entries.push(entry);\n"
          "   |             ^^^^^^^^^^^^^^^^^^^^^^^^ mutable borrow occurs here\n"
          "48 |             self.commit_hint = last.index;\n"
          "   |                                ---------- immutable borrow later used here",
          key="tom_e0502", where="/home/tom/uni/dsys/raft/src/log.rs", category="episode"),
        A("`last` borrows self.entries and you still use it after push. Copy the numbers out first:\n"
          "```rust\nlet (last_term, last_index) = {\n    let l = self.entries.last().unwrap();\n    (l.term, l.index)\n};\n"
          "if entry.term >= last_term {\n    self.entries.push(entry);\n    self.commit_hint = last_index;\n}\n```",
          key="tom_e0502_fix", where="/home/tom/uni/dsys/raft/src/log.rs", category="skill"),
        U("that compiles. why does copying the numbers fix it though"),
        A("`last` is a reference into the Vec. push can reallocate the Vec and move every entry, which would leave "
          "`last` pointing at freed memory. Two copied u64s aren't a reference, so nothing dangles.", category="skill"),
        U("ok makes sense. next: my election timeout in tokio::select! resets on every loop iteration",
          where="/home/tom/uni/dsys/raft/src/election.rs"),
        A("Create the sleep once, outside the loop, and reset it only on a heartbeat:\n"
          "```rust\nlet timeout = tokio::time::sleep(random_timeout());\ntokio::pin!(timeout);\nloop {\n"
          "    tokio::select! {\n        _ = &mut timeout => self.start_election().await,\n"
          "        Some(msg) = rx.recv() => {\n            if msg.is_heartbeat() {\n"
          "                timeout.as_mut().reset(Instant::now() + random_timeout());\n            }\n"
          "            self.handle(msg).await;\n        }\n    }\n}\n```",
          where="/home/tom/uni/dsys/raft/src/election.rs", category="skill"),
        T("shell",
          "$ cargo test election\n"
          "   Compiling raft v0.1.0 (/home/tom/uni/dsys/raft)\n"
          "    Finished `test` profile [unoptimized + debuginfo] target(s) in 6.42s\n"
          "     Running unittests src/lib.rs (target/debug/deps/raft-3c1f0d9a2b7e5d14)\n"
          "running 3 tests\n"
          "test election::tests::single_node_becomes_leader ... ok\n"
          "test election::tests::split_vote_retries ... ok\n"
          "test election::tests::stale_term_rejected ... FAILED\n\n"
          "failures:\n---- election::tests::stale_term_rejected stdout ----\n"
          "thread 'election::tests::stale_term_rejected' panicked at src/election.rs:112:9:\n"
          "assertion `left == right` failed: vote granted for a stale term\n  left: true\n right: false\n\n"
          "test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.31s",
          key="tom_test_fail", args={"cmd": "cargo test election", "cwd": "/home/tom/uni/dsys/raft"},
          meta={"exit_code": 101}, where="/home/tom/uni/dsys/raft"),
        A("Your RequestVote handler grants votes without checking the term. Reject stale terms first:\n"
          "```rust\nif req.term < self.current_term {\n"
          "    return VoteReply { term: self.current_term, granted: false };\n}\n```",
          where="/home/tom/uni/dsys/raft/src/election.rs", category="skill"),
        T("shell",
          "$ cargo test election\n"
          "    Finished `test` profile [unoptimized + debuginfo] target(s) in 1.87s\n"
          "     Running unittests src/lib.rs (target/debug/deps/raft-3c1f0d9a2b7e5d14)\n"
          "running 3 tests\n"
          "test election::tests::single_node_becomes_leader ... ok\n"
          "test election::tests::split_vote_retries ... ok\n"
          "test election::tests::stale_term_rejected ... ok\n\n"
          "test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.29s",
          args={"cmd": "cargo test election", "cwd": "/home/tom/uni/dsys/raft"},
          meta={"exit_code": 0}, where="/home/tom/uni/dsys/raft"),
        U("all green!!"),
        U("for context: I'm in my second year of computer science at Edinburgh",
          key="tom_uni2", near="tom_uni", category="fact"),
        U("so, student budget. cheapest ways to get around Japan?"),
        A("No student discount on the JR Pass for foreign students. Cheapest: overnight highway buses Tokyo-Kyoto "
          "(¥4,000-8,000), IC cards (Suica/ICOCA) for local trains, and regional passes like the Kansai Area Pass."),
        U("we decided: Hiroshima as a day trip from Kyoto, so we're getting the 7-day JR pass after all",
          key="tom_jrpass", category="episode"),
        T("web_search", None, exact="jr_search", args={"query": "Japan Rail Pass price 2026 7 day worth it"},
          meta={"cache": "hit"}, where="https://japanrailpass.net/en/purchase/price/"),
        A("Still ¥50,000 per adult for 7 days. With Hiroshima (Kyoto-Hiroshima return is about ¥22,000) plus "
          "Tokyo-Kyoto and back (about ¥28,000) it breaks even, and local JR lines are covered too."),
        U("when do we activate it if we're in Tokyo the first 5 days"),
        A("Tokyo 17-21 Oct on a Suica card, activate the pass on 22 Oct for Tokyo -> Kyoto; it then covers "
          "Hiroshima and the ride back to Tokyo through 28 Oct."),
        U("can you show me a property test for the log so I stop breaking it"),
        A("With proptest:\n```rust\nproptest! {\n    #[test]\n    fn append_keeps_terms_monotonic(terms in "
          "prop::collection::vec(1u64..5, 1..50)) {\n        let mut log = Log::default();\n"
          "        let mut sorted = terms.clone(); sorted.sort();\n"
          "        for (i, t) in sorted.iter().enumerate() { log.append(Entry::new(*t, i as u64 + 1)); }\n"
          "        prop_assert!(log.entries.windows(2).all(|w| w[0].term <= w[1].term));\n    }\n}\n```",
          where="/home/tom/uni/dsys/raft/tests/log_props.rs", category="skill"),
        U("adding that tomorrow, thanks. this was super useful"),
    ]))

    # ---------------------------------------------------------------- s07
    S.append(Session("s07", "maya", "2026-09-22T05:52:00Z", "slack:#orders-migration",
                     "Cutover day: the deploy fails on connection exhaustion and is rolled back", [
        U("Cutover day. Writes frozen on the old VMs at 08:00 as planned. Checking replication lag before the switch.",
          at="06:00:40", category="episode"),
        T("shell",
          "$ psql \"$ORDERS_PG12_URL\" -c \"select slot_name, confirmed_flush_lsn, "
          "pg_current_wal_lsn() - confirmed_flush_lsn as lag_bytes from pg_replication_slots;\"\n"
          "  slot_name  | confirmed_flush_lsn | lag_bytes\n"
          "------------+---------------------+-----------\n"
          " orders_sub | 3A/7F2C1B88         |         0\n(1 row)",
          args={"cmd": "psql \"$ORDERS_PG12_URL\" -c \"select slot_name, ... from pg_replication_slots;\"",
                "cwd": "/home/maya/work/orders-service"},
          meta={"exit_code": 0}, where="/home/maya/work/orders-service"),
        A("Lag is 0 bytes. Next: sync sequences on 15, then switch DATABASE_URL."),
        T("shell",
          "$ python scripts/sync_sequences.py --target \"$ORDERS_PG15_URL\"\n"
          "synced 31 sequences (orders_id_seq -> 48213377, order_items_id_seq -> 151930042, "
          "shipments_id_seq -> 20977310, ...)",
          args={"cmd": "python scripts/sync_sequences.py --target \"$ORDERS_PG15_URL\"",
                "cwd": "/home/maya/work/orders-service"},
          meta={"exit_code": 0}, where="/home/maya/work/orders-service/scripts/sync_sequences.py"),
        T("shell",
          "$ helm upgrade orders ./deploy/helm/orders -n orders -f deploy/helm/values-prod.yaml "
          "--set image.tag=2026.09.21-3f9a1c2\n"
          "Release \"orders\" has been upgraded. Happy Helming!\n"
          "NAME: orders\nLAST DEPLOYED: Tue Sep 22 08:17:40 2026\nNAMESPACE: orders\nSTATUS: deployed\nREVISION: 3",
          args={"cmd": "helm upgrade orders ./deploy/helm/orders -n orders -f deploy/helm/values-prod.yaml "
                       "--set image.tag=2026.09.21-3f9a1c2", "cwd": "/home/maya/work/orders-service"},
          meta={"exit_code": 0}, where="/home/maya/work/orders-service", at="06:17:40"),
        U("Traffic switched to EKS at 08:19. Looks fine so far, p95 at 140 ms.", at="06:19:30", category="episode"),
        U("Error rate jumping. Seeing this in the api logs:", at="06:31:20"),
        U("psycopg.OperationalError: connection failed: FATAL:  remaining connection slots are reserved for "
          "non-replication superuser connections", key="maya_err1", category="episode"),
        T("shell",
          "$ kubectl -n orders get hpa orders-api\n"
          "NAME         REFERENCE               TARGETS   MINPODS   MAXPODS   REPLICAS   AGE\n"
          "orders-api   Deployment/orders-api   91%/60%   3         12        12         14m",
          key="hpa_output", args={"cmd": "kubectl -n orders get hpa orders-api", "cwd": "/home/maya/work/orders-service"},
          meta={"exit_code": 0}, where="/home/maya/work/orders-service"),
        T("shell",
          "$ psql \"$ORDERS_PG15_URL\" -c 'show max_connections;' -c 'select count(*) from pg_stat_activity;'\n"
          " max_connections\n-----------------\n 300\n(1 row)\n\n count\n-------\n   297\n(1 row)",
          key="maxconn_output",
          args={"cmd": "psql \"$ORDERS_PG15_URL\" -c 'show max_connections;' -c 'select count(*) from pg_stat_activity;'",
                "cwd": "/home/maya/work/orders-service"},
          meta={"exit_code": 0}, where="/home/maya/work/orders-service"),
        A("That's it: 297 of 300 connections in use. The HPA scaled orders-api to 12 pods, and each pod's "
          "SQLAlchemy pool can open 20 + 10 overflow, up to 360 connections. Failed requests raise latency, latency "
          "drives the HPA up, more pods open more pools: a feedback loop. Quick options: cap the HPA at 6 pods and "
          "lower pool_size, or roll back.", key="deploy_analysis"),
        T("shell",
          "$ kubectl -n orders patch hpa orders-api -p '{\"spec\":{\"maxReplicas\":6}}'\n"
          "horizontalpodautoscaler.autoscaling/orders-api patched",
          args={"cmd": "kubectl -n orders patch hpa orders-api -p '{\"spec\":{\"maxReplicas\":6}}'",
                "cwd": "/home/maya/work/orders-service"},
          meta={"exit_code": 0}, where="/home/maya/work/orders-service"),
        U("Capped the HPA at 6 but the old pods are slow to drain, still getting it:", gap=240),
        U(None, exact="maya_err1", meta={"repasted": True}),
        U("5xx at 7% now. Priya says roll back. Rolling back to the VMs.", at="06:44:10", key="rollback_decision",
          category="episode"),
        A("Careful: orders written to 15 since 08:19 are not on 12 (replication runs 12 -> 15 only). Point the VMs' "
          "DATABASE_URL at 15 so you roll back the compute, not the database."),
        U("Good catch. VMs now point at 15; they only hold 2 x 30 connections."),
        T("shell",
          "$ ./scripts/switch_traffic.sh --to vms\n"
          "[08:56:12] updating Route53 record orders.internal.northwind.example -> 10.20.4.17,10.20.4.18\n"
          "[08:56:14] waiting for TTL (60s)...\n"
          "[08:57:15] done, traffic on VMs (DATABASE_URL=orders-pg15.internal)",
          args={"cmd": "./scripts/switch_traffic.sh --to vms", "cwd": "/home/maya/work/orders-service"},
          meta={"exit_code": 0}, where="/home/maya/work/orders-service/scripts/switch_traffic.sh", at="06:57:15"),
        U("Stable again at 09:03, 5xx back under 0.1%. About 30 minutes of elevated errors, peaking at 7%.",
          key="deploy_impact", at="07:03:50", category="episode"),
        A("Root cause for the notes: connection exhaustion on Postgres 15. The HPA scaled orders-api to 12 pods x "
          "(pool_size 20 + max_overflow 10) = up to 360 connections against max_connections = 300. Contributing: "
          "the staging load test ran with a fixed 3 replicas, so HPA scale-out was never exercised.",
          key="deploy_rootcause"),
        U("Reminder: for coding help, keep answers short and show Python code examples, not long explanations.",
          key="maya_pref_code2", near="maya_pref_code", category="preference"),
        U("How do I make SQLAlchemy play nicely behind PgBouncer in transaction mode?"),
        A("Let PgBouncer pool, not the app, and turn off server-side prepared statements in psycopg 3:\n"
          "```python\nfrom sqlalchemy import create_engine\nfrom sqlalchemy.pool import NullPool\n\n"
          "engine = create_engine(DATABASE_URL, poolclass=NullPool,\n"
          "                       connect_args={\"prepare_threshold\": None})\n```", key="pgbouncer_snippet",
          category="skill"),
        U("Plan: PgBouncer as a Deployment in front of RDS, pool_mode=transaction, default_pool_size=40, NullPool in "
          "the app. Retry the cutover next Tuesday, 29 September.", key="retry_plan", category="episode"),
        T("calendar",
          "Created event in maya@northwind.example: Tue 29 Sep 2026 08:00-12:00 \"orders-service cutover, attempt 2\". "
          "Removed: Tue 22 Sep 08:00-12:00 \"[tentative] orders-service cutover window\".",
          args={"action": "create", "calendar": "maya@northwind.example", "start": "2026-09-29T08:00:00+02:00",
                "end": "2026-09-29T12:00:00+02:00"},
          where="calendar:maya@northwind.example"),
        A("For the postmortem, include the HPA feedback loop and the load-test gap; Priya will want both as action items."),
    ]))

    # ---------------------------------------------------------------- s08
    S.append(Session("s08", "priya", "2026-09-24T13:30:00Z", "slack:#incidents",
                     "Priya writes the postmortem and swaps the on-call rotation", [
        U("Writing the postmortem for Tuesday's orders-service incident, using our blameless template.",
          where="https://wiki.northwind.example/postmortems/2026-09-22-orders-service"),
        A("Send me the timeline and I'll fill in the template."),
        U("Timeline in UTC: 06:00 write freeze; 06:19 traffic switched to EKS; 06:31 first \"remaining connection slots "
          "are reserved\" errors; 06:44 5xx peaks at 7%, decision to roll back; 06:57 compute back on the VMs, "
          "pointing at Postgres 15; 07:03 recovered.", key="pm_timeline", category="episode",
          where="https://wiki.northwind.example/postmortems/2026-09-22-orders-service"),
        A("Impact: 06:31-07:03 UTC, 32 minutes of elevated 5xx on orders-api, peak 7%. No data loss: the database "
          "stayed on Postgres 15 throughout, only the compute was rolled back.",
          where="https://wiki.northwind.example/postmortems/2026-09-22-orders-service"),
        U("Root cause: connection exhaustion. The HPA scaled orders-api to 12 pods, each with a SQLAlchemy pool of 20 "
          "plus 10 overflow, against max_connections = 300 on RDS.", key="pm_rootcause", category="episode",
          where="https://wiki.northwind.example/postmortems/2026-09-22-orders-service"),
        A("## Root cause\nEach orders-api pod holds its own pool (pool_size=20, max_overflow=10). Under load the HPA "
          "scaled to 12 pods, i.e. up to 360 connections, above RDS max_connections=300. New connections failed, "
          "latency rose, and the HPA scaled further.\n## Contributing factors\n- Staging load test used a fixed "
          "replica count\n- No alert on connection saturation",
          where="https://wiki.northwind.example/postmortems/2026-09-22-orders-service"),
        U("Action items: 1) PgBouncer in transaction mode in front of RDS, owner Maya, due 29 Sep; 2) load tests must "
          "exercise HPA scale-out, owner Luca, due 9 Oct; 3) alert when connections exceed 80% of max_connections, "
          "owner Priya, due 2 Oct.", key="pm_actions", category="episode"),
        A("| # | action | owner | due |\n|---|---|---|---|\n"
          "| 1 | PgBouncer (transaction mode) in front of RDS; NullPool in orders-api | Maya | 2026-09-29 |\n"
          "| 2 | Load test exercises HPA scale-out to max replicas | Luca | 2026-10-09 |\n"
          "| 3 | Alert: connections > 80% of max_connections | Priya | 2026-10-02 |",
          where="https://wiki.northwind.example/postmortems/2026-09-22-orders-service"),
        U("For item 3, what's the PromQL with postgres_exporter?"),
        T("web_search",
          "1. postgres_exporter README - metrics pg_stat_activity_count{datname,state} and "
          "pg_settings_max_connections - github.com/prometheus-community/postgres_exporter\n"
          "2. \"Alerting on PostgreSQL connection saturation\" - example: sum by (server) (pg_stat_activity_count) / "
          "on (server) pg_settings_max_connections > 0.8\n"
          "3. Awesome Prometheus alerts - PostgresqlTooManyConnections (threshold 80%)",
          args={"query": "postgres_exporter alert connections percent of max_connections promql"},
          where="https://github.com/prometheus-community/postgres_exporter"),
        A("```yaml\n- alert: OrdersPostgresConnectionsHigh\n"
          "  expr: sum by (server) (pg_stat_activity_count{server=~\"orders-pg15.*\"})\n"
          "        / on (server) pg_settings_max_connections > 0.8\n"
          "  for: 2m\n  labels: {severity: page, team: orders}\n"
          "  annotations:\n    runbook_url: https://git.northwind.example/platform/platform-runbooks/blob/main/"
          "orders/pg-connections.md\n```", key="pg_conn_alert", category="skill"),
        U("Maya asked to swap her primary on-call week: she's at a wedding in Lisbon 9-12 October. Swap Maya and "
          "Jonas: Maya takes 28 Sep - 4 Oct, Jonas takes 5 - 11 Oct.", key="oncall_swap", category="episode",
          where="slack:#oncall"),
        T("calendar",
          "Updated platform-oncall@northwind.example:\n"
          "- 28 Sep - 04 Oct: primary Maya Okafor, secondary Priya Raman\n"
          "- 05 Oct - 11 Oct: primary Jonas Weber, secondary Luca Bianchi\n"
          "2 events changed; notifications sent to maya@northwind.example, jonas@northwind.example",
          key="oncall_updated",
          args={"action": "update", "calendar": "platform-oncall@northwind.example", "swap": ["Maya Okafor", "Jonas Weber"]},
          where="calendar:platform-oncall@northwind.example"),
        A("Done. Note that Maya is now primary during her own second cutover attempt on 29 Sep; you might want "
          "someone to shadow her."),
        U("Good point, I'll ask Luca to shadow.", where="slack:#oncall"),
        U("For Friday's team lunch: remember I'm lactose intolerant, so no dairy for me.",
          key="priya_lactose2", near="priya_lactose", category="fact", where="slack:#team-platform"),
        A("Noted: a vegan pizza for you, no cheese."),
        U("Last thing: a Grafana panel for PgBouncer pools once it's live. Which exporter?"),
        T("web_search",
          "1. prometheus-community/pgbouncer_exporter - scrapes SHOW POOLS / SHOW STATS via the admin console; "
          "metrics pgbouncer_pools_client_waiting_connections, pgbouncer_pools_server_active_connections\n"
          "2. Grafana dashboard 14022 \"PgBouncer\" - pools, wait time, query rate\n"
          "3. PgBouncer docs: SHOW POOLS columns cl_active, cl_waiting, sv_active, sv_idle, maxwait",
          args={"query": "pgbouncer prometheus exporter grafana dashboard show pools"},
          where="https://github.com/prometheus-community/pgbouncer_exporter"),
        A("pgbouncer_exporter as a sidecar. The panel to watch is pgbouncer_pools_client_waiting_connections: it "
          "should stay at 0; anything above means the server pool is too small."),
        U("Publishing the postmortem now.", where="https://wiki.northwind.example/postmortems/2026-09-22-orders-service"),
    ]))

    # ---------------------------------------------------------------- s09
    S.append(Session("s09", "maya", "2026-09-29T05:50:00Z", "slack:#orders-migration",
                     "Second cutover succeeds; Maya moves to Neovim", [
        U("Attempt 2 of the orders-service cutover today. PgBouncer is deployed, the app uses NullPool, HPA max is 8.",
          category="episode"),
        T("shell",
          "$ kubectl -n orders get pods -l app=pgbouncer\n"
          "NAME                        READY   STATUS    RESTARTS   AGE\n"
          "pgbouncer-6b7f9d8c5-4lq2s   1/1     Running   0          2d\n"
          "pgbouncer-6b7f9d8c5-wz8rk   1/1     Running   0          2d",
          key="pgb_pods", args={"cmd": "kubectl -n orders get pods -l app=pgbouncer",
                                "cwd": "/home/maya/work/orders-service"},
          meta={"exit_code": 0}, where="/home/maya/work/orders-service"),
        T("shell",
          "$ cat deploy/pgbouncer/pgbouncer.ini\n"
          "[databases]\norders = host=orders-pg15.internal port=5432 dbname=orders\n\n"
          "[pgbouncer]\nlisten_port = 6432\npool_mode = transaction\ndefault_pool_size = 40\n"
          "max_client_conn = 2000\nserver_reset_query =\nauth_type = scram-sha-256",
          key="pgb_ini", args={"cmd": "cat deploy/pgbouncer/pgbouncer.ini", "cwd": "/home/maya/work/orders-service"},
          meta={"exit_code": 0}, where="/home/maya/work/orders-service/deploy/pgbouncer/pgbouncer.ini"),
        A("Config looks right for transaction pooling. With 2 PgBouncer pods x 40 that's at most 80 server "
          "connections, well under 300."),
        U("Write freeze at 08:00, lag 0, sequences synced. Switching now.", at="06:10:30", category="episode"),
        T("shell",
          "$ python scripts/sync_sequences.py --target \"$ORDERS_PG15_URL\"\n"
          "synced 31 sequences (orders_id_seq -> 48390215, order_items_id_seq -> 152488761, "
          "shipments_id_seq -> 21040522, ...)",
          args={"cmd": "python scripts/sync_sequences.py --target \"$ORDERS_PG15_URL\"",
                "cwd": "/home/maya/work/orders-service"},
          meta={"exit_code": 0}, where="/home/maya/work/orders-service/scripts/sync_sequences.py"),
        U("Load is picking up; the HPA is at 8 pods now. Did the pgbouncer pods restart?", at="06:41:00"),
        T("shell", None, exact="pgb_pods", args={"cmd": "kubectl -n orders get pods -l app=pgbouncer",
                                                  "cwd": "/home/maya/work/orders-service"},
          meta={"exit_code": 0}, where="/home/maya/work/orders-service"),
        A("No restarts, same two pods. Let's look at the pools."),
        T("shell",
          "$ psql \"$PGBOUNCER_ADMIN_URL\" -c 'show pools;'\n"
          " database |    user    | cl_active | cl_waiting | sv_active | sv_idle | sv_used | maxwait\n"
          "----------+------------+-----------+------------+-----------+---------+---------+---------\n"
          " orders   | orders_app |       212 |          0 |        31 |       9 |       0 |       0\n(1 row)",
          key="pgb_pools", args={"cmd": "psql \"$PGBOUNCER_ADMIN_URL\" -c 'show pools;'",
                                 "cwd": "/home/maya/work/orders-service"},
          meta={"exit_code": 0}, where="/home/maya/work/orders-service"),
        A("212 client connections multiplexed onto 40 server connections and nobody waiting. That's the shape you want."),
        U("5xx at 0.02%, p95 118 ms. Declaring success at 09:30. The VMs stay up read-only for a week and get "
          "decommissioned on 6 October.", at="07:30:20", key="cutover_success", category="episode"),
        A("Congratulations! Drop the subscription on 15 and the slot on 12 once you're sure; an abandoned logical "
          "slot makes 12 retain WAL until the disk fills."),
        T("shell",
          "$ psql \"$ORDERS_PG15_URL\" -c 'ALTER SUBSCRIPTION orders_sub DISABLE;' "
          "-c 'ALTER SUBSCRIPTION orders_sub SET (slot_name = NONE);' -c 'DROP SUBSCRIPTION orders_sub;'\n"
          "ALTER SUBSCRIPTION\nALTER SUBSCRIPTION\nDROP SUBSCRIPTION\n"
          "$ psql \"$ORDERS_PG12_URL\" -c \"select pg_drop_replication_slot('orders_sub');\"\n"
          " pg_drop_replication_slot\n--------------------------\n \n(1 row)",
          args={"cmd": "psql ... DROP SUBSCRIPTION orders_sub; pg_drop_replication_slot('orders_sub')",
                "cwd": "/home/maya/work/orders-service"},
          meta={"exit_code": 0}, where="/home/maya/work/orders-service", gap=900),
        U("Unrelated, for my profile: I've switched from VS Code to Neovim. Spent the weekend on my config.",
          key="maya_nvim", supersedes="maya_vscode", category="preference", where="chat:web/maya", gap=5400),
        U("I'm using lazy.nvim as the plugin manager. Help me set up pyright and ruff as language servers.",
          where="/home/maya/.config/nvim/init.lua"),
        A("```lua\n-- ~/.config/nvim/lua/plugins/lsp.lua\nreturn {\n  \"neovim/nvim-lspconfig\",\n"
          "  config = function()\n    local lsp = require(\"lspconfig\")\n    lsp.pyright.setup({})\n"
          "    lsp.ruff.setup({})\n  end,\n}\n```\nRun :Lazy sync, then :checkhealth vim.lsp.",
          where="/home/maya/.config/nvim/lua/plugins/lsp.lua", category="skill"),
        T("shell",
          "$ nvim --headless '+checkhealth vim.lsp' +qa && sed -n '/Active Clients/,/^$/p' /tmp/health.txt\n"
          "- Active Clients:\n  - pyright (id: 1)\n  - ruff (id: 2)\n"
          "$ nvim --version | head -1\nNVIM v0.11.3",
          args={"cmd": "nvim --headless '+checkhealth vim.lsp' +qa", "cwd": "/home/maya"},
          meta={"exit_code": 0}, where="/home/maya/.config/nvim"),
        U("For context: I'm a backend engineer at Northwind Logistics, mostly Python and Go.", key="maya_job2", near="maya_job", category="fact", where="chat:web/maya"),
        A("Then add gopls: `lsp.gopls.setup({ settings = { gopls = { gofumpt = true, staticcheck = true } } })`.",
          where="/home/maya/.config/nvim/lua/plugins/lsp.lua", category="skill"),
        U("What I miss most from VS Code is Ctrl+P to open files.", where="chat:web/maya"),
        A("telescope.nvim does that:\n```lua\nvim.keymap.set(\"n\", \"<C-p>\", require(\"telescope.builtin\").find_files,"
          " { desc = \"find files\" })\n```", where="/home/maya/.config/nvim/init.lua", category="skill"),
        U("Note for later: write up the PgBouncer setup in docs/migration/pgbouncer.md for the team.",
          where="/home/maya/work/orders-service/docs/migration/pgbouncer.md", category="episode"),
        A("Outline: why (the 22 Sep incident), topology (2 PgBouncer pods, transaction mode, pool 40), app settings "
          "(NullPool, prepare_threshold=None), dashboards and the 80% connection alert, how to resize pools.",
          where="/home/maya/work/orders-service/docs/migration/pgbouncer.md"),
    ]))

    # ---------------------------------------------------------------- s10
    S.append(Session("s10", "tom", "2026-10-02T19:15:00Z", "chat:mobile/tom",
                     "Tom's flights change; Kyoto hostel; birthday plans", [
        U("bad news, KLM changed our flight"),
        U("new dates: we fly out of Edinburgh on Sunday 18 October and come back Thursday 29 October. still Tokyo "
          "then Kyoto", key="tom_trip2", supersedes="tom_trip1", category="episode"),
        A("Updated: Japan 18-29 October. The JR pass plan shifts by a day: activate it on 23 Oct for Tokyo -> Kyoto, "
          "valid through 29 Oct."),
        T("calendar",
          "Updated 2 events in tom.becker@students.ed.example:\n"
          "- Sun 18 Oct 2026 11:40 KL1282 EDI -> AMS, connecting KL861 AMS -> HND (arrives Mon 19 Oct 09:05 JST)\n"
          "- Thu 29 Oct 2026 10:30 JST KL862 HND -> AMS, connecting KL1289 AMS -> EDI (arrives 19:55 GMT)",
          key="tom_cal", args={"action": "update", "calendar": "tom.becker@students.ed.example", "count": 2},
          where="calendar:tom.becker@students.ed.example"),
        U("hostels in Kyoto near the station, 23 to 27 Oct, 2 people, under 6000 yen per person per night"),
        T("web_search", kyoto_hostel_search(rng),
          args={"query": "hostel near Kyoto Station 23-27 October 2026 2 guests under 6000 yen"},
          where="https://hostels.example/kyoto?near=kyoto-station&in=2026-10-23&out=2026-10-27"),
        A("Kamogawa Hostel: private twin, shared kitchen, ¥5,200 each, 9 minutes from the station. "
          "Most others are dorms or have no kitchen."),
        U("reminder that I'm vegetarian, so no meat", key="tom_veg2", near="tom_veg", category="fact"),
        A("Then the kitchen helps. Eating out: try shojin ryori (Buddhist temple food) in Kyoto, and ask for "
          "\"dashi nashi\", since many broths use fish stock."),
        U("booked Kamogawa Hostel, 4 nights 23-27 Oct, ¥5200 each per night, private twin",
          key="tom_hostel", category="fact"),
        U("Tokyo is sorted: staying with my friend Kenji in Shimokitazawa 19-23 Oct and again 27-29 before the flight",
          key="tom_kenji", category="fact"),
        A("So every night is covered: Tokyo with Kenji 19-23 Oct, Kyoto 23-27 Oct, Tokyo again 27-29 Oct."),
        U("btw, reminder: my birthday is the 14th of October", key="tom_bday2", near="tom_bday", category="fact"),
        U("that's a few days before we fly. any ideas for something fun in Edinburgh that evening?"),
        A("Short list: sunset on Arthur's Seat (about 18:20 that day), a ceilidh at the Stramash or Summerhall, "
          "or a vegetarian tasting menu at David Bann."),
        U("what's the weather in Tokyo looking like for when we land"),
        T("weather",
          "Tokyo, JP - outlook 19-23 Oct 2026: highs 19-22°C, lows 13-15°C, 40% chance of rain on Wed 21 Oct. "
          "Beyond 10 days this is climatology, not a forecast.",
          args={"location": "Tokyo, JP", "kind": "outlook", "from": "2026-10-19", "to": "2026-10-23"},
          where="https://weather.example/api/outlook?city=Tokyo"),
        A("Around 20°C, one likely wet day (Wednesday). Same packing as for Kyoto."),
        U("decision stands: Hiroshima day trip from Kyoto, so the 7-day JR pass it is",
          key="tom_jrpass2", near="tom_jrpass", category="episode"),
        A("Good. Buy it online before you go; activate it at a JR ticket office on 23 Oct."),
        U("raft update: log replication passes all tests except one about conflicting entries",
          where="/home/tom/uni/dsys/raft/src/replication.rs"),
        A("The classic one: when AppendEntries finds an entry with the same index but a different term, delete it "
          "and everything after it, then append. Don't truncate when entries match; that breaks with reordered RPCs.",
          where="/home/tom/uni/dsys/raft/src/replication.rs", category="skill"),
        T("shell",
          "$ cargo test replication\n"
          "    Finished `test` profile [unoptimized + debuginfo] target(s) in 4.03s\n"
          "     Running unittests src/lib.rs (target/debug/deps/raft-3c1f0d9a2b7e5d14)\n"
          "running 9 tests\n"
          "test replication::tests::conflicting_entries_truncated ... ok\n"
          "test replication::tests::reordered_append_entries ... ok\n"
          "test replication::tests::commit_index_advances_on_majority ... ok\n"
          "...\n"
          "test result: ok. 9 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.54s",
          args={"cmd": "cargo test replication", "cwd": "/home/tom/uni/dsys/raft"},
          meta={"exit_code": 0}, where="/home/tom/uni/dsys/raft", gap=1200),
        U("fixed!! truncating from the conflict point was it"),
    ]))

    # ---------------------------------------------------------------- s11
    S.append(Session("s11", "maya", "2026-10-07T16:40:00Z", "chat:web/maya",
                     "Maya prepares for Lisbon; orders-service clean-up", [
        U("Flying to Lisbon on Friday. Can you check the forecast?"),
        T("weather",
          "Lisbon, PT - forecast: Fri 09 Oct 24°C/16°C sunny; Sat 10 Oct 23°C/15°C partly cloudy, wind NW "
          "15 km/h; Sun 11 Oct 21°C/15°C showers likely (70%); Mon 12 Oct 22°C/14°C sunny.",
          key="lisbon_forecast", args={"location": "Lisbon, PT", "kind": "forecast", "from": "2026-10-09", "to": "2026-10-12"},
          where="https://weather.example/api/forecast?city=Lisbon"),
        A("The wedding day looks dry at 23°C. Bring a layer for the evening and an umbrella for Sunday."),
        U("Show me the trip in my calendar again?"),
        T("calendar", None, exact="lisbon_cal",
          args={"action": "list", "calendar": "maya@northwind.example", "from": "2026-10-09", "to": "2026-10-12"},
          where="calendar:maya@northwind.example"),
        A("All there. You land at 09:05 Lisbon time; check-in at Casa do Largo is from 14:00, so drop your bag "
          "there first and have a late breakfast nearby."),
        U("Inês wants restaurant ideas for a dinner on Sunday near where I'm staying, 6 people."),
        U("Please keep in mind I can't eat peanuts, it's a severe allergy.",
          key="maya_peanut3", near="maya_peanut", category="fact"),
        T("web_search", alfama_restaurant_search(rng),
          args={"query": "restaurants Alfama Lisbon group dinner 6 people Sunday"},
          where="https://maps.example/search?q=restaurants+Alfama+Lisbon"),
        A("Near Casa do Largo: Tasca do Chafariz is 3 minutes away and has fado on Sundays; Taberna Alfacinha is a "
          "good plan B. Skip Cantinho Maputo: its signature dish is caril de amendoim, a peanut curry, and cross-"
          "contact is likely. Casa dos Pastéis also sells nut tarts.", key="restaurant_advice"),
        U("Let's do Tasca do Chafariz. Booked for 20:00 on Sunday under Okafor.", key="maya_dinner", category="episode"),
        U("Since I live in Berlin, keep scheduling in Berlin time, even while I'm in Lisbon.", key="maya_city2", near="maya_city", category="fact"),
        A("Will do. Lisbon is one hour behind Berlin (WEST vs CEST), so a 09:00 Berlin reminder arrives at 08:00 "
          "in Lisbon."),
        U("Work handover before I leave: the old orders-service VMs were decommissioned yesterday as planned, "
          "and Jonas is primary on-call this week.", category="episode"),
        T("shell",
          "$ aws ec2 describe-instances --filters Name=tag:service,Values=orders-service "
          "--query 'Reservations[].Instances[].[InstanceId,State.Name]' --output text\n"
          "i-0a3f5c9e12b7d4e81\tterminated\ni-0c81d2f7a9e4b3c60\tterminated",
          args={"cmd": "aws ec2 describe-instances --filters Name=tag:service,Values=orders-service ...",
                "cwd": "/home/maya/work/orders-service"},
          meta={"exit_code": 0}, where="/home/maya/work/orders-service"),
        A("Both instances are terminated. Thanks to the swap you're off on-call for the whole trip."),
        U("And the Postgres 12 instance: final snapshot taken, deletion scheduled for 14 October. That ends the "
          "Extended Support charges.", key="pg12_deletion", category="episode"),
        T("shell",
          "$ aws rds describe-db-snapshots --db-instance-identifier orders-pg12 --snapshot-type manual "
          "--query 'DBSnapshots[].[DBSnapshotIdentifier,Status,AllocatedStorage]' --output text\n"
          "orders-pg12-final-2026-10-07\tavailable\t500",
          args={"cmd": "aws rds describe-db-snapshots --db-instance-identifier orders-pg12 --snapshot-type manual",
                "cwd": "/home/maya/work/orders-service"},
          meta={"exit_code": 0}, where="/home/maya/work/orders-service"),
        A("Snapshot is available. After the 14th, the only orders-service database is the Postgres 15 instance "
          "behind PgBouncer."),
        U("Packing list for a 'garden formal' wedding plus three days of walking. Short please."),
        A("- Dress or suit in a light fabric, plus a wrap or light jacket\n- Block heels or smart flats (Alfama is "
          "steep cobblestone)\n- Comfortable walking shoes\n- Umbrella for Sunday\n- Sunglasses, sunscreen\n"
          "- Antihistamines and your epinephrine auto-injector", key="packing_list"),
        U("Good call on the auto-injector. I'll also bring Inês a Berlin gift; something that survives a flight?"),
        A("A print from a Kreuzberg risograph studio, a bottle of Berliner Brandstifter gin (checked bag), or a "
          "Berlin porcelain piece from KPM if you want something lasting."),
        U("The print it is. Talk after the wedding!"),
    ]))

    # ---------------------------------------------------------------- s12
    # no "where" on this session's chat turns: exercises the optional field
    S.append(Session("s12", "tom", "2026-10-13T20:30:00Z", OMIT,
                     "Tom submits his project and does final prep for Japan", [
        U("submitted the raft project early!! all 41 tests pass", key="raft_submitted", category="episode"),
        A("Congrats, three days before the deadline!"),
        U("birthday tomorrow, we're doing the ceilidh idea with friends", category="episode"),
        A("Have a great one. Wear shoes you can dance in."),
        U("packing question: do I need a plug adapter for Japan"),
        A("Yes: Type A (two flat pins), 100 V. Phone and laptop chargers handle 100 V; hair straighteners often don't."),
        U("how much cash do people need in Japan these days"),
        T("web_search",
          "1. JNTO travel tips: \"Japan is increasingly cashless, but small restaurants, temples, shrines and rural "
          "buses often accept cash only.\" - https://www.japan.travel/en/plan/cash/\n"
          "2. r/JapanTravel 2026 megathread: most people report ¥5,000-10,000 in cash per day, more for temple entry "
          "fees and markets\n"
          "3. 7-Eleven and Japan Post ATMs accept foreign cards; fees vary by card",
          args={"query": "how much cash do you need in Japan 2026 travel"},
          where="https://www.japan.travel/en/plan/cash/"),
        A("About ¥5,000-10,000 a day each, mainly for temples, small restaurants and markets. Withdraw at 7-Eleven "
          "ATMs; load Suica on your phone for trains."),
        U("what's the forecast for Kyoto next week"),
        T("weather",
          "Kyoto, JP - forecast 23-27 Oct 2026: Fri 23 20°C/12°C cloudy; Sat 24 22°C/13°C sunny; Sun 25 21°C/12°C "
          "sunny; Mon 26 18°C/12°C rain (80%); Tue 27 19°C/11°C partly cloudy.",
          key="kyoto_forecast", args={"location": "Kyoto, JP", "kind": "forecast", "from": "2026-10-23", "to": "2026-10-27"},
          where="https://weather.example/api/forecast?city=Kyoto"),
        A("Mostly dry; Monday 26th looks wet, so that's a good day for Hiroshima on the train and the museum."),
        U("how do we get from Haneda to Shimokitazawa"),
        A("Keikyu line to Shinagawa, JR Yamanote to Shibuya, then the Keio Inokashira line to Shimo-Kitazawa. About "
          "an hour, roughly ¥700, all on Suica."),
        U("Lena wants to see sumo practice in Tokyo, is that possible in October"),
        T("web_search",
          "1. Arashio-beya morning practice (asa-geiko) viewing: usually 07:30-10:00 outside tournament months, "
          "watch through the street window; rules on the stable's site - https://arashio.example/keiko\n"
          "2. 2026 grand sumo schedule: Kyushu Basho (Fukuoka) 8-22 November; stables in Tokyo practise normally "
          "in late October\n"
          "3. Guided sumo morning practice tours in Ryogoku, ¥10,000-15,000 per person",
          args={"query": "watch sumo morning practice Tokyo October 2026"},
          where="https://arashio.example/keiko"),
        A("Yes: late October is between tournaments, so stables in Tokyo train normally. Free option: Arashio-beya "
          "in Nihonbashi, watched through the window from around 07:30. Check their notice the day before."),
        U("ok I think we're set. I'll check in again from Japan"),
        A("Enjoy the trip, Tom, and say hi to Lena and Kenji."),
    ]))

    return S


# --------------------------------------------------------------------------
# The demo queries (keys are resolved to event ids)
# --------------------------------------------------------------------------

QUERIES = [
    {"query": "what is maya allergic to", "user_id": "maya", "context_type": "query",
     "note": "Peanuts (a severe allergy). Stated three times (s01, restated s05 and s11); a good answer "
             "returns one of them, ideally the merged memory, not three copies.",
     "expect": ["maya_peanut", "maya_peanut2", "maya_peanut3"]},
    {"query": "which editor does maya use now", "user_id": "maya", "context_type": "query",
     "note": "Neovim (switched from VS Code, s09; lazy.nvim, pyright/ruff/gopls). The newer preference "
             "should outrank the older 'VS Code with Vim keybindings' memory from s01.",
     "expect": ["maya_nvim"], "superseded": ["maya_vscode"]},
    {"query": "what went wrong with the deploy last week", "user_id": "maya", "actor": "tool:shell",
     "location": "slack:#orders-migration", "context_type": "conversation", "as_of": "2026-09-29T12:00:00Z",
     "note": "Asked around 29 Sep 2026. The 22 Sep orders-service cutover failed on Postgres connection exhaustion: "
             "HPA scaled orders-api to 12 pods x (pool 20 + overflow 10) = 360 connections > max_connections 300 "
             "('remaining connection slots are reserved...'); compute rolled back to the VMs at ~09:00 CEST, "
             "about 30 minutes of errors peaking at 7%. Fix: PgBouncer + NullPool, retried 29 Sep.",
     "expect": ["maya_err1", "hpa_output", "maxconn_output", "deploy_analysis", "deploy_rootcause",
                "deploy_impact", "rollback_decision"]},
    {"query": "where is tom travelling and when", "user_id": "tom", "context_type": "query",
     "note": "Japan with his sister Lena: Tokyo then Kyoto, now 18-29 October 2026 (moved from 17-28 Oct after "
             "KLM changed the flight); Kyoto 23-27 Oct at Kamogawa Hostel, Tokyo with Kenji in Shimokitazawa.",
     "expect": ["tom_trip2", "tom_cal", "tom_hostel", "tom_kenji"], "superseded": ["tom_trip1"]},
    {"query": "suggest a restaurant near maya's hotel in Lisbon that is safe for her", "user_id": "maya",
     "location": "Lisbon", "context_type": "task",
     "note": "Multi-hop: hotel Casa do Largo on Largo do Chafariz de Dentro, Alfama (s05) + peanut allergy (s01) -> "
             "Tasca do Chafariz (booked Sunday 20:00), avoid Cantinho Maputo (peanut curry).",
     "expect": ["maya_hotel", "maya_peanut", "restaurant_advice", "maya_dinner"]},
    {"query": "is tom's Raft project due before his flight to Japan", "user_id": "tom", "context_type": "query",
     "note": "Multi-hop: Raft in Rust due Fri 16 Oct (s02) vs flight Sun 18 Oct (s10, moved from 17 Oct); "
             "he submitted early on 13 Oct with 41 tests passing.",
     "expect": ["raft_deadline", "tom_trip2", "raft_submitted"]},
    {"query": "who is on call while maya is at the wedding in Lisbon", "context_type": "mixed",
     "note": "Cross-user multi-hop: Maya is in Lisbon 9-12 Oct (s05); the draft had her primary 5-11 Oct (s04); "
             "Priya swapped her with Jonas (s08), so Jonas Weber is primary 5-11 Oct with Luca Bianchi secondary.",
     "expect": ["maya_flights", "maya_oncall_conflict", "oncall_swap", "oncall_updated", "oncall_draft"]},
    {"query": "pgbouncer pool settings and status for orders-service", "actor": "tool:shell",
     "location": "/home/maya/work/orders-service", "user_id": "maya", "context_type": "document",
     "note": "pool_mode=transaction, default_pool_size=40, 2 PgBouncer pods; SHOW POOLS during the 29 Sep cutover: "
             "212 clients on 40 server connections, cl_waiting 0; app uses NullPool with prepare_threshold=None.",
     "expect": ["pgb_ini", "pgb_pools", "retry_plan", "pgbouncer_snippet"]},
    {"query": "cannot borrow self.entries as mutable because it is also borrowed as immutable",
     "location": "/home/tom/uni/dsys/raft/src/log.rs", "user_id": "tom", "context_type": "document",
     "note": "Tom's E0502 in src/log.rs and the fix: copy last.term/last.index out before push.",
     "expect": ["tom_e0502", "tom_e0502_fix"]},
    {"query": "dietary restrictions to consider when ordering food for the team", "context_type": "task",
     "note": "Mixed, across users: Priya is lactose intolerant (no dairy), Maya has a peanut allergy; Tom is "
             "vegetarian (not on the Northwind team).",
     "expect": ["priya_lactose", "priya_lactose2", "maya_peanut", "tom_veg"]},
]


# --------------------------------------------------------------------------
# Assembly
# --------------------------------------------------------------------------

def _fmt(ts: datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%SZ")


def build():
    rng = random.Random(SEED)
    sessions = build_sessions(rng)
    events, ids, contents = [], {}, {}
    for s in sessions:
        ts = datetime.strptime(s.start, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
        first = True
        for n, t in enumerate(s.turns, 1):
            if t.actor == "user":
                delay = rng.randint(20, 140)
            elif t.actor == "assistant":
                delay = rng.randint(4, 28)
            else:
                delay = rng.randint(1, 7)
            if first:
                delay, first = 0, False
            ts = ts + timedelta(seconds=delay + (t.gap or 0))
            if t.at:
                pinned = datetime.strptime(s.start[:10] + "T" + t.at + "Z", "%Y-%m-%dT%H:%M:%SZ").replace(
                    tzinfo=timezone.utc)
                if pinned <= ts:
                    raise SystemExit(f"{s.sid} turn {n}: pinned time {t.at} is not after {_fmt(ts)}")
                ts = pinned
            eid = f"demo-{s.sid}-t{n:03d}"
            content = t.content
            meta = dict(t.meta)
            if t.exact:
                content = contents[t.exact]
                meta["exact_duplicate_of"] = ids[t.exact]
            if t.near:
                meta["near_duplicate_of"] = ids[t.near]
            if t.supersedes:
                meta["supersedes"] = ids[t.supersedes]
            if t.actor.startswith("tool:"):
                meta["latency_ms"] = rng.randint(80, 2400)
            ev = {
                "event_id": eid,
                "ts": _fmt(ts),
                "session_id": s.sid,
                "user_id": s.user,
                "agent_id": AGENT_ID,
                "actor": t.actor,
                "content": content,
            }
            where = s.where if t.where is None else t.where
            if where is not OMIT:
                ev["where"] = where
            if t.category:
                ev["category"] = t.category
            if meta:
                ev["metadata"] = meta
            if t.key:
                if t.key in ids:
                    raise SystemExit(f"duplicate key {t.key}")
                ids[t.key] = eid
                contents[t.key] = content
            events.append(ev)
    queries = []
    for q in QUERIES:
        out = {"query": q["query"]}
        for k in ("actor", "location", "user_id", "as_of"):
            if k in q:
                out[k] = q[k]
        out["context_type"] = q["context_type"]
        out["note"] = q["note"]
        out["expect_event_ids"] = [ids[k] for k in q["expect"]]
        if "superseded" in q:
            out["superseded_event_ids"] = [ids[k] for k in q["superseded"]]
        queries.append(out)
    return sessions, events, queries


CATEGORIES = {"fact", "preference", "skill", "episode", "context"}
DUP_KEYS = ("near_duplicate_of", "exact_duplicate_of", "supersedes")


def validate(lines: list[str], queries: list[dict]) -> list[str]:
    """Check the rendered JSONL the way ``pgmem ingest`` will read it; return a list of problems."""
    problems = []
    seen = {}  # event_id -> event
    last_ts = {}  # session_id -> ts
    content_owner = {}  # content -> first event_id
    for n, line in enumerate(lines, 1):
        try:
            ev = json.loads(line)
        except ValueError as exc:
            problems.append(f"line {n}: not JSON ({exc})")
            continue
        if not isinstance(ev, dict):
            problems.append(f"line {n}: not an object")
            continue
        eid = ev.get("event_id")
        for req in ("event_id", "ts", "content"):
            if not isinstance(ev.get(req), str) or not ev[req].strip():
                problems.append(f"line {n}: missing or empty {req}")
        if eid in seen:
            problems.append(f"line {n}: duplicate event_id {eid}")
        try:
            ts = datetime.strptime(ev["ts"], "%Y-%m-%dT%H:%M:%SZ")
        except (KeyError, ValueError):
            problems.append(f"{eid}: ts is not ISO 8601 UTC (YYYY-MM-DDTHH:MM:SSZ)")
            continue
        sid = ev.get("session_id")
        if sid in last_ts and ts <= last_ts[sid]:
            problems.append(f"{eid}: ts not increasing within session {sid}")
        last_ts[sid] = ts
        actor = ev.get("actor", "user")
        if actor not in ("user", "assistant") and not (actor.startswith("tool:") and len(actor) > 5):
            problems.append(f"{eid}: bad actor {actor!r}")
        if "category" in ev and ev["category"] not in CATEGORIES:
            problems.append(f"{eid}: bad category {ev['category']!r}")
        meta = ev.get("metadata", {})
        if not isinstance(meta, dict):
            problems.append(f"{eid}: metadata is not an object")
            meta = {}
        for k in DUP_KEYS:
            ref = meta.get(k)
            if ref is None:
                continue
            if ref not in seen:
                problems.append(f"{eid}: {k} -> {ref} is not an earlier event")
                continue
            if datetime.strptime(seen[ref]["ts"], "%Y-%m-%dT%H:%M:%SZ") >= ts:
                problems.append(f"{eid}: {k} -> {ref} is not earlier in time")
            if seen[ref].get("user_id") != ev.get("user_id"):
                problems.append(f"{eid}: {k} -> {ref} belongs to another user")
            same = seen[ref]["content"] == ev["content"]
            if k == "exact_duplicate_of" and not same:
                problems.append(f"{eid}: exact duplicate of {ref} but content differs")
            if k != "exact_duplicate_of" and same:
                problems.append(f"{eid}: {k} {ref} but content is identical")
        c = ev.get("content")
        if c in content_owner and meta.get("exact_duplicate_of") != content_owner[c]:
            problems.append(f"{eid}: unmarked exact duplicate of {content_owner[c]}")
        content_owner.setdefault(c, eid)
        seen[eid] = ev
    for q in queries:
        for key in ("expect_event_ids", "superseded_event_ids"):
            for ref in q.get(key, []):
                if ref not in seen:
                    problems.append(f"query {q['query']!r}: unknown event {ref}")
        if q.get("context_type") not in ("query", "task", "conversation", "document", "mixed"):
            problems.append(f"query {q['query']!r}: bad context_type")
    return problems


def render(events, queries) -> tuple[str, str]:
    jsonl = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events)
    qjson = json.dumps(queries, ensure_ascii=False, indent=2) + "\n"
    return jsonl, qjson


def stats(sessions, events) -> str:
    by_sid = Counter(e["session_id"] for e in events)
    first = {}
    last = {}
    for e in events:
        first.setdefault(e["session_id"], e["ts"])
        last[e["session_id"]] = e["ts"]
    lines = ["| session | user | date (UTC) | events | topic |", "|---|---|---|---|---|"]
    for s in sessions:
        lines.append(f"| {s.sid} | {s.user} | {first[s.sid][:16].replace('T', ' ')} - {last[s.sid][11:16]} "
                     f"| {by_sid[s.sid]} | {s.title} |")
    lines.append("")
    lines.append(f"total events: {len(events)}")
    lines.append("per user: " + ", ".join(f"{k} {v}" for k, v in sorted(Counter(e['user_id'] for e in events).items())))
    lines.append("per actor: " + ", ".join(f"{k} {v}" for k, v in sorted(Counter(e['actor'] for e in events).items())))
    lines.append("per category: " + ", ".join(
        f"{k} {v}" for k, v in sorted(Counter(e.get('category', '(none)') for e in events).items())))
    lines.append(f"distinct where: {len({e['where'] for e in events if 'where' in e})}")
    byid = {e["event_id"]: e for e in events}
    for kind in ("near_duplicate_of", "exact_duplicate_of", "supersedes"):
        lines.append(f"\n{kind}:")
        for e in events:
            ref = e.get("metadata", {}).get(kind)
            if ref:
                lines.append(f"- {e['event_id']} -> {ref}: {byid[ref]['content'][:70]!r} / {e['content'][:70]!r}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the files on disk are invalid or differ from a fresh run")
    ap.add_argument("--stats", action="store_true", help="print counts and the duplicate pairs")
    args = ap.parse_args(argv)
    sessions, events, queries = build()
    jsonl, qjson = render(events, queries)
    problems = validate(jsonl.splitlines(), queries)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2
    if args.stats:
        print(stats(sessions, events))
        return 0
    if args.check:
        ok = True
        if EVENTS_FILE.exists() and QUERIES_FILE.exists():
            on_disk = validate(EVENTS_FILE.read_text(encoding="utf-8").splitlines(),
                               json.loads(QUERIES_FILE.read_text(encoding="utf-8")))
            for p in on_disk:
                print(f"{EVENTS_FILE.name}: {p}", file=sys.stderr)
            ok = not on_disk
        for path, text in ((EVENTS_FILE, jsonl), (QUERIES_FILE, qjson)):
            if not path.exists() or path.read_bytes() != text.encode("utf-8"):
                print(f"stale: {path}", file=sys.stderr)
                ok = False
        return 0 if ok else 1
    EVENTS_FILE.write_bytes(jsonl.encode("utf-8"))
    QUERIES_FILE.write_bytes(qjson.encode("utf-8"))
    print(f"wrote {len(events)} events to {EVENTS_FILE.name} and {len(queries)} queries to {QUERIES_FILE.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
