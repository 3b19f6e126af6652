#!/usr/bin/env bash
# Makes the venv .venv-ansor for the Ansor adapter (tclm.ansor): TVM 0.19 with auto_scheduler from
# PyPI (python/requirements-ansor.txt: the third-party xtc-tvm-python-bindings wheels) and the tclm
# package. Separate from .venv-tvm because both TVMs install a module named `tvm`.
#   TCLM_ANSOR_VENV=DIR  another venv directory (default .venv-ansor)
#   --quiet              print only errors
# Needs network access to PyPI (about 1.6 GB installed) and the core's Debian packages (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
quiet=()
if [ "${1:-}" = --quiet ]; then quiet=(-q); fi
venv=${TCLM_ANSOR_VENV:-.venv-ansor}
# The venv and the package build are the same as for .venv-tvm, without apache-tvm.
TCLM_VENV=$venv TCLM_NO_TVM=1 bash scripts/setup-python.sh "$@"
"$venv/bin/python" -m pip install "${quiet[@]}" --disable-pip-version-check -r python/requirements-ansor.txt
"$venv/bin/python" -c 'import tvm, tvm.auto_scheduler; print(f"setup-ansor: TVM {tvm.__version__} with auto_scheduler")' >&2
