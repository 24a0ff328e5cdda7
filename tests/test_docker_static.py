"""Static checks of docker/ (no Docker engine; the base images cannot be pulled here, so
Debian's podman cannot build them either).

These tests read the files the way Docker and Compose would and follow each chain to the
setting that matters: compose service -> build context + Dockerfile -> COPY source on disk ->
the file's text. And they check that each image installs every module its command imports:
each pgmem command of compose.yaml is run here, against a real database, with its imports
recorded, and every distribution it imported must be installed by the image's extras.
"""
from __future__ import annotations

import json
import os
import sys
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parent.parent
DOCKER = ROOT / "docker"
COMPOSE_FILE = DOCKER / "compose.yaml"


# --------------------------------------------------------------------------- Dockerfile
@dataclass
class Instruction:
    cmd: str          # upper-case keyword
    args: str         # the rest, continuation lines joined
    line: int


@dataclass
class Dockerfile:
    path: Path
    instructions: list[Instruction]
    global_args: dict[str, str | None] = field(default_factory=dict)

    def all(self, cmd: str) -> list[Instruction]:
        return [i for i in self.instructions if i.cmd == cmd]

    def final_stage(self) -> list[Instruction]:
        idx = max(n for n, i in enumerate(self.instructions) if i.cmd == "FROM")
        return self.instructions[idx:]


def parse_dockerfile(path: Path) -> Dockerfile:
    """Instructions with backslash continuations joined. Comment lines are dropped, also
    inside a continuation (as Docker does); parser directives are comments too."""
    out: list[Instruction] = []
    buf: list[str] = []
    start = 0
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if line.startswith("#") or (not line and not buf):
            continue
        if not buf:
            start = n
        if line.endswith("\\"):
            buf.append(line[:-1].strip())
            continue
        buf.append(line)
        text = " ".join(b for b in buf if b)
        buf = []
        keyword, _, rest = text.partition(" ")
        out.append(Instruction(keyword.upper(), rest.strip(), start))
    assert not buf, f"{path}: dangling line continuation at the end"
    df = Dockerfile(path, out)
    for i in out:
        if i.cmd == "FROM":
            break
        if i.cmd == "ARG":
            name, eq, default = i.args.partition("=")
            df.global_args[name.strip()] = expand(default.strip(), df.global_args) if eq else None
    return df


class Required(AssertionError):
    """${VAR:?message}: Compose refuses to start without VAR."""


def expand(text: str, env: dict[str, str | None], *, strict: bool = True) -> str:
    """${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error} and $VAR, the subset Dockerfiles
    and Compose use. ``strict=False`` leaves unknown names alone (shell variables inside RUN)."""
    def sub(m: re.Match) -> str:
        name = m.group(1) or m.group(4)
        op, default = m.group(2), m.group(3)
        value = env.get(name)
        if value is None or (value == "" and op in (":-", ":?")):
            if op in (":-", "-"):
                return expand(default, env, strict=strict)
            if op in (":?", "?"):
                raise Required(f"${{{name}}} is required: {default}")
            if not strict:
                return m.group(0)
            raise AssertionError(f"${{{name}}} has no value and no default in {text!r}")
        return value
    return re.sub(r"\$\{(\w+)(?:(:?[-?])([^}]*))?\}|\$(\w+)", sub, text)


def exec_form(args: str) -> list[str]:
    """ENTRYPOINT/CMD: exec form (JSON) or shell form."""
    if args.startswith("["):
        return json.loads(args)
    return ["/bin/sh", "-c", args]


def split_flags(args: str) -> tuple[dict[str, str], list[str]]:
    """COPY/ADD: leading --flag=value options, then sources and destination."""
    if args.startswith("["):
        words = json.loads(args)
    else:
        words = shlex.split(args)
    flags = {}
    while words and words[0].startswith("--"):
        k, _, v = words.pop(0)[2:].partition("=")
        flags[k] = v
    return flags, words


@dataclass
class Copy:
    sources: list[str]
    dest: str
    flags: dict[str, str]
    context: Path

    def dest_of(self, source: str) -> str:
        """Where one source lands in the image, as Docker places it: a directory's
        *contents* go into dest; a file goes to dest/<name> when dest ends in '/' (or there
        are several sources), else to dest itself."""
        dest = self.dest.rstrip("/") or "/"
        if (self.context / source).is_dir():
            return dest
        if self.dest.endswith("/") or len(self.sources) > 1:
            return f"{dest}/{PurePosixPath(source).name}"
        return dest


def copies(df: Dockerfile, context: Path) -> list[Copy]:
    result = []
    for i in df.all("COPY") + df.all("ADD"):
        flags, words = split_flags(i.args)
        assert len(words) >= 2, f"{df.path}:{i.line}: COPY needs a source and a destination"
        assert "from" not in flags, f"{df.path}:{i.line}: multi-stage COPY is not checked here"
        result.append(Copy(words[:-1], words[-1], flags, context))
    return result


def stage_env(df: Dockerfile, base: dict[str, str]) -> dict[str, str | None]:
    """ARG/ENV values visible in the final stage (base image's ENV passed in)."""
    env: dict[str, str | None] = dict(base)
    for i in df.final_stage()[1:]:
        if i.cmd == "ARG":
            name, eq, default = i.args.partition("=")
            env.setdefault(name.strip(), expand(default.strip(), env) if eq else None)
        elif i.cmd == "ENV":
            for part in shlex.split(i.args):
                if "=" in part:
                    k, _, v = part.partition("=")
                    env[k] = v
    return env


# --------------------------------------------------------------------------- compose
@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


def build_of(service: dict) -> tuple[Path, Path]:
    """(context directory, Dockerfile path) of a compose service, as Compose resolves them."""
    build = service["build"]
    if isinstance(build, str):
        build = {"context": build}
    context = (COMPOSE_FILE.parent / build.get("context", ".")).resolve()
    dockerfile = (context / build.get("dockerfile", "Dockerfile")).resolve()
    return context, dockerfile


@pytest.fixture(scope="module")
def db_df(services) -> Dockerfile:
    return parse_dockerfile(build_of(services["db"])[1])


@pytest.fixture(scope="module")
def migrate_df(services) -> Dockerfile:
    """The image of the pgmem processes (docker/app.Dockerfile: migrate, schedule, worker, serve)."""
    return parse_dockerfile(build_of(services["migrate"])[1])


APP_SERVICES = ("migrate", "schedule", "worker", "serve")


# Environment of the official postgres:15 image (its Dockerfile sets these).
POSTGRES_BASE_ENV = {"PG_MAJOR": "15", "PGDATA": "/var/lib/postgresql/data"}


def db_env(db_df: Dockerfile) -> dict:
    return stage_env(db_df, POSTGRES_BASE_ENV)


def source_path(context: Path, source: str) -> Path:
    p = (context / source).resolve()
    assert p == context or context in p.parents, f"COPY source {source!r} leaves the build context {context}"
    return p


def copied_file(context: Path, df: Dockerfile, dest: str) -> Path:
    """The file on disk that ends up at ``dest`` in the image."""
    for c in copies(df, context):
        for s in c.sources:
            if c.dest_of(s) == dest:
                return source_path(context, s)
    raise AssertionError(f"{df.path.name}: nothing is copied to {dest}")


def walk_strings(node):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from walk_strings(k)
            yield from walk_strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from walk_strings(v)
    elif isinstance(node, str):
        yield node


def conf_settings(text: str) -> dict[str, str]:
    """name -> value of a postgresql.conf-style file (comments stripped, quotes kept off)."""
    out = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.match(r"^([A-Za-z_][\w.]*)\s*=?\s*(.*)$", line)
        assert m, f"unparsable configuration line: {raw!r}"
        value = m.group(2).strip()
        if len(value) >= 2 and value[0] == value[-1] == "'":
            value = value[1:-1]
        out[m.group(1).lower()] = value
    return out


def server_settings(services, db_df) -> dict[str, str]:
    """Settings the db container's server runs with, following the chain: conf files that
    the image includes from postgresql.conf.sample, then -c options of the effective
    command (Dockerfile CMD or compose command, and what the entrypoint script appends)."""
    context, _ = build_of(services["db"])
    settings: dict[str, str] = {}
    # 1. include/include_dir lines appended to the sample configuration
    runs = " ".join(i.args for i in db_df.all("RUN"))
    appended = re.findall(r'(?:printf|echo)\s+("[^"]*"|\'[^\']*\')\s*>>\s*'
                          r'/usr/share/postgresql/postgresql\.conf\.sample', runs)
    assert appended, "the db image appends nothing to postgresql.conf.sample"
    included = re.findall(r"^\s*include(?:_dir|_if_exists)?\s*=\s*'([^']+)'",
                          "\n".join(a[1:-1].replace("\\n", "\n") for a in appended), re.M)
    assert included, "no include/include_dir line goes into postgresql.conf.sample"
    for target in included:
        for c in copies(db_df, context):
            for s in c.sources:
                dest = c.dest_of(s)
                if dest == target or PurePosixPath(dest).parent == PurePosixPath(target):
                    assert dest.endswith(".conf") or dest == target
                    settings.update(conf_settings(source_path(context, s).read_text()))
    # 2. -c options on the server's command line
    cmd = services["db"].get("command") or exec_form(db_df.all("CMD")[-1].args)
    if isinstance(cmd, str):
        cmd = shlex.split(cmd)
    for k, v in zip(cmd, cmd[1:]):
        if k == "-c":
            name, _, value = v.partition("=")
            settings[name.lower()] = value
    return settings


# --------------------------------------------------------------------------- tests: compose
def test_compose_has_db_and_migrate(services):
    assert {"db", "migrate", "owner", "schedule", "worker", "serve"} <= set(services)
    for name in ("db", *APP_SERVICES):
        context, dockerfile = build_of(services[name])
        assert context.is_dir(), f"{name}: build context {context} does not exist"
        assert dockerfile.is_file(), f"{name}: {dockerfile} does not exist"
    # one image for every pgmem process
    assert {build_of(services[n])[1].name for n in APP_SERVICES} == {"app.Dockerfile"}
    assert {services[n]["image"] for n in APP_SERVICES} == {"pgmem-app:latest"}


REQUIRED = {"PGMEM_DB_PASSWORD", "PGMEM_OWNER_PASSWORD"}  # no default: known passwords (issue 14)


def test_compose_variables_all_have_defaults(compose):
    """Every ${VAR} Compose interpolates has a default (so `docker compose config` works
    with an empty environment) except the required ones, which fail with a message
    (${VAR:?message}); $$ is Compose's escape for a literal $."""
    missing, required = [], set()
    for s in walk_strings(compose):
        s = s.replace("$$", "")
        for m in re.finditer(r"\$\{([^}]*)\}|\$(\w+)", s):
            if m.group(2):
                missing.append(m.group(0))
                continue
            r = re.match(r"^(\w+):\?\S", m.group(1))
            if r:
                required.add(r.group(1))
            elif not re.match(r"^\w+(:?-)", m.group(1)):
                missing.append(m.group(0))
    assert not missing, f"variables without a default in compose.yaml: {missing}"
    assert required == REQUIRED


def test_superuser_password_is_required(services):
    """Issue 14: the superuser password defaulted to 'pgmem'."""
    for where in (services["db"]["environment"]["POSTGRES_PASSWORD"], services["migrate"]["environment"]["PGMEM_DSN"]):
        with pytest.raises(Required, match="PGMEM_DB_PASSWORD"):
            expand(where, {})
    for name in ("schedule", "worker", "serve"):
        with pytest.raises(Required, match="PGMEM_OWNER_PASSWORD"):
            expand(services[name]["environment"]["PGMEM_DSN"], {})
    assert expand(services["db"]["environment"]["POSTGRES_PASSWORD"], {"PGMEM_DB_PASSWORD": "s3cret"}) == "s3cret"


def test_db_publishes_5432_on_localhost(services, db_df):
    ports = [str(p) for p in services["db"]["ports"]]
    assert any(p.endswith(":5432") for p in ports), ports
    assert all(p.startswith("127.0.0.1:") for p in ports), f"published beyond localhost: {ports}"
    expanded = [expand(p, {}) for p in ports]
    assert "127.0.0.1:54329:5432" in expanded
    assert any("5432" in i.args.split() for i in db_df.all("EXPOSE"))


def test_db_environment(services, db_df):
    env = services["db"]["environment"]
    assert env["POSTGRES_DB"] == "pgmem"
    assert expand(env["POSTGRES_PASSWORD"], {"PGMEM_DB_PASSWORD": "s3cret"}) == "s3cret"
    # the database pg_cron is bound to is the one created and migrated
    assert env.get("PGMEM_DATABASE", db_env(db_df)["PGMEM_DATABASE"]) == "pgmem"


def test_db_has_a_named_volume_on_pgdata(compose, services):
    vols = services["db"]["volumes"]
    named = [v.split(":")[0] for v in vols if ":" in v and not v.startswith((".", "/"))]
    assert named and all(n in (compose.get("volumes") or {}) for n in named)
    assert any(v.split(":")[1] == POSTGRES_BASE_ENV["PGDATA"] for v in vols)


def test_db_healthcheck_uses_pg_isready_over_tcp(services, db_df):
    hc = services["db"]["healthcheck"]
    test = hc["test"]
    text = " ".join(test) if isinstance(test, list) else test
    assert "pg_isready" in text
    # TCP: the first-start init server listens on the unix socket only
    assert "-h 127.0.0.1" in text
    [docker_hc] = db_df.all("HEALTHCHECK")
    assert "pg_isready" in docker_hc.args and "-h 127.0.0.1" in docker_hc.args
    assert re.search(r"(^|\s)CMD\s+pg_isready\s", docker_hc.args), docker_hc.args


def test_migrate_waits_for_healthy_db_and_runs_once(services):
    m = services["migrate"]
    assert m["depends_on"]["db"]["condition"] == "service_healthy"
    assert m["restart"] == "no"  # a string: YAML's bare no would be False


def _command(service: dict, df: Dockerfile) -> list[str]:
    entrypoint = service.get("entrypoint") or exec_form(df.all("ENTRYPOINT")[-1].args)
    command = service.get("command") or exec_form(df.all("CMD")[-1].args)
    if isinstance(command, str):
        command = shlex.split(command)
    if isinstance(entrypoint, str):
        entrypoint = shlex.split(entrypoint)
    return [*entrypoint, *command]


def test_migrate_runs_pgmem_migrate(services, migrate_df):
    assert _command(services["migrate"], migrate_df) == ["pgmem", "migrate"]
    assert _command(services["schedule"], migrate_df) == ["pgmem", "jobs", "schedule"]
    assert _command(services["worker"], migrate_df) == ["pgmem", "worker"]
    assert _command(services["serve"], migrate_df)[:2] == ["pgmem", "serve"]


def test_each_process_runs_as_its_role_in_order(services):
    """migrate as the superuser; then owner gives pgmem_owner its login; the jobs are scheduled,
    the worker and the web server run, as pgmem_owner (SECURITY.md), never as postgres."""
    from urllib.parse import urlsplit

    pw = {"PGMEM_DB_PASSWORD": "s3cret", "PGMEM_OWNER_PASSWORD": "own3r"}
    assert urlsplit(expand(services["migrate"]["environment"]["PGMEM_DSN"], pw)).username == "postgres"
    for name in ("schedule", "worker", "serve"):
        dsn = urlsplit(expand(services[name]["environment"]["PGMEM_DSN"], pw))
        assert (dsn.username, dsn.password, dsn.hostname, dsn.path) == ("pgmem_owner", "own3r", "db", "/pgmem"), name
        assert services[name]["depends_on"] == {"owner": {"condition": "service_completed_successfully"}}, name
    assert services["owner"]["depends_on"] == {"migrate": {"condition": "service_completed_successfully"}}
    assert services["schedule"]["restart"] == "no"
    assert services["worker"]["restart"] == services["serve"]["restart"] == "unless-stopped"
    # the web server listens in its container and is published on the host's loopback only
    assert all(expand(p, {}).startswith("127.0.0.1:") for p in services["serve"]["ports"])


def test_owner_gives_pgmem_owner_a_login_and_pg_crons_rights(services, db_df):
    o = services["owner"]
    assert o["image"] == services["db"]["image"]  # psql comes with the database image
    text = " ".join(o["entrypoint"])
    m = re.search(r"-f (\S+)", text)
    context, _ = build_of(services["db"])
    landed = {c.dest_of(s): source_path(context, s) for c in copies(db_df, context) for s in c.sources}
    sql_file = landed[m.group(1)]
    sql = sql_file.read_text()
    assert "alter role pgmem_owner login password %L" in sql and ":'owner_password'" in sql
    for grant in ("grant usage on schema cron to pgmem_owner", "grant execute on all functions in schema cron to pgmem_owner",
                  "grant pg_read_all_settings to pgmem_owner"):
        assert grant in sql
    assert '-v owner_password="$$PGMEM_OWNER_PASSWORD"' in text  # $$: the shell's variable, not Compose's
    assert expand(o["environment"]["PGMEM_OWNER_PASSWORD"], {"PGMEM_OWNER_PASSWORD": "x"}) == "x"


def test_migrate_dsn_points_at_db(services):
    from urllib.parse import urlsplit

    env = services["migrate"]["environment"]
    pw = {"PGMEM_DB_PASSWORD": "s3cret"}
    dsn = urlsplit(expand(env["PGMEM_DSN"], pw))
    db_env_ = services["db"]["environment"]
    assert dsn.scheme == "postgresql"
    assert dsn.hostname == "db" and (dsn.port or 5432) == 5432
    assert dsn.path == "/" + db_env_["POSTGRES_DB"]
    assert dsn.username == db_env_.get("POSTGRES_USER", "postgres")
    # the same password expression as the server's
    assert dsn.password == expand(db_env_["POSTGRES_PASSWORD"], pw) == "s3cret"


# --------------------------------------------------------------------------- tests: db image
def test_db_image_is_postgres_15(db_df):
    [frm] = [i for i in db_df.all("FROM")]
    image = expand(frm.args.split()[0], dict(db_df.global_args))
    assert image == "docker.io/library/postgres:15-bookworm"  # fully qualified: podman resolves it (issue 34)


def test_db_image_installs_the_extensions(db_df):
    runs = [expand(i.args, db_env(db_df), strict=False) for i in db_df.all("RUN")]
    installs = " ".join(r for r in runs if "apt-get install" in r)
    words = {w.strip("\"'").split("=")[0] for w in installs.split()}
    # python3-sklearn: the cluster job's engine (python/pgmem/engine/) imports it inside PL/Python
    for pkg in ("postgresql-15-pgvector", "postgresql-15-cron", "postgresql-plpython3-15", "python3-numpy",
                "python3-sklearn"):
        assert pkg in words, f"{pkg} is not installed by {db_df.path.name}"


def test_db_image_pins_pgvector_0_8(db_df):
    from pgmem.migrate import MIN_PGVECTOR

    env = db_env(db_df)
    assert env["PGVECTOR_VERSION"].startswith("0.8")
    assert tuple(int(x) for x in env["PGVECTOR_MIN"].split(".")) >= MIN_PGVECTOR
    runs = " ".join(i.args for i in db_df.all("RUN"))
    assert "pgvector=${PGVECTOR_VERSION}" in runs
    assert 'dpkg --compare-versions "$vector_version" ge "$PGVECTOR_MIN"' in runs


def test_db_preloads_pg_cron_like_the_embedded_cluster(services, db_df, tmp_path):
    from pgmem.cluster import Cluster

    settings = server_settings(services, db_df)
    assert settings["shared_preload_libraries"] == "pg_cron"
    embedded = Cluster(tmp_path).conf()
    for key in ("shared_preload_libraries", "cron.use_background_workers", "max_worker_processes", "jit"):
        assert settings[key] == embedded[key].strip("'"), key
    assert int(settings["max_worker_processes"]) >= 8


def test_db_sets_cron_database_name_from_env(services, db_df):
    context, _ = build_of(services["db"])
    env = db_env(db_df)
    assert env["PGMEM_DATABASE"] == "pgmem"
    # fallback in the configuration file
    assert server_settings(services, db_df)["cron.database_name"] == "pgmem"
    # the entrypoint wrapper adds -c cron.database_name=$PGMEM_DATABASE to `postgres`
    [ep] = exec_form(db_df.all("ENTRYPOINT")[-1].args)
    script = copied_file(context, db_df, "/usr/local/bin/" + ep).read_text()
    assert 'set -- "$@" -c "cron.database_name=${PGMEM_DATABASE:-pgmem}"' in script
    assert re.search(r'^exec docker-entrypoint\.sh "\$@"$', script, re.M), "must hand over to the official entrypoint"


def test_db_init_script_exists_and_creates_the_database(services, db_df):
    context, _ = build_of(services["db"])
    init = [(c, s) for c in copies(db_df, context) for s in c.sources
            if c.dest_of(s).startswith("/docker-entrypoint-initdb.d/")]
    assert init, "no init script is copied into /docker-entrypoint-initdb.d"
    for c, s in init:
        src = source_path(context, s)
        assert src.is_file(), f"{s} does not exist in {context}"
        assert src.suffix in (".sh", ".sql"), "the official entrypoint runs only *.sh and *.sql"
        text = src.read_text()
        assert "create database" in text.lower()
        assert "PGMEM_DATABASE" in text


@pytest.mark.parametrize("service", ["db", "migrate"])
def test_every_copy_source_exists_in_the_build_context(services, service):  # migrate: the app image
    context, dockerfile = build_of(services[service])
    df = parse_dockerfile(dockerfile)
    cps = copies(df, context)
    assert cps
    for c in cps:
        for s in c.sources:
            assert not re.match(r"^[a-z]+://", s), f"{s}: remote sources are not reproducible"
            assert source_path(context, s).exists(), f"{dockerfile.name}: COPY {s} (context {context})"


@pytest.mark.parametrize("name", ["Dockerfile", "app.Dockerfile"])
def test_every_arg_has_a_default(name):
    df = parse_dockerfile(DOCKER / name)
    for i in df.all("ARG"):
        assert "=" in i.args, f"{name}:{i.line}: ARG {i.args} has no default"


def test_shell_scripts_in_the_image_parse():
    bash = shutil.which("bash")
    assert bash
    for script in sorted(DOCKER.rglob("*.sh")):
        assert script.read_text().startswith("#!/usr/bin/env bash\n"), script
        proc = subprocess.run([bash, "-n", str(script)], capture_output=True, text=True)
        assert proc.returncode == 0, f"{script}: {proc.stderr}"


# --------------------------------------------------------------------------- tests: migrate image
def _pyproject() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def image_extras(df: Dockerfile) -> list[str]:
    """The extras the image's pip install names (its PGMEM_EXTRAS build argument)."""
    env = stage_env(df, {})
    pip = [expand(i.args, env, strict=False) for i in df.all("RUN") if "pip install" in i.args]
    targets = [w for part in re.findall(r"pip install ([^;&|]+)", " ".join(pip)) for w in shlex.split(part)
               if not w.startswith("-")]
    assert len(targets) == 1 and re.fullmatch(r"/src\[[\w,-]+\]", targets[0]), targets
    return targets[0][5:-1].split(",")


def test_every_from_is_fully_qualified(db_df, migrate_df):
    """Podman (and engines without a default registry) stop at short names such as python:3.11
    (issue 34): every FROM names registry/namespace/name."""
    for df in (db_df, migrate_df):
        for frm in df.all("FROM"):
            image = expand(frm.args.split()[0], dict(df.global_args))
            assert re.match(r"^[a-z0-9.-]+\.[a-z]+(:[0-9]+)?/[a-z0-9._-]+/[a-z0-9._/-]+:[A-Za-z0-9._-]+$", image), image


def test_migrate_image_is_python_slim_with_core_dependencies_only(migrate_df):
    """The app image: python slim, the package from /src with the extras its commands need
    (torch-free: the int8 ONNX embedder, not sentence-transformers)."""
    [frm] = migrate_df.all("FROM")
    assert expand(frm.args.split()[0], dict(migrate_df.global_args)) == "docker.io/library/python:3.11-slim"
    env = stage_env(migrate_df, {})
    assert env["PGMEM_ROOT"] == "/src" and env["PGMEM_EMBEDDER"] == "onnx"
    extras = image_extras(migrate_df)
    assert {"install", "onnx", "mcp", "web"} <= set(extras)
    defined = set(_pyproject()["project"]["optional-dependencies"])
    # [web] (pgmem serve) is issue 25's, in python/pgmem/web/: checked once it is in this checkout
    needed = set(extras) - ({"web"} if not (ROOT / "python" / "pgmem" / "web").is_dir() else set())
    assert needed <= defined, f"extras the image installs but pyproject.toml lacks: {needed - defined}"
    for heavy in ("[embed]", "[dev]", "torch", "sentence-transformers"):
        assert heavy not in "\n".join(i.args for i in migrate_df.instructions)


def test_migrate_image_copies_what_pgmem_migrate_reads(migrate_df, services):
    context, _ = build_of(services["migrate"])
    assert context == ROOT
    root = stage_env(migrate_df, {})["PGMEM_ROOT"]
    landed = {c.dest_of(s): s.rstrip("/") for c in copies(migrate_df, context) for s in c.sources}
    for item in ("pyproject.toml", "alembic.ini", "python", "sql", "migrations"):
        assert landed.get(f"{root}/{item}") == item, f"{item} is not copied to {root}/{item}"
    # pyproject.toml names README.md as the readme: a build without it fails
    m = re.search(r'^readme\s*=\s*"([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    if m:
        assert landed.get(f"{root}/{m.group(1)}") == m.group(1), f"{m.group(1)} is not copied"


# dockerignore: the subset of moby's patternmatcher semantics that the file uses
def _ignore_regex(pattern: str) -> re.Pattern:
    pattern = str(PurePosixPath(pattern.strip("/")))
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(f"^{out}$")


def _ignored(rel: str, rules: list[tuple[bool, re.Pattern]]) -> bool:
    parts = rel.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    excluded = False
    for negate, rx in rules:
        if any(rx.match(p) for p in prefixes):
            excluded = not negate
    return excluded


def test_migrate_dockerignore_sends_what_is_copied_and_not_the_venv(migrate_df, services):
    context, dockerfile = build_of(services["migrate"])
    ignore = dockerfile.with_name(dockerfile.name + ".dockerignore")
    assert ignore.is_file()
    rules = []
    for line in ignore.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            rules.append((line.startswith("!"), _ignore_regex(line.lstrip("!"))))
    for c in copies(migrate_df, context):
        for s in c.sources:
            src = source_path(context, s)
            files = [src] if src.is_file() else [p for p in src.rglob("*") if p.is_file()]
            for f in files:
                rel = f.relative_to(context).as_posix()
                if "__pycache__" in rel or rel.endswith(".pyc") or ".egg-info" in rel:
                    assert _ignored(rel, rules), rel
                    continue
                assert not _ignored(rel, rules), f"{rel} is copied but excluded from the context"
    for heavy in (".venv/bin/python", ".pgmem/data/PG_VERSION", "bench/bench.py", "tests/conftest.py"):
        assert _ignored(heavy, rules), heavy


# --------------------------------------------------------------------------- tests: docs
def test_readme_describes_every_file():
    readme = (DOCKER / "README.md").read_text()
    for f in sorted(DOCKER.rglob("*")):
        if f.is_file() and f.name != "README.md" and not f.name.startswith("."):
            rel = f.relative_to(DOCKER).as_posix()
            assert f"`{rel}`" in readme, f"docker/README.md does not describe {rel}"
    for topic in ("docker compose", "PGMEM_DSN", "existing PostgreSQL"):
        assert topic in readme


# --------------------------------------------------------------------------- tests: what the commands import
TRACER = """
import atexit, os, sys

_pgmem_importers = {}


class _PgmemImporters:
    # where each top-level module was first imported from (file and line of the import statement)
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top not in _pgmem_importers and top not in sys.modules:
            f = sys._getframe(1)
            while f is not None and (f.f_code.co_filename.startswith("<frozen") or "importlib" in f.f_code.co_filename):
                f = f.f_back
            if f is not None:
                _pgmem_importers[top] = (f.f_code.co_filename, f.f_lineno)
        return None


sys.meta_path.insert(0, _PgmemImporters())


def _pgmem_dump_imports():
    with open(os.environ["PGMEM_TRACE_IMPORTS"], "w") as f:
        for m in sorted({m.split(".")[0] for m in list(sys.modules)}):
            where = _pgmem_importers.get(m, ("", 0))
            f.write(f"{m}\\t{where[0]}\\t{where[1]}\\n")

atexit.register(_pgmem_dump_imports)
"""


def _optional(filename: str, line: int) -> bool:
    """Whether the import at filename:line sits in a ``try`` that catches ImportError (or
    ModuleNotFoundError): a library's optional speed-up (orjson for FastAPI, websockets for
    uvicorn), which an image without it runs without. pgmem's own guarded imports are not
    optional: they turn a missing extra into an error that names it."""
    import ast

    if Path(filename).resolve().is_relative_to(ROOT / "python"):
        return False
    try:
        tree = ast.parse(Path(filename).read_text())
    except (OSError, SyntaxError, ValueError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and node.body and node.body[0].lineno <= line <= node.body[-1].end_lineno:
            for h in node.handlers:
                names = [h.type] if not isinstance(h.type, ast.Tuple) else list(h.type.elts)
                if any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError") for n in names):
                    return True
    return False


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_by(extras: list[str]) -> set[str]:
    """The distributions ``pip install 'pgmem-agent[extras]'`` installs: pyproject.toml's core
    dependencies and those extras, then each one's own requirements (as installed here), with
    their markers and extras evaluated."""
    from importlib import metadata

    from packaging.requirements import Requirement

    project = _pyproject()["project"]
    todo = [(Requirement(r), frozenset()) for r in project["dependencies"]]
    for e in extras:
        todo += [(Requirement(r), frozenset()) for r in project["optional-dependencies"].get(e, [])]
    seen: set[str] = set()
    done: set[tuple[str, frozenset]] = set()
    while todo:
        req, _ = todo.pop()
        name = _norm(req.name)
        if name == "pgmem-agent":  # an extra naming others of pyproject.toml
            for e in req.extras:
                todo += [(Requirement(r), frozenset()) for r in project["optional-dependencies"].get(e, [])]
            continue
        key = (name, frozenset(req.extras))
        if key in done:
            continue
        done.add(key)
        seen.add(name)
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            continue
        for raw in dist.requires or []:
            sub = Requirement(raw)
            envs = [{"extra": x} for x in (req.extras or {""})]
            if sub.marker is None or any(sub.marker.evaluate(env) for env in envs):
                todo.append((sub, frozenset()))
    return seen


def _run_traced(args: list[str], env: dict, tmp_path, *, until: str | None = None) -> set[str]:
    """Runs a pgmem command here with its imports recorded; returns the top-level modules."""
    import signal
    import time

    tracer_dir = tmp_path / "tracer"
    tracer_dir.mkdir(exist_ok=True)
    (tracer_dir / "sitecustomize.py").write_text(TRACER)
    out = tmp_path / f"imports-{args[0]}.txt"
    e = {**{k: v for k, v in os.environ.items() if not k.startswith("PGMEM_")}, **env,
         "PYTHONPATH": f"{tracer_dir}:{ROOT / 'python'}", "PGMEM_TRACE_IMPORTS": str(out),
         "PGMEM_EMBEDDER": "onnx", "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "pgmem.cli", *args]
    if until is None:
        p = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=300, stdin=subprocess.DEVNULL)
        assert p.returncode == 0, (args, p.stderr)
    else:  # a server: until it says it is up, then an interrupt (atexit runs)
        import threading

        p = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=e)
        lines: list[str] = []
        threading.Thread(target=lambda: lines.extend(p.stderr), daemon=True).start()  # a full pipe never blocks it
        deadline = time.monotonic() + 240
        while not any(until in x for x in lines) and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.05)
        p.send_signal(signal.SIGINT)
        p.wait(timeout=120)  # it stops within 5 s (tests/test_shutdown.py times that; here only the imports matter)
        seen = "".join(lines)
        assert until in seen, seen
    modules = set()
    for row in out.read_text().splitlines():
        name, filename, line = row.split("\t")
        if not (filename and _optional(filename, int(line))):
            modules.add(name)
    return modules


def _distributions(modules: set[str]) -> dict[str, list[str]]:
    from importlib.metadata import packages_distributions

    by_module = packages_distributions()
    return {m: [_norm(d) for d in by_module[m]] for m in modules
            if m in by_module and m not in sys.stdlib_module_names and m not in ("pgmem", "sitecustomize")}


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("service", APP_SERVICES)
def test_each_image_installs_what_its_command_imports(service, services, migrate_df, fresh_db, tmp_path):
    """Each pgmem process of compose.yaml, run here against a real database with its imports
    recorded: every distribution it imported is installed by the image's extras. (The base images
    cannot be pulled on these machines, so no engine builds them here; app.Dockerfile also imports
    the modules at build time.)"""
    cmd = _command(services[service], migrate_df)[1:]
    from pgmem.cli import build_parser

    if cmd[0] not in build_parser()._subparsers._group_actions[0].choices:
        pytest.skip(f"pgmem {cmd[0]} is not in this checkout yet (issue 25's python/pgmem/web/ brings it)")
    dsn = fresh_db(template=None) if service == "migrate" else fresh_db()
    env = {"PGMEM_DSN": dsn, "PGMEM_TENANT": "acme"}
    if service == "migrate":
        modules = _run_traced(cmd, env, tmp_path)
    elif service == "schedule":
        modules = _run_traced(cmd, env, tmp_path)
        subprocess.run([sys.executable, "-m", "pgmem.cli", "jobs", "unschedule"], env={**os.environ, **env,
                       "PYTHONPATH": str(ROOT / "python")}, capture_output=True, timeout=120)
    elif service == "worker":
        import psycopg

        with psycopg.connect(dsn, autocommit=True, options="-c pgmem.tenant=acme") as c:
            c.execute("select pgmem.remember('a memory for the worker to embed')")
        modules = _run_traced([*cmd, "--once"], env, tmp_path)
        assert "onnxruntime" in modules  # it embedded with the image's model
    else:
        tokens = tmp_path / "tokens.json"
        subprocess.run([sys.executable, "-m", "pgmem.cli", "mcp", "--new-token", "--tenant", "acme", "--tokens",
                        str(tokens)], env={**os.environ, **env, "PYTHONPATH": str(ROOT / "python")},
                       capture_output=True, timeout=120, check=True)
        port = _free_port()
        args = [a if a != "0.0.0.0" else "127.0.0.1" for a in cmd]
        args = [*args[:args.index("--port") + 1], str(port), *args[args.index("--port") + 2:]] if "--port" in args else args
        modules = _run_traced([*args, "--tokens", str(tokens)], env, tmp_path, until="pgmem serve:")
    dists = _distributions(modules)
    installed = installed_by(image_extras(migrate_df))
    missing = {m: d for m, d in dists.items() if not set(d) & installed}
    assert not missing, f"pgmem {' '.join(cmd)} imports {missing}, which {migrate_df.path.name}'s extras do not install"
