#!/usr/bin/env bash
# Runs the Python package's tests with pytest in the venv .venv-tvm (scripts/setup-python.sh makes it).
# Arguments go to pytest (default: python/tests).
#   --skip-code N   exit status when the tests cannot run (default 0; CTest's python.core uses 77,
#                   its SKIP_RETURN_CODE, so that it shows as skipped)
#   --require MOD   skip (as above) unless module MOD imports in the venv (e.g. tvm.s_tir.meta_schedule)
#   TCLM_VENV=DIR   another venv (default .venv-tvm)
#   TCLM_BIN=PATH   the tclm command-line tool the Engine tests train a model with (default: build/tclm
#                   when it exists; those tests skip when no tool is found)
# Without the venv, pytest or the installed tclm package it prints "SKIPPED: <why>" and exits.
set -euo pipefail
cd "$(dirname "$0")/.."
skip_code=0
if [ "${1:-}" = --skip-code ]; then
  skip_code=$2
  shift 2
fi
require=""
if [ "${1:-}" = --require ]; then
  require=$2
  shift 2
fi
venv=${TCLM_VENV:-.venv-tvm}
py="$venv/bin/python"
if [ ! -x "$py" ]; then
  echo "SKIPPED: no Python venv at $venv (run scripts/setup-python.sh to build the tclm package)"
  exit "$skip_code"
fi
if ! "$py" -c 'import pytest' 2>/dev/null; then
  echo "SKIPPED: pytest is not installed in $venv (run scripts/setup-python.sh)"
  exit "$skip_code"
fi
if ! err=$("$py" -c 'import tclm._tclm' 2>&1); then
  echo "SKIPPED: the tclm package is not importable in $venv (run scripts/setup-python.sh): ${err##*$'\n'}"
  exit "$skip_code"
fi
if [ -n "$require" ] && ! err=$("$py" -c "import $require" 2>&1); then
  echo "SKIPPED: $require is not importable in $venv (scripts/setup-python.sh / setup-ansor.sh install it): ${err##*$'\n'}"
  exit "$skip_code"
fi
if [ -z "${TCLM_BIN:-}" ] && [ -x build/tclm ]; then
  export TCLM_BIN=$PWD/build/tclm
fi
[ $# -gt 0 ] || set -- python/tests
exec "$py" -m pytest -q -p no:cacheprovider "$@"
