#!/usr/bin/env bash
# python-venv.sh [VENV_DIR]: makes (or brings up to date) the test suite's Python virtual
# environment from python/requirements-test.txt (pinned versions; PyPI), default
# build-venv/ in the source tree, and prints its python's path last. Idempotent: a venv whose
# stamp matches the requirements file is left as it is. The system Python is never touched.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:-$root/build-venv}
requirements=$root/python/requirements-test.txt
stamp=$venv/.cgemm-requirements
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$requirements" "$stamp"; then
  echo "python-venv: $venv is up to date" >&2
  echo "$venv/bin/python"
  exit 0
fi
start=$SECONDS
rm -rf "$venv"
python3 -m venv "$venv" >&2 || {
  echo "python-venv: error: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2
  exit 1
}
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir \
  -r "$requirements" >&2
cp "$requirements" "$stamp"
echo "python-venv: $venv made in $((SECONDS - start)) s ($(du -sh "$venv" | cut -f1))" >&2
echo "$venv/bin/python"
