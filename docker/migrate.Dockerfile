# syntax=docker/dockerfile:1
#
# pgmem migrate image: the pgmem Python package with its core dependencies only (psycopg,
# SQLAlchemy, Alembic, numpy, ...; no sentence-transformers/torch), plus the SQL and the
# Alembic revisions it applies. Its default command installs or upgrades pgmem in the
# database named by PGMEM_DSN:
#
#   docker build -f docker/migrate.Dockerfile -t pgmem-migrate .      (context: repo root)
#   docker run --rm -e PGMEM_DSN=postgresql://user:pw@host:5432/pgmem pgmem-migrate
#
# The entrypoint is the `pgmem` command, so other subcommands work too, e.g.
#   docker run --rm -e PGMEM_DSN=... pgmem-migrate migrate --downgrade base
# migrate.Dockerfile.dockerignore keeps the build context to the files copied below (no .venv,
# no .pgmem data directories).

ARG PYTHON_IMAGE=python:3.11-slim
FROM ${PYTHON_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PGMEM_ROOT=/src

WORKDIR /src
# pyproject.toml names README.md as the package's readme: the build needs it.
COPY pyproject.toml README.md alembic.ini /src/
COPY python/ /src/python/
COPY sql/ /src/sql/
COPY migrations/ /src/migrations/

# A regular (non-editable) install of the core package: no [embed] extra. PGMEM_ROOT tells
# the installed package where sql/, migrations/ and alembic.ini are.
RUN set -eux; \
    pip install /src; \
    pgmem --help > /dev/null; \
    python -c "from pgmem.config import sql_dir, migrations_dir; assert any(sql_dir().glob('*.sql')); assert (migrations_dir() / 'env.py').is_file()"; \
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin pgmem

USER pgmem
ENTRYPOINT ["pgmem"]
CMD ["migrate"]
