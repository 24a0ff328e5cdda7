"""Profile-statement detection (layered-memory-architecture.md, tier B "Semantic: user
traits, preferences, personal facts (key-value), updated on profile statement detection").

``detect_facts("I switched from VS Code to Neovim")`` returns
``[{"key": "editor", "value": "Neovim", "previous": "VS Code", "confidence": 0.9, ...}]``.
The rules are small regular expressions, each written down next to its key, so a user can
predict what is stored. The design gives no list of statements; the ones here are the
issue's examples ("My name is Alex", "I switched from VS Code to Neovim", "I'm allergic to
peanuts", "I moved to Berlin") and their common variants.

Runs inside PostgreSQL (PL/Python, through pgmem._engine) and in the client: standard
library only. Every fact is a dict with:

* ``key``: lower-case dotted name (``name``, ``location``, ``allergies.peanuts``);
* ``value``: a JSON value (a string, a number, true/false);
* ``confidence`` in [0, 1];
* ``statement``: the words that stated it;
* ``previous`` (optional): the value the statement says it replaces ("from VS Code"):
  pgmem.apply_facts uses it to find the key of a fact whose key the text does not name.
"""
from __future__ import annotations

import re
from typing import Any, Mapping

from pgmem.engine.guard import normalise, tick, windows

__all__ = ["detect_facts", "validate_facts", "merge_facts", "is_user_speaker", "fact_key", "LLM_FIELD", "SQL_API"]

# Tool and place words that name the key of a "switched to"/"I use" statement.
CATEGORIES: dict[str, tuple[str, ...]] = {
    "editor": ("vs code", "vscode", "visual studio code", "visual studio", "vim", "neovim", "nvim", "emacs",
               "sublime text", "sublime", "atom", "intellij", "intellij idea", "pycharm", "webstorm", "xcode",
               "nano", "helix", "zed", "cursor", "notepad++", "eclipse", "android studio", "rider", "goland"),
    "os": ("linux", "ubuntu", "debian", "fedora", "arch linux", "arch", "nixos", "macos", "mac os", "os x",
           "windows", "windows 11", "windows 10", "freebsd", "chromeos"),
    "shell": ("bash", "zsh", "fish", "powershell", "nushell"),
    "browser": ("chrome", "google chrome", "firefox", "safari", "edge", "brave", "arc", "vivaldi", "opera"),
    "primary_language": ("python", "rust", "go", "golang", "java", "javascript", "typescript", "kotlin",
                         "swift", "ruby", "php", "c#", "c++", "scala", "elixir", "haskell", "clojure", "zig"),
    "database": ("postgres", "postgresql", "mysql", "mariadb", "sqlite", "mongodb", "redis", "oracle",
                 "sql server", "cassandra", "dynamodb", "duckdb"),
    "phone": ("iphone", "android", "pixel", "galaxy", "samsung galaxy"),
    "cloud": ("aws", "gcp", "google cloud", "azure", "digitalocean", "hetzner", "fly.io", "heroku"),
}
_CATEGORY_OF = {name: cat for cat, names in CATEGORIES.items() for name in names}

# Words after "I'm" that are not a name ("I'm Sorry" at a sentence start, etc.).
_NOT_NAMES = frozenset("""
sorry fine ok okay good great here back done not so very just also still really sure glad happy going getting
afraid tired busy ready new going trying looking working using learning thinking wondering curious
confused stuck lost home in on at from with a an the allergic based living moving switching over
""".split())
# "my X is Y": X that are not facts about the user.
_NOT_KEYS = frozenset("""
question questions point problem problems issue issues concern guess bad fault pleasure turn answer
understanding code idea suggestion request point worry take impression experience feeling hope fear
thought thoughts reason assumption main last first second next only biggest best worst bet mistake
name job
""".split())
_JOBS = ("engineer", "developer", "designer", "teacher", "doctor", "nurse", "manager", "scientist",
         "student", "writer", "researcher", "analyst", "consultant", "architect", "lawyer", "artist",
         "programmer", "accountant", "chef", "founder", "professor", "physician", "pharmacist",
         "journalist", "editor", "photographer", "product owner", "administrator", "admin", "sre",
         "devops engineer", "data scientist", "freelancer", "entrepreneur", "pilot", "mechanic")
_DIETS = ("vegetarian", "vegan", "pescatarian", "keto", "gluten-free", "halal", "kosher")

_NAME = r"[A-Z][\w'’-]+(?:\s+[A-Z][\w'’-]+){0,2}"
_WORD = r"[A-Z][\w&'’-]*(?:\.[A-Za-z]+)*"   # a capitalised word; "Fly.io" keeps its dot, a sentence's end does not
_ORG = _WORD + r"(?:(?:\s+(?:of|de|for|and|&))?\s+" + _WORD + ")*"
_PLACE = r"(?:(?:St|Ste|Ft|Mt)\.\s+)?[A-Z][\w'’-]+(?:\.[A-Za-z]+)*(?:(?:\s+(?:de|del|da|am|an|upon|sur|la|le))?\s+[A-Z][\w'’-]+)*"
_END = r"(?=\s*(?:[.,;:!?)]|$|\s(?:and|but|because|since|for|last|this|now|recently|a\s+few|two|three|in\s+\d|when|where|with|after)\b))"
_IM = r"\b(?:i(?:\s*['’]\s*|\s*)a?m|i’m)\s+"
# (No two adjacent quantifiers below match the same characters, so a long run of spaces or
# words is tried once, not split every way between them: issue 27, H1; engine/guard.py.)
# "I've ", "I have ", "I ": the optional "'ve"/"have" is a literal between the spaces.
_HAVE = r"(?:\s*['’]ve|\s+have)?\s*"
# a tool or place as written in "switched from X to Y", "I use X": words, starting and ending
# with a non-space (the spaces around it belong to the \s+ beside it), lazily as short as the
# statement allows
_TOOL = r"[\w.#+'’-](?:[\w .#+'’-]*?[\w.#+'’-])?"

# Prefixes match in any case ((?i:...)); names, places and employers must be capitalised.
RULES: list[tuple[str, re.Pattern[str]]] = [
    ("name", re.compile(r"(?i:\bmy\s+(?:full\s+|first\s+)?name\s+is)\s+(?P<v>" + _NAME + ")")),
    ("name", re.compile(r"(?i:\b(?:please\s+)?call\s+me)\s+(?P<v>" + _NAME + r")" + _END)),
    ("name_im", re.compile(r"(?:^[,!\s]*|[.!?]\s+|,[,!\s]*)(?i:(?:(?:hi|hello|hey)[,!\s]*)?(?:I'm|I’m|I am|Im))\s+(?P<v>[A-Z][a-z'’-]+(?:\s+[A-Z][a-z'’-]+){0,2})" + _END)),
    ("switch", re.compile(r"(?i:\bi" + _HAVE + r"(?:just\s+|recently\s+|finally\s+)?(?:switched|moved|migrated|changed|went)\s+"
                          r"(?:over\s+)?from)\s+(?P<prev>" + _TOOL + r")\s+(?i:(?:over\s+)?to)\s+(?P<v>" + _TOOL + ")" + _END)),
    ("switch_to", re.compile(r"(?i:\bi" + _HAVE + r"(?:just\s+|recently\s+|finally\s+)?(?:switched|migrated|changed)\s+(?:over\s+)?to)\s+"
                             r"(?P<v>" + _TOOL + ")" + _END)),
    ("location", re.compile(r"(?i:\bi" + _HAVE + r"(?:just\s+|recently\s+)?(?:moved|relocated)\s+(?:back\s+)?)"
                            r"(?:(?i:from)\s+(?P<prev>" + _PLACE + r")\s+)?(?i:to)\s+(?P<v>" + _PLACE + ")")),
    ("location", re.compile(r"(?i:\b(?:i\s+(?:now\s+)?live|i\s*'?m\s+living|i\s+am\s+living|i\s*'?m\s+based|i\s+am\s+based|i\s+reside)\s+in)\s+(?P<v>" + _PLACE + ")")),
    ("allergy", re.compile(r"\bi\s*(?:'m|’m|am)\s+(?P<neg>not\s+|no\s+longer\s+)?(?:\w+ly\s+|also\s+|very\s+)?allergic\s+to\s+(?P<v>[\w ,'’-]+?)(?:\s+(?:anymore|any\s+more))?(?=\s*(?:[.;:!?)]|$|\s(?:but|because|since|so)\b))", re.I)),
    ("diet", re.compile(_IM + r"(?:a\s+|an\s+)?(?:strict\s+)?(?P<v>" + "|".join(_DIETS) + r")\b", re.I)),
    ("employer", re.compile(r"(?i:\bi\s+(?:now\s+)?work\s+(?:at|for))\s+(?:the\s+)?(?P<v>" + _ORG + ")")),
    ("occupation", re.compile(r"\bi\s+work\s+as\s+(?:a|an)\s+(?P<v>[\w -]+?)" + _END, re.I)),
    ("occupation", re.compile(_IM + r"(?:a|an)\s+(?P<v>(?:[\w-]+\s+){0,3}(?:" + "|".join(_JOBS) + r"))\b", re.I)),
    # "I'm a backend engineer at Northwind Logistics", "..., SRE lead at Northwind": where they work
    ("employer", re.compile(r"(?i:\b(?:" + "|".join(_JOBS) + r"|lead|head|intern|member)s?\s+(?:at|for|with))\s+(?:the\s+)?"
                            r"(?P<v>" + _ORG + ")")),
    ("location", re.compile(r"(?i:\bi\s+(?:now\s+)?work\s+(?:remotely\s+)?from)\s+(?P<v>" + _PLACE + ")")),
    ("intolerance", re.compile(_IM + r"(?P<neg>not\s+|no\s+longer\s+)?(?P<v>lactose|gluten|fructose|histamine|caffeine|alcohol)\s+intolerant\b", re.I)),
    ("allergy_noun", re.compile(r"\bi\s+(?:have|'ve\s+got|’ve\s+got)\s+(?:a|an)\s+(?:\w+\s+)?(?P<v>[\w-]+)\s+allergy\b", re.I)),
    ("age", re.compile(_IM + r"(?P<v>\d{1,3})\s*(?:years?\s+old|y/?o)\b", re.I)),
    ("languages", re.compile(r"(?i:\bi\s+(?:also\s+)?speak)\s+(?P<v>[A-Z][a-z]+(?:(?:\s*,\s*|\s+and\s+)[A-Z][a-z]+)*)")),
    ("uses", re.compile(r"\bi(?:\s+(?:mostly|mainly|now|always)|\s*'m|\s*’m|\s+am)?\s+(?:use|using|code\s+in|program\s+in)\s+"
                        r"(?P<v>" + _TOOL + ")" + _END, re.I)),
    ("my", re.compile(r"\bmy\s+(?P<k>(?:[a-z]+\s+){0,2}[a-z]+)\s+is\s+(?P<v>[^.;!?\n]{1,60}?)(?=\s*(?:[.;!?\n]|$|,\s|\sand\s|\sbut\s))", re.I)),
]
CONFIDENCE = {"name": 0.95, "name_im": 0.85, "switch": 0.9, "switch_to": 0.85, "location": 0.9, "allergy": 0.95,
              "allergy_noun": 0.95, "intolerance": 0.9, "diet": 0.9, "employer": 0.9, "occupation": 0.85, "age": 0.9,
              "languages": 0.85, "uses": 0.8, "my": 0.8}
_NON_USER = ("assistant", "system", "tool", "function", "developer", "ai", "bot", "model")


def fact_key(text: str) -> str:
    """A key part from free text: lower case, runs of other characters to '_' (at most 40)."""
    k = re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:40].strip("_")
    return k if k and k[0].isalpha() else ("x_" + k if k else "")


# every known name, the longest first: one match finds the longest name a value starts with
_KNOWN = re.compile("(?:" + "|".join(re.escape(n) for n in sorted(_CATEGORY_OF, key=len, reverse=True)) + r")\b", re.I)


def _category(value: str) -> str | None:
    v = value.strip().lower()
    if v in _CATEGORY_OF:
        return _CATEGORY_OF[v]
    m = _KNOWN.match(v)  # "Neovim with LazyVim": the known name it starts with
    return _CATEGORY_OF[m.group(0)] if m else None


def _known_prefix(value: str) -> str | None:
    """The known tool name a value starts with, as written ("VS Code with ..." -> "VS Code")."""
    v = value.strip()
    m = _KNOWN.match(v)
    return v[: m.end()] if m else None


def _plural(word: str) -> str:
    """peanut -> peanuts (allergy keys are plural, as "allergic to peanuts" gives them)."""
    w = word.lower()
    return w if w.endswith("s") or w in ("dairy", "gluten", "wheat", "soy", "fish", "shellfish", "milk", "penicillin",
                                          "latex", "pollen", "sesame", "celery", "mustard") else w + "s"


def _clean(value: str) -> str:
    v = re.sub(r"\s+", " ", value).strip(" \t\"'“”’.,;:")
    return re.sub(r"^(?:the|a|an)\s+", "", v, flags=re.I) if len(v.split()) > 1 else v


def _split_list(value: str) -> list[str]:
    return [p for p in (_clean(x) for x in re.split(r"\s*(?:,|\band\b|\bor\b|&)\s*", value)) if p]


def is_user_speaker(speaker: str | None) -> bool:
    """False for an assistant, a tool (``tool:NAME``) or the system: they state nothing about
    the user. An unknown speaker (None) counts as the user."""
    return not (speaker and speaker.strip().lower().split(":")[0] in _NON_USER)


def detect_facts(text: str | None, speaker: str | None = None) -> list[dict[str, Any]]:
    """Profile facts stated in ``text`` by the user, in the order the text states them.
    Statements of an assistant, a tool or the system (``speaker``) state nothing about the
    user: []. One fact per key (the rule listed first in RULES wins)."""
    if not text or not text.strip():
        return []
    if not is_user_speaker(speaker):
        return []
    # (issue 27, H1: the rules see the normalised text, at most guard.MAX_TEXT_CHARS, one window
    # of whole sentences at a time; a pending cancel ends the call between two windows)
    parts = list(windows(normalise(text)))
    out: dict[str, dict[str, Any]] = {}
    where: dict[str, int] = {}
    offset = 0

    def add(key: str, value: Any, rule: str, m: re.Match[str], previous: str | None = None) -> None:
        if not key or key in out or value in (None, "", []):
            return
        f = {"key": key, "value": value, "confidence": CONFIDENCE[rule], "statement": m.group(0).strip(), "rule": rule}
        if previous:
            f["previous"] = previous
        out[key] = f
        where[key] = offset + m.start()

    for rule, rx in RULES:
        for _offset, part in parts:
            tick()
            for m in rx.finditer(part):
                v = m.group("v")
                if rule in ("name", "name_im"):
                    name = _clean(v)
                    if rule == "name_im" and name.split()[0].lower() in _NOT_NAMES:
                        continue
                    add("name", name, rule, m)
                elif rule in ("switch", "switch_to", "uses"):
                    new, prev = _clean(v), _clean(m.groupdict().get("prev") or "") or None
                    cat = _category(new) or (_category(prev) if prev else None)
                    if cat:
                        add(cat, new, rule, m, prev)
                    elif rule == "switch" and prev and new[:1].isupper() and prev[:1].isupper() and "moved" in m.group(0).lower():
                        add("location", new, "location", m, prev)  # "I moved from Lisbon to Berlin"
                    elif rule == "switch" and prev:
                        add("switched." + fact_key(prev), new, rule, m, prev)
                elif rule == "location":
                    add("location", _clean(v), rule, m, _clean(m.groupdict().get("prev") or "") or None)
                elif rule == "allergy":
                    neg = bool(m.group("neg"))
                    for item in _split_list(v):
                        add("allergies." + fact_key(item), not neg, rule, m)
                elif rule == "allergy_noun":  # "I have a peanut allergy"
                    add("allergies." + fact_key(_plural(v)), True, rule, m)
                elif rule == "intolerance":
                    add("intolerances." + fact_key(v), not m.group("neg"), rule, m)
                elif rule == "diet":
                    add("diet", v.lower(), rule, m)
                elif rule == "employer":
                    add("employer", _clean(v), rule, m)
                elif rule == "occupation":
                    add("occupation", _clean(v).lower(), rule, m)
                elif rule == "age":
                    age = int(v)
                    if 0 < age < 130:
                        add("age", age, rule, m)
                elif rule == "languages":
                    for item in _split_list(v):
                        add("languages." + fact_key(item), True, rule, m)
                elif rule == "my":
                    k = re.sub(r"\bfavourite\b", "favorite", m.group("k").lower())
                    words = k.split()
                    value = re.sub(r"(?i)^(?:on|in|at)\s+", "", _clean(v))  # "my birthday is on 14 October"
                    if k in CATEGORIES:  # "my editor is VS Code with the Vim keybindings": the known name
                        known = _known_prefix(value)
                        if known:
                            add(k, known, rule, m)
                            continue
                    if (words[0] in _NOT_KEYS or words[-1] in _NOT_KEYS or len(value.split()) > 6
                            or re.match(r"(?i)(?:what|how|why|when|where|who|which|that|not|this|it)\b", value)):
                        continue
                    add(fact_key(k), value, rule, m)
    return sorted(out.values(), key=lambda f: where[f["key"]])  # in the order the text states them


#: The key an LLM extractor's prompt adds to the fields it asks for (pgmem.extraction.llm).
LLM_FIELD = (
    '"facts": array of profile facts the USER states about themselves in this event, each\n'
    '  {"key": lower_snake_case name ("name", "location", "employer", "editor", "allergies.peanuts"),\n'
    '   "value": string, number or true/false, "confidence": 0..1,\n'
    '   "previous": the value it replaces if the user says so ("switched from X"), else omit};\n'
    '  [] when the event states none (an assistant or tool event states none)')


def validate_facts(obj: Any, limit: int = 20) -> list[dict[str, Any]]:
    """Facts from an LLM's JSON (``{"facts": [...]}`` or a list): each needs a key that
    fact_key can normalise and a non-null value; confidence defaults to 0.8 and is clamped
    to [0, 1]. What cannot be used is dropped."""
    items = obj.get("facts") if isinstance(obj, Mapping) else obj
    if not isinstance(items, list):
        return []
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for it in items:
        if not isinstance(it, Mapping) or it.get("value") in (None, "", []):
            continue
        raw_key = str(it.get("key") or "")
        key = ".".join(p for p in (fact_key(part) for part in raw_key.split(".")) if p)
        if not key or key in seen or not isinstance(it.get("value"), (str, int, float, bool)):
            continue
        try:
            conf = float(it.get("confidence", 0.8))
        except (TypeError, ValueError):
            conf = 0.8
        f = {"key": key, "value": it["value"], "confidence": round(min(1.0, max(0.0, conf)), 4),
             "statement": str(it.get("statement") or "")[:300] or None, "rule": "llm"}
        if it.get("previous"):
            f["previous"] = str(it["previous"])
        seen.add(key)
        out.append(f)
        if len(out) >= limit:
            break
    return out


def merge_facts(first: list[dict[str, Any]] | None, then: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """``first``'s facts (an LLM's), then ``then``'s (the heuristic's) for the keys ``first``
    does not state: one fact per key."""
    out = list(first or [])
    keys = {f["key"] for f in out}
    return out + [f for f in then or [] if f["key"] not in keys]


# What pgmem._engine may call from SQL (module 'profile_facts').
SQL_API = {"detect_facts": detect_facts, "validate_facts": validate_facts}
