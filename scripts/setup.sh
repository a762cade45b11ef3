#!/usr/bin/env bash
# Set up everything gradmagic needs on a fresh machine: Graphviz's `dot`,
# bubblewrap (`bwrap`, the sandbox of gradmagic.grade) and, for the browser
# tests, Chromium from the system's packages, then a
# virtual environment in .venv with the package and the extras asked for.
#   scripts/setup.sh [EXTRAS] [--browser]     e.g. scripts/setup.sh test,torch,bench --browser
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-lab}"
browser="${2:-}"

need=()
command -v dot >/dev/null 2>&1 || need+=(graphviz)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
if [ "$browser" = "--browser" ] && [ ! -x /usr/bin/chromium ]; then need+=(chromium); fi
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing system packages: ${need[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${need[@]}" >/dev/null
fi

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
# installed once: the install is editable (code changes need no reinstall), so it is redone only
# when pyproject.toml or this script changed, or other extras are asked for
stamp=".venv/.gradmagic-installed-${extras//,/-}"
if [ -f "$stamp" ] && [ "$stamp" -nt pyproject.toml ] && [ "$stamp" -nt "$0" ]; then
  exit 0
fi
echo "setup: installing gradmagic[$extras] into .venv"
log=".venv/pip.log"
# (pip's and setuptools' messages go to the log; shown only if the install fails)
torch_first=true
case ",$extras," in
  # the torch extra is a range; the CPU build the project is tested with goes in first, so
  # that pip does not pick a newer (CUDA) build to satisfy it
  *,torch,*) torch_first=".venv/bin/python -m pip install -q ${TORCH_SPEC:-torch==2.13.0}" ;;
esac
if ! { .venv/bin/python -m pip install -q --upgrade pip && $torch_first && \
       .venv/bin/python -m pip install -q -e ".[$extras]"; } >"$log" 2>&1; then
  cat "$log" >&2
  exit 1
fi
touch "$stamp"
