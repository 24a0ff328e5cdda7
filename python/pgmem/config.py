"""Where pgmem finds its database, files and settings.

Precedence for the DSN: explicit argument > ``PGMEM_DSN`` > the embedded cluster under
``PGMEM_HOME`` (default ``<project>/.pgmem``)."""
from __future__ import annotations

import os
from typing import TypedDict
from pathlib import Path

from .errors import ConfigError

PACKAGE_DIR = Path(__file__).resolve().parent
#: The name on PyPI ("pgmem" and "pgmemory" are other projects); import name and command: pgmem.
DISTRIBUTION = "pgmem-agent"


def project_root() -> Path:
    """The checkout that holds ``sql/`` and ``migrations/`` (``PGMEM_ROOT`` overrides).

    Raises ConfigError outside a checkout (an installed wheel): use :func:`sql_dir` and
    :func:`migrations_dir`, which fall back on the copies the wheel carries."""
    env = os.environ.get("PGMEM_ROOT")
    if env:
        return Path(env).resolve()
    # python/pgmem/config.py -> project root is two levels above the package
    root = PACKAGE_DIR.parent.parent
    if (root / "sql").is_dir() and (root / "migrations").is_dir():
        return root
    raise ConfigError(
        f"cannot find pgmem's sql/ and migrations/ next to the package ({root}); "
        "set PGMEM_ROOT to the pgmem checkout"
    )


def _packaged(name: str) -> Path:
    """A directory the wheel carries inside the package (``pgmem/sql``, ``pgmem/migrations``;
    pyproject.toml maps the repository's top-level directories there), read with
    importlib.resources. Wheels install as plain files, so the resource is a real directory."""
    from importlib.resources import files

    resource = files("pgmem") / name
    path = Path(str(resource))
    if not path.is_dir():
        raise ConfigError(
            f"this pgmem installation has no {name}/ (looked in {path}): reinstall the package, "
            "or set PGMEM_ROOT to a pgmem checkout"
        )
    return path


def _lane_dir(name: str) -> Path:
    """``sql`` or ``migrations``: from PGMEM_ROOT or the checkout, else from the wheel."""
    try:
        return project_root() / name
    except ConfigError:
        return _packaged(name)


def sql_dir() -> Path:
    """The idempotent lane (``sql/*.sql``); ``PGMEM_SQL_DIR`` overrides."""
    env = os.environ.get("PGMEM_SQL_DIR")
    return Path(env) if env else _lane_dir("sql")


def migrations_dir() -> Path:
    """The Alembic revisions (``migrations/``, with ``env.py`` and ``versions/``)."""
    return _lane_dir("migrations")


def home() -> Path:
    """Directory of the embedded cluster and its state."""
    env = os.environ.get("PGMEM_HOME")
    if env:
        return Path(env).resolve()
    return Path.cwd().resolve() / ".pgmem" if not _in_checkout() else project_root() / ".pgmem"


def _in_checkout() -> bool:
    try:
        project_root()
        return True
    except ConfigError:
        return False


def int_env(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not an integer") from None


def embedding_dim() -> int:
    """Dimension of the embedding column, fixed at install (384 = all-MiniLM-L6-v2)."""
    dim = int_env("PGMEM_EMBEDDING_DIM", 384)
    if not 1 <= dim <= 16000:
        raise ConfigError(f"PGMEM_EMBEDDING_DIM={dim} is outside 1..16000 (pgvector's limit)")
    return dim


# pgmem serve (issue 25): the chat LLM, under the names seeds/shadow-memory-system.md gives them
# ("Environment Variables"; OPENAI_BASE_URL as OpenAI's own SDK names it), and the server's limits.
def openai_settings() -> dict[str, str | None]:
    """OPENAI_API_KEY (none), OPENAI_MODEL (gpt-4o-mini), OPENAI_BASE_URL (https://api.openai.com/v1),
    OPENAI_EMBEDDING_MODEL (openai/text-embedding-3-small) and OPENAI_EMBEDDING_DIMENSIONS (none:
    the model's, 1536), the four names of the design and OpenAI SDK's base URL (issue 36, S37).
    The embedder reads the last two (pgmem.embedding.http; OPENAI_EMBEDDING_MODEL set selects it)."""
    return {"api_key": os.environ.get("OPENAI_API_KEY", "").strip() or None,
            "model": os.environ.get("OPENAI_MODEL", "").strip() or "gpt-4o-mini",
            "base_url": os.environ.get("OPENAI_BASE_URL", "").strip() or "https://api.openai.com/v1",
            "embedding_model": os.environ.get("OPENAI_EMBEDDING_MODEL", "").strip() or "openai/text-embedding-3-small",
            "embedding_dimensions": os.environ.get("OPENAI_EMBEDDING_DIMENSIONS", "").strip() or None}


class WebSettings(TypedDict):
    cors_origins: list[str]
    max_body_bytes: int


def web_settings() -> WebSettings:
    """PGMEM_WEB_CORS_ORIGINS (comma-separated; none: CORS off), PGMEM_WEB_MAX_BODY_BYTES (1 MiB)."""
    origins = [o.strip() for o in os.environ.get("PGMEM_WEB_CORS_ORIGINS", "").split(",") if o.strip()]
    return {"cors_origins": origins, "max_body_bytes": int_env("PGMEM_WEB_MAX_BODY_BYTES", 1 << 20)}


def env_text(name: str) -> str | None:
    """A setting's text, stripped; None when unset or blank."""
    raw = os.environ.get(name, "").strip()
    return raw or None


def tenant_claim() -> str | None:
    """``PGMEM_TENANT_CLAIM``: a signed tenant claim the CLI and MCP use instead of a tenant
    (SECURITY.md, "A shared application role")."""
    return env_text("PGMEM_TENANT_CLAIM")
