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
echo "setup: installing gradmagic[$extras] into .venv"
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
case ",$extras," in
  *,torch,*)
    # the torch extra is a range; pin the CPU build the project is tested with first, so
    # that pip does not pick a newer (CUDA) build to satisfy it
    .venv/bin/python -m pip install -q "${TORCH_SPEC:-torch==2.13.0}" ;;
esac
.venv/bin/python -m pip install -q -e ".[$extras]"
