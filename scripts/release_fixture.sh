#!/usr/bin/env bash
# A released version of pgmem as a small tarball for the upgrade test (tests/test_upgrade.py):
# the parts that install it (sql/, migrations/, python/pgmem/, alembic.ini) at a git tag.
# CI clones main afresh and may have neither tags nor history, so the test reads this file,
# never git. Make one per release:  scripts/release_fixture.sh v0.1.0
# v0.1.0 is main at 00608cc (the state before issue 18's session): git tag v0.1.0 00608cc
set -euo pipefail
tag="${1:?usage: scripts/release_fixture.sh <tag>  (e.g. v0.1.0)}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$root/tests/fixtures/pgmem-$tag.tar.gz"
git -C "$root" rev-parse -q --verify "refs/tags/$tag" >/dev/null \
  || { echo "no tag $tag here (v0.1.0: git tag v0.1.0 00608cc)" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
git -C "$root" archive --format=tar.gz --prefix="pgmem-$tag/" -o "$out" "$tag" sql migrations python/pgmem alembic.ini
echo "$out ($(du -k "$out" | cut -f1) KiB, $(git -C "$root" rev-parse --short "$tag^{commit}"))"
