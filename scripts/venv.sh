#!/usr/bin/env bash
# Prints the path of the project's Python virtual environment, making it first when it is missing:
# exactly the packages of requirements-dev.txt, installed with pip into
#   ${REMAT_VENV:-${XDG_CACHE_HOME:-~/.cache}/remat/venv-HASH}
# outside the clone, HASH naming requirements-dev.txt and the interpreter, so an unchanged file
# reuses the environment (a fresh clone too) and a changed one makes a new one. The interpreter
# is Debian's /usr/bin/python3 (python3-venv, python3-dev; scripts/setup.sh installs them), or
# REMAT_BASE_PYTHON. An environment counts only once its marker file is written, after every
# package installed: an interrupted run leaves one that the next run removes and makes again.
# Environments of other hashes unused for 7 days are removed when a new one is made.
#   ./scripts/venv.sh                       # the path; progress goes to stderr
#   "$(./scripts/venv.sh)/bin/python" -m pytest ...
set -euo pipefail
cd "$(dirname "$0")/.."
requirements=$PWD/requirements-dev.txt
base_python=${REMAT_BASE_PYTHON:-/usr/bin/python3}
if [ ! -x "$base_python" ]; then
  echo "venv: $base_python not found (apt-get install python3-venv, or set REMAT_BASE_PYTHON)" >&2
  exit 2
fi
key=$({ cat "$requirements"; "$base_python" -c 'import sys; print(sys.version, sys.executable)'; } |
  sha256sum | cut -c1-16)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/remat
venv=${REMAT_VENV:-$cache/venv-$key}
marker=$venv/.remat-complete  # holds the key of the finished environment

is_complete() { [ -f "$marker" ] && [ "$(cat "$marker")" = "$key" ]; }

if ! is_complete; then
  mkdir -p "$(dirname "$venv")"
  exec 9>"$venv.lock"
  flock 9  # another run making the same environment: wait for it, then use what it made
  if ! is_complete; then
    if [ -e "$venv" ] && [ ! -f "$venv/.remat-incomplete" ] && [ ! -f "$marker" ]; then
      echo "venv: $venv exists but was not made by scripts/venv.sh; remove it or choose another path (REMAT_VENV)" >&2
      exit 2
    fi
    echo "venv: making $venv from $requirements (a few minutes, once)" >&2
    start=$SECONDS
    rm -rf "$venv"
    mkdir -p "$venv"
    echo "$key" >"$venv/.remat-incomplete"
    "$base_python" -m venv "$venv"
    "$venv/bin/python" -m pip install --disable-pip-version-check --no-input --progress-bar off \
      -r "$requirements" >&2
    rm "$venv/.remat-incomplete"
    echo "$key" >"$marker"
    echo "venv: made in $((SECONDS - start)) s" >&2
    if [ -z "${REMAT_VENV:-}" ]; then  # other hashes' environments unused for a week
      find "$cache" -mindepth 2 -maxdepth 2 -path "$cache/venv-*/.remat-complete" -mtime +7 \
        -printf '%h\n' | while read -r old; do
        [ "$old" = "$venv" ] && continue
        echo "venv: removing $old (unused for 7 days)" >&2
        rm -rf "$old" "$old.lock"
      done
    fi
  fi
  exec 9>&-
fi
touch "$marker"  # last use, for the clean-up above
echo "$venv"
