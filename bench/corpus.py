"""Synthetic agent memories for the benchmark: a pool of real sentences with real MiniLM
embeddings (computed once, cached under bench/.cache/), and N memories derived from it.

Why a pool: embedding a million texts with MiniLM on 2 cores takes hours (about 60-100
sentences/s here), so only POOL_SIZE template sentences, the context suffixes and the
queries go through the model. Each memory is then *derived*:

    text   = [prefix[p] + " "] pool[i] [+ " " + pool[j] [+ " " + pool[l]]] [+ " " + suffix[s]]
    vector = normalize( normalize(sum_k len_k/len_total * pool_vec[k] + 0.3 * suffix_vec[s] + 0.2 * prefix_vec[p])
                        + eps * g/|g| ),   g ~ N(0, I), eps ~ U(0.35, 0.65)

    (1, 2 or 3 sentences with probabilities .6/.3/.1; the second and third from the same
    person half of the time; a prefix such as "Reminder:" and a suffix such as "after the
    standup" with probability .8 each: 20,000 x 24 x 72 single-sentence variants, so exact
    duplicate texts stay rare even at N = 1M)

so the text and the vector are built from the same sentences (lexical and semantic signals
agree), a multi-sentence memory sits between its sentences the way a mean-pooled MiniLM
embedding of the concatenation does, and the noise (cosine 0.86-0.96 to the noiseless mix)
stands for everything the mix does not capture (cosine 0.84-0.94 to it). Two memories derived
from the same sentence have cosine about 0.7-0.9, so near-duplicates exist (as in a real agent's
memory) and merge_duplicates has real work. Queries are *different* sentences (questions
built from related templates over the same people, places, projects, ...) embedded with
the real model, so query-to-memory similarities are MiniLM's own (typically 0.4-0.7).

Everything is deterministic: rows come in blocks of BLOCK rows, block b drawn from
numpy.random.default_rng([seed, b]), so any chunk can be regenerated on its own.
"""
from __future__ import annotations

import hashlib
import json
import math
import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

CORPUS_VERSION = 2
POOL_SIZE = 20000
N_QUERIES = 250
BLOCK = 10000
CACHE = Path(__file__).resolve().parent / ".cache"
MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
CATEGORY_WEIGHT = {"fact": 0.8, "preference": 0.9, "skill": 0.7, "episode": 0.6, "context": 0.5}

PEOPLE = ["Maya", "Tom", "Priya", "Lukas", "Aisha", "Kenji", "Sofia", "Omar", "Elena", "Ben", "Chloe",
          "Diego", "Fatima", "Hiro", "Ines", "Jonas", "Kara", "Liam", "Mei", "Nadia", "Oscar", "Paula",
          "Quentin", "Rosa", "Sam", "Tariq", "Uma", "Victor", "Wen", "Yara", "Zoe", "Anton", "Bianca",
          "Carlos", "Dana", "Emil", "Farah", "Gustav", "Hana", "Ivan", "Julia", "Kofi", "Lena", "Marco",
          "Nora", "Olga", "Pedro", "Rina", "Sven", "Tess", "Ugo", "Vera", "Will", "Xenia", "Yusuf",
          "Zara", "Alex", "Noah", "Ella", "Raj"]
RELATIONS = ["sister", "brother", "manager", "dentist", "landlord", "cousin", "partner", "mentor",
             "neighbour", "daughter", "son", "accountant", "doctor", "best friend"]
FOODS = ["sushi", "ramen", "olives", "cilantro", "dark chocolate", "oat milk", "espresso", "green tea",
         "spicy curry", "pizza margherita", "falafel", "lasagna", "blue cheese", "mango", "peanut butter",
         "pho", "tacos", "mushroom risotto", "kimchi", "croissants", "lentil soup", "grilled salmon"]
ALLERGENS = ["peanuts", "shellfish", "penicillin", "cats", "pollen", "gluten", "lactose", "latex",
             "bee stings", "dust mites", "sesame", "ibuprofen"]
JOBS = ["data engineer", "nurse", "product manager", "teacher", "architect", "chef", "lawyer",
        "UX designer", "site reliability engineer", "pharmacist", "journalist", "physiotherapist",
        "accountant", "game developer", "electrician"]
COMPANIES = ["Acme Corp", "Globex", "Initech", "Umbrella Labs", "Stark Industries", "Hooli",
             "Vandelay Imports", "Wayne Enterprises", "Pied Piper", "Cyberdyne", "Soylent", "Tyrell"]
CITIES = ["Berlin", "Lisbon", "Osaka", "Toronto", "Nairobi", "Austin", "Melbourne", "Oslo", "Bogota",
          "Seoul", "Dublin", "Prague", "Cape Town", "Montreal", "Zurich", "Hanoi"]
PROJECTS = ["Apollo", "Orion", "Nightingale", "Bluebird", "Atlas", "Phoenix", "Mercury", "Helix",
            "Aurora", "Kestrel", "Titan", "Juniper", "Falcon", "Quasar"]
SKILLS = ["Rust", "Python", "Spanish", "Japanese", "the piano", "watercolor painting", "SQL",
          "rock climbing", "Kubernetes", "public speaking", "chess", "sourdough baking", "salsa dancing",
          "photography", "German", "statistics"]
CAPABILITIES = ["read simple texts", "write small programs", "play a few songs", "hold a conversation",
                "debug production issues", "lead a workshop", "climb grade 6a routes", "bake a decent loaf"]
ACTIVITIES = ["working late", "travelling", "coding", "reading", "running", "cooking at home",
              "on weekends", "in long meetings", "on flights", "studying"]
OBJECTS = ["laptop charger", "passport", "blue notebook", "spare keys", "insurance letter", "train tickets",
           "headphones", "medication", "umbrella", "tax documents", "guitar", "bike lock", "badge",
           "USB stick", "reading glasses", "wallet"]
TOOLS = ["web_search", "calendar", "email", "shell", "git", "weather_api", "flight_search", "jira",
         "slack", "code_interpreter"]
ERRORS = ["a NullPointerException", "a timeout after 30 seconds", "permission denied", "out of memory",
          "connection refused", "an assertion failure", "a missing dependency libssl", "a merge conflict",
          "a segmentation fault", "rate limit exceeded", "a flaky integration test", "a schema mismatch"]
FILES = ["src/main.py", "api/server.go", "db/schema.sql", "web/app.tsx", "lib/utils.rs",
         "tests/test_auth.py", "config/settings.yaml", "scripts/deploy.sh", "core/engine.cpp"]
MEETINGS = ["standup", "sprint planning", "retrospective", "design review", "budget meeting",
            "customer call", "one-on-one", "all-hands", "incident review"]
STATEMENTS = ["the launch should move to next quarter", "the budget is frozen until March",
              "the API needs rate limiting", "two engineers are joining the team",
              "the customer wants weekly reports", "the database migration is risky",
              "the office will close on Fridays", "onboarding docs are out of date",
              "latency doubled after the release", "the vendor contract ends in June"]
TASKS = ["book a table for four", "summarize the quarterly report", "draft a reply to the landlord",
         "find flights to Lisbon", "remind them to renew the passport", "compare two laptop models",
         "translate the contract into Spanish", "plan a weekend hike", "schedule a dentist appointment",
         "write unit tests for the parser", "clean up the shared drive", "order printer ink"]
QUERIES_TOOL = ["cheap flights to Osaka", "python asyncio tutorial", "weather in Oslo tomorrow",
                "best ramen in Berlin", "kubernetes pod eviction", "how to fix a flat bike tire",
                "quarterly tax deadline", "postgres vacuum settings", "sourdough starter ratio",
                "noise cancelling headphones review"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]
MEETING_PREFS = ["before noon", "after lunch", "on Tuesdays and Thursdays", "never on Fridays",
                 "in 25-minute slots", "with an agenda sent the day before"]
ROOMS = ["home/kitchen", "home/living-room", "home/garden", "home/office", "office/berlin/floor-3",
         "office/berlin/meeting-room-a", "office/lisbon/lab", "office/remote", "cafe/downtown",
         "gym/north", "car", "train/commute"]
SUFFIXES = ([f"on {d} {t}" for d in WEEKDAYS for t in ("morning", "afternoon", "evening")]
            + [f"after the {m}" for m in MEETINGS]
            + [f"during the call with {p}" for p in PEOPLE[:20]]
            + [f"as noted in {m}" for m in MONTHS]
            + ["according to the chat log", "as mentioned twice before", "per the latest email",
               "which was confirmed later", "although this may have changed", "from the voice note",
               "while waiting at the airport", "right before the deadline", "in a hurry", "in passing"])

PREFIXES = ["Noted yesterday:", "From this morning's chat:", "The user mentioned that", "Reminder:", "Update:",
            "FYI:", "Heads-up:", "Worth remembering:", "From the last session:", "Observed today:",
            "Follow-up from Monday:", "As of last week,", "Quick note:", "Context for later:", "From the email thread:",
            "Important:", "Overheard in the meeting:", "Logged automatically:", "Summary of the call:",
            "From the shared doc:", "Earlier tonight:", "Two days ago:", "During onboarding:", "Per the ticket:"]


@dataclass
class PoolItem:
    text: str
    who: str
    category: str
    tier: str
    location: str
    topic: str
    entities: list[str]
    why: str | None = None
    how: str | None = None


def _templates():
    """(category, tier, weight, fn(rng) -> PoolItem). Weight = relative frequency."""
    T = []

    def add(category, tier, weight):
        def deco(fn):
            T.append((category, tier, weight, fn))
            return fn
        return deco

    @add("preference", "semantic", 3)
    def _(r):
        p, a, b = r.choice(PEOPLE), *r.sample(FOODS, 2)
        return PoolItem(f"{p} likes {a} but cannot stand {b}.", p, "preference", "semantic", "home/kitchen",
                        "food", [p, a, b])

    @add("preference", "semantic", 2)
    def _(r):
        p, a, b, act = r.choice(PEOPLE), *r.sample(FOODS, 2), r.choice(ACTIVITIES)
        return PoolItem(f"When {act}, {p} prefers {a} over {b}.", p, "preference", "semantic",
                        r.choice(ROOMS), "food", [p, a, b])

    @add("preference", "semantic", 2)
    def _(r):
        p, pref = r.choice(PEOPLE), r.choice(MEETING_PREFS)
        return PoolItem(f"{p} wants meetings scheduled {pref}.", p, "preference", "semantic",
                        "office/berlin/floor-3", "scheduling", [p], why="keeps focus time free")

    @add("fact", "semantic", 3)
    def _(r):
        p, rel, q = r.choice(PEOPLE), r.choice(RELATIONS), r.choice(PEOPLE)
        return PoolItem(f"{p}'s {rel} is called {q}.", p, "fact", "semantic", "home/living-room",
                        "family", [p, q])

    @add("fact", "semantic", 3)
    def _(r):
        p, j, c, city = r.choice(PEOPLE), r.choice(JOBS), r.choice(COMPANIES), r.choice(CITIES)
        return PoolItem(f"{p} works as a {j} at {c} in {city}.", p, "fact", "semantic",
                        f"office/{city.lower().replace(' ', '-')}", "work", [p, c, city])

    @add("fact", "semantic", 2)
    def _(r):
        p, a = r.choice(PEOPLE), r.choice(ALLERGENS)
        return PoolItem(f"{p} is allergic to {a} and carries medication for it.", p, "fact", "semantic",
                        "home/kitchen", "health", [p, a], why="safety when ordering food")

    @add("fact", "semantic", 2)
    def _(r):
        p, city, n = r.choice(PEOPLE), r.choice(CITIES), r.randint(2, 15)
        return PoolItem(f"{p} has lived in {city} for {n} years.", p, "fact", "semantic",
                        f"city/{city.lower().replace(' ', '-')}", "home", [p, city])

    @add("fact", "semantic", 2)
    def _(r):
        pr, d, m = r.choice(PROJECTS), r.randint(1, 28), r.choice(MONTHS)
        owner = r.choice(PEOPLE)
        return PoolItem(f"The {pr} project deadline is {m} {d}, and {owner} owns the release.", owner, "fact",
                        "semantic", f"repo/{pr.lower()}", "deadlines", [pr, owner])

    @add("skill", "semantic", 3)
    def _(r):
        p, s, c = r.choice(PEOPLE), r.choice(SKILLS), r.choice(CAPABILITIES)
        return PoolItem(f"{p} is learning {s} and can already {c}.", p, "skill", "semantic", r.choice(ROOMS),
                        "learning", [p, s])

    @add("skill", "semantic", 1)
    def _(r):
        p, s, y = r.choice(PEOPLE), r.choice(SKILLS), r.randint(2, 20)
        return PoolItem(f"{p} has {y} years of experience with {s}.", p, "skill", "semantic",
                        "office/remote", "learning", [p, s])

    @add("episode", "episodic", 4)
    def _(r):
        p, o, room, d = r.choice(PEOPLE), r.choice(OBJECTS), r.choice(ROOMS), r.choice(WEEKDAYS)
        place = room.split("/")[-1].replace("-", " ")
        return PoolItem(f"{p} left the {o} in the {place} on {d}.", p, "episode", "episodic", room,
                        "belongings", [p, o])

    @add("episode", "episodic", 4)
    def _(r):
        p, m, s = r.choice(PEOPLE), r.choice(MEETINGS), r.choice(STATEMENTS)
        return PoolItem(f"During the {m}, {p} said that {s}.", p, "episode", "episodic",
                        "office/berlin/meeting-room-a", "meetings", [p, m])

    @add("episode", "episodic", 4)
    def _(r):
        p, t = r.choice(PEOPLE), r.choice(TASKS)
        return PoolItem(f"{p} asked the assistant to {t}.", p, "episode", "episodic", "office/remote",
                        "requests", [p], how="chat")

    @add("episode", "episodic", 3)
    def _(r):
        p, q, city, m = r.choice(PEOPLE), r.choice(PEOPLE), r.choice(CITIES), r.choice(MONTHS)
        return PoolItem(f"{p} met {q} in {city} in {m} to talk about a new job.", p, "episode", "episodic",
                        f"city/{city.lower().replace(' ', '-')}", "travel", [p, q, city])

    @add("episode", "episodic", 2)
    def _(r):
        p, pr, e = r.choice(PEOPLE), r.choice(PROJECTS), r.choice(ERRORS)
        return PoolItem(f"{p} spent the afternoon fixing {e} in the {pr} service.", p, "episode", "episodic",
                        f"repo/{pr.lower()}/src", "debugging", [p, pr])

    @add("context", "working", 3)
    def _(r):
        tool, q, n, ms = r.choice(TOOLS[:1] + ["web_search", "flight_search"]), r.choice(QUERIES_TOOL), \
            r.randint(0, 50), r.randint(40, 3000)
        return PoolItem(f"Tool {tool} returned {n} results for '{q}' in {ms} ms.", tool, "context", "working",
                        "web/search", "tool-output", [tool], how="tool call")

    @add("context", "working", 3)
    def _(r):
        pr, e, f, line = r.choice(PROJECTS), r.choice(ERRORS), r.choice(FILES), r.randint(10, 900)
        return PoolItem(f"Build of {pr} failed with {e} in {f} line {line}.", "shell", "context", "working",
                        f"repo/{pr.lower()}/{f.split('/')[0]}", "ci", [pr, f], how="tool call")

    @add("context", "working", 2)
    def _(r):
        m, d, h, p = r.choice(MEETINGS), r.choice(WEEKDAYS), r.randint(8, 18), r.choice(PEOPLE)
        return PoolItem(f"Calendar: {m} with {p} on {d} at {h}:00.", "calendar", "context", "working",
                        "office/berlin/floor-3", "calendar", [m, p], how="calendar sync")

    @add("context", "working", 2)
    def _(r):
        city, c, w = r.choice(CITIES), r.randint(-5, 35), r.choice(["rain", "sunshine", "snow", "strong wind", "fog"])
        return PoolItem(f"Weather API: {city} expects {w} and {c} degrees tomorrow.", "weather_api", "context",
                        "working", f"city/{city.lower().replace(' ', '-')}", "weather", [city], how="tool call")

    @add("context", "working", 2)
    def _(r):
        p, pr, n = r.choice(PEOPLE), r.choice(PROJECTS), r.randint(1, 400)
        return PoolItem(f"git: {p} pushed {n} commits to the {pr} main branch.", "git", "context", "working",
                        f"repo/{pr.lower()}", "ci", [p, pr], how="tool call")
    return T


def _queries(rng: random.Random, n: int) -> list[dict]:
    """Questions over the same vocabulary: paraphrases of what the templates store."""
    Q = [
        lambda p: (f"What food does {p} dislike?", p, None),
        lambda p: (f"What does {p} like to eat?", p, "home/kitchen"),
        lambda p: (f"Is {p} allergic to anything?", p, None),
        lambda p: (f"Where does {p} work and what is their job?", p, None),
        lambda p: (f"Who is {p}'s {rng.choice(RELATIONS)}?", p, None),
        lambda p: (f"Which city does {p} live in?", None, None),
        lambda p: (f"What is {p} learning at the moment?", p, None),
        lambda p: (f"Where did {p} put the {rng.choice(OBJECTS)}?", p, rng.choice(ROOMS)),
        lambda p: (f"What did {p} say in the {rng.choice(MEETINGS)}?", None, "office/berlin/meeting-room-a"),
        lambda p: (f"What did {p} ask me to do?", p, None),
        lambda p: (f"When should meetings with {p} be scheduled?", None, "office/berlin/floor-3"),
        lambda p: (f"Why did the {rng.choice(PROJECTS)} build fail?", "shell", None),
        lambda p: (f"When is the {rng.choice(PROJECTS)} deadline?", None, None),
        lambda p: (f"Any search results about {rng.choice(QUERIES_TOOL)}?", None, "web/search"),
        lambda p: (f"What is the weather forecast for {rng.choice(CITIES)}?", None, None),
        lambda p: (f"Who did {p} meet while travelling?", p, None),
        lambda p: (f"What bugs has {p} been fixing?", p, None),
        lambda p: (f"How experienced is {p} with {rng.choice(SKILLS)}?", None, None),
        lambda p: (f"What is on the calendar with {p} this week?", "calendar", None),
        lambda p: (f"Recent commits to {rng.choice(PROJECTS)}", "git", None),
    ]
    out, seen = [], set()
    while len(out) < n:
        text, actor, loc = rng.choice(Q)(rng.choice(PEOPLE))
        if text in seen:
            continue
        seen.add(text)
        # JAM queries carry an actor or a place only sometimes
        out.append({"text": text, "actor": actor if rng.random() < 0.5 else None,
                    "location": loc if rng.random() < 0.5 else None})
    return out


def build_pool(size: int = POOL_SIZE, seed: int = 7) -> list[PoolItem]:
    rng = random.Random(seed)
    tpl = _templates()
    weights = [w for _, _, w, _ in tpl]
    seen, items = set(), []
    tries = 0
    while len(items) < size:
        tries += 1
        if tries > size * 50:
            raise RuntimeError("template space too small for the pool size")
        _, _, _, fn = rng.choices(tpl, weights)[0]
        it = fn(rng)
        if it.text in seen:
            continue
        seen.add(it.text)
        items.append(it)
    return items


def _cache_key(size: int, n_queries: int) -> str:
    h = hashlib.sha1(f"{CORPUS_VERSION}:{size}:{n_queries}:{MODEL_ID}".encode()).hexdigest()[:10]
    return f"v{CORPUS_VERSION}-{size}-{h}"


class Corpus:
    """The embedded pool, suffixes and queries (from the cache, or embedded now)."""

    def __init__(self, pool: list[PoolItem], pool_vecs: np.ndarray, suffixes: list[str], suffix_vecs: np.ndarray,
                 queries: list[dict], query_vecs: np.ndarray, embed_seconds: float | None):
        self.pool, self.pool_vecs = pool, pool_vecs
        self.suffixes, self.suffix_vecs = suffixes, suffix_vecs
        self.queries, self.query_vecs = queries, query_vecs
        self.embed_seconds = embed_seconds  # None when loaded from the cache
        self.by_person: dict[str, np.ndarray] = {}
        who = np.array([p.who for p in pool])
        for p in set(who.tolist()):
            self.by_person[p] = np.flatnonzero(who == p)
        self.words = np.array([len(p.text.split()) for p in pool], dtype=np.float32)

    @classmethod
    def load(cls, size: int = POOL_SIZE, n_queries: int = N_QUERIES, embedder=None, log=print) -> "Corpus":
        import time

        CACHE.mkdir(parents=True, exist_ok=True)
        f_vec, f_txt = CACHE / "embeddings.npy", CACHE / "embeddings.jsonl"
        pool = build_pool(size)
        rng = random.Random(11)
        queries = _queries(rng, n_queries)
        texts = [p.text for p in pool] + SUFFIXES + PREFIXES + [q["text"] for q in queries]
        known: dict[str, int] = {}
        cached_vecs = np.zeros((0, 384), dtype=np.float32)
        if f_vec.exists() and f_txt.exists():
            lines = [json.loads(line) for line in f_txt.read_text().splitlines()]
            cached_vecs = np.load(f_vec)
            if len(lines) == cached_vecs.shape[0] and all(x.get("model") == MODEL_ID for x in lines):
                known = {x["text"]: i for i, x in enumerate(lines)}
            else:
                cached_vecs = np.zeros((0, 384), dtype=np.float32)
        missing = list(dict.fromkeys(t_ for t_ in texts if t_ not in known))
        secs = None
        if missing:
            if embedder is None:
                from pgmem.embedding import Embedder

                embedder = Embedder(batch_size=256, cache_size=0)
            log(f"pool: embedding {len(missing)} sentences with MiniLM once (cached in {CACHE}); "
                f"about {len(missing) / 80 / 60:.0f} min on 2 cores")
            t = time.perf_counter()
            new = np.empty((len(missing), cached_vecs.shape[1] if cached_vecs.size else 384), dtype=np.float32)
            step = 2048
            for s_ in range(0, len(missing), step):
                new[s_:s_ + step] = embedder.embed_many(missing[s_:s_ + step], batch_size=256)
                log(f"  embedded {min(s_ + step, len(missing))}/{len(missing)} ({time.perf_counter() - t:.0f} s)")
            secs = time.perf_counter() - t
            old_texts = sorted(known, key=known.get)
            cached_vecs = np.concatenate([cached_vecs, new]) if cached_vecs.size else new
            known.update({t_: len(old_texts) + i for i, t_ in enumerate(missing)})
            tmp = f_vec.with_suffix(".tmp.npy")
            np.save(tmp, cached_vecs)
            tmp.rename(f_vec)
            with f_txt.open("w") as f:
                for t_ in old_texts + missing:
                    f.write(json.dumps({"text": t_, "model": MODEL_ID}) + "\n")
        else:
            log(f"pool: {len(pool)} sentences, {len(SUFFIXES)} suffixes, {len(PREFIXES)} prefixes, "
                f"{len(queries)} queries, all from {f_vec.name}")
        vecs = cached_vecs[[known[t_] for t_ in texts]]
        return cls._split(pool, queries, vecs, secs)

    @classmethod
    def _split(cls, pool, queries, vecs, secs):
        a, b = len(pool), len(pool) + len(SUFFIXES)
        c = b + len(PREFIXES)
        out = cls(pool, vecs[:a], list(SUFFIXES), vecs[a:b], queries, vecs[c:], secs)
        out.prefixes, out.prefix_vecs = list(PREFIXES), vecs[b:c]
        return out


def _tokens_estimate(text: str) -> int:
    """pgmem.estimate_tokens: max(ceil(chars/4), words)."""
    return max(math.ceil(len(text) / 4.0), len(text.split()))


def derive_block(corpus: Corpus, n_total: int, block: int, seed: int, now: datetime,
                 start: int | None = None, stop: int | None = None) -> tuple[list[dict], np.ndarray]:
    """Rows [block*BLOCK, min((block+1)*BLOCK, n_total)) of the data set (optionally a
    sub-range start:stop inside the block): dicts of column values and a float32 matrix of
    their unit vectors. Row r gets id r+1; ids follow creation time (one year up to now)."""
    lo = block * BLOCK
    hi = min(lo + BLOCK, n_total)
    rng = np.random.default_rng([seed, block])
    n = hi - lo
    P = len(corpus.pool)
    prim = rng.integers(0, P, n)
    nsent = rng.choice([1, 2, 3], n, p=[0.6, 0.3, 0.1])
    same_person = rng.random((n, 2)) < 0.5
    others = rng.integers(0, P, (n, 2))
    has_suffix = rng.random(n) < 0.8
    suffix = rng.integers(0, len(corpus.suffixes), n)
    has_prefix = rng.random(n) < 0.8
    prefix = rng.integers(0, len(corpus.prefixes), n)
    eps = rng.uniform(0.35, 0.65, n).astype(np.float32)
    noise = rng.standard_normal((n, corpus.pool_vecs.shape[1]), dtype=np.float32)
    # time: row r at fraction r/N of the year, jitter within a few minutes; sessions of ~40 rows
    year = 365.0 * 86400
    t0 = now.timestamp() - year
    frac = (np.arange(lo, hi) + rng.random(n)) / max(n_total, 1)
    created = t0 + frac * (year - 600)
    access = np.where(rng.random(n) < 0.65, 0, np.minimum(np.floor(rng.pareto(1.16, n) + 1), 5000)).astype(np.int64)
    last_acc_frac = rng.random(n)
    imp_u = rng.uniform(0.2, 1.0, n)
    sal = rng.uniform(0.1, 0.9, n)
    sur = rng.uniform(0.15, 1.0, n)
    happened_off = np.where(rng.random(n) < 0.3, rng.uniform(0, 2 * 86400, n), np.nan)
    vecs = np.empty((n, corpus.pool_vecs.shape[1]), dtype=np.float32)
    rows = []
    for k in range(n):
        r = lo + k
        if start is not None and not (start <= r < (stop if stop is not None else hi)):
            continue
        i = int(prim[k])
        item = corpus.pool[i]
        idx = [i]
        for e in range(nsent[k] - 1):
            if same_person[k, e] and item.who in corpus.by_person:
                cand = corpus.by_person[item.who]
                idx.append(int(cand[others[k, e] % len(cand)]))
            else:
                idx.append(int(others[k, e]))
        w = corpus.words[idx]
        base = (w[:, None] * corpus.pool_vecs[idx]).sum(0) / w.sum()
        text = " ".join(corpus.pool[j].text for j in idx)
        if has_suffix[k]:
            base = base + 0.3 * corpus.suffix_vecs[suffix[k]]
            text = text[:-1] + " " + corpus.suffixes[suffix[k]] + "." if text.endswith(".") else \
                text + " " + corpus.suffixes[suffix[k]]
        if has_prefix[k]:
            base = base + 0.2 * corpus.prefix_vecs[prefix[k]]
            text = corpus.prefixes[prefix[k]] + " " + text
        base /= np.linalg.norm(base)
        g = noise[k] / np.linalg.norm(noise[k])
        v = base + eps[k] * g
        vecs[k] = v / np.linalg.norm(v)
        ents = list(dict.fromkeys(e for j in idx for e in corpus.pool[j].entities))
        c_at = datetime.fromtimestamp(created[k], timezone.utc)
        acc = int(access[k])
        sess = r // 40
        rows.append({
            "id": r + 1, "user_id": None, "agent_id": "agent-1", "session_id": f"s{sess:07d}",
            "tier": item.tier, "category": item.category, "content": text, "who": item.who, "what": None,
            "happened_at": (c_at - timedelta(seconds=float(happened_off[k]))) if not np.isnan(happened_off[k]) else None,
            "location": item.location, "why": item.why, "how": item.how,
            "topics": [item.topic], "entities": ents,
            "importance": float(min(1.0, CATEGORY_WEIGHT[item.category] * imp_u[k])),
            "salience": float(sal[k]), "surprise": float(sur[k]),
            "metadata": {"bench": True, "pool": idx},
            "token_count": _tokens_estimate(text), "access_count": acc,
            "last_accessed_at": (datetime.fromtimestamp(created[k] + last_acc_frac[k] * (now.timestamp() - created[k]), timezone.utc)
                                 if acc > 0 else None),
            "created_at": c_at, "seq": r % 40 + 1,
        })
    if start is not None:
        sel = slice(start - lo, (stop if stop is not None else hi) - lo)
        vecs = vecs[sel]
    return rows, vecs


def fresh_events(corpus: Corpus, count: int, seed: int, now: datetime) -> tuple[list[dict], np.ndarray]:
    """New memories (not in the data set) for the ingest measurements, as client events:
    derived like the data set but from another random stream (remember() stamps them now)."""
    rows, vecs = derive_block(corpus, BLOCK, 0, seed + 1000, now)
    rows, vecs = rows[:count], vecs[:count]
    events = []
    for r in rows:
        events.append({"content": r["content"], "who": r["who"], "where": r["location"], "why": r["why"],
                       "how": r["how"], "category": r["category"], "session_id": "ingest-" + r["session_id"],
                       "topics": r["topics"], "entities": r["entities"], "metadata": {"bench": "ingest"}})
    return events, vecs
