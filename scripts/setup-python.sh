#!/usr/bin/env bash
# Builds and installs the tclm Python package (./python: the extension tclm._tclm on the libtorch-free
# core, docs/python.md) into the venv .venv-tvm, creating the venv if it is missing, plus numpy and
# pytest. The build is incremental: it reuses ./build-python-<venv name> (CMake build directory).
#   TCLM_VENV=DIR                 another venv directory (default .venv-tvm)
#   CMAKE_BUILD_PARALLEL_LEVEL=N  compile jobs (default: nproc)
#   TCLM_NO_TVM=1                 do not install TVM (python/requirements-tvm.txt: apache-tvm 0.26 for
#                                 the MetaSchedule adapter, tclm collect and tune-bench, with XGBoost:
#                                 the venv takes ~1.5 GB)
#   --quiet                       print only errors
# Needs the core's Debian packages (scripts/setup.sh: simdjson, zlib, fmt, faiss, BLAS/LAPACK, OpenMP)
# and, the first time, network access to PyPI for numpy, pytest, pybind11 and scikit-build-core.
set -euo pipefail
cd "$(dirname "$0")/.."
quiet=()
if [ "${1:-}" = --quiet ]; then quiet=(-q); fi
say() { [ ${#quiet[@]} -gt 0 ] || echo "setup-python: $*" >&2; }

bash scripts/setup.sh
venv=${TCLM_VENV:-.venv-tvm}
# Debian's python3 needs python3-venv for the venv and python3-dev for the extension's headers.
if [ ! -x "$venv/bin/python" ] && ! python3 -c 'import venv, ensurepip' 2>/dev/null ||
   ! python3 -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_path("include"), "Python.h")))'; then
  if [ "$(command -v python3)" = /usr/bin/python3 ]; then
    say "installing python3-venv python3-dev"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv python3-dev >/dev/null
  fi
fi
if [ ! -x "$venv/bin/python" ]; then
  say "creating the venv $venv"
  python3 -m venv "$venv"
fi
py="$venv/bin/python"
# Build requirements are installed in the venv and the build runs there without isolation, so that
# the build directory stays valid from one run to the next (an isolated build uses new temporary paths).
# Debian 12's venv seeds pip 23.0, which lacks -C/--config-settings for a PEP 517 build: upgrade first.
"$py" -m pip install "${quiet[@]}" --disable-pip-version-check --upgrade "pip>=23.1"
"$py" -m pip install "${quiet[@]}" --disable-pip-version-check numpy pytest "pybind11>=2.12" "scikit-build-core>=0.10"
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}
bdir="$PWD/build-python-$(basename "$venv")"
say "building and installing ./python into $venv (build directory $bdir)"
start=$SECONDS
"$py" -m pip install "${quiet[@]}" --disable-pip-version-check --no-build-isolation \
  -C build-dir="$bdir" ./python
"$py" -c 'import tclm; print(f"setup-python: tclm {tclm.__version__} installed ({tclm.__file__})")' >&2
if [ -z "${TCLM_NO_TVM:-}" ]; then
  say "installing TVM (python/requirements-tvm.txt)"
  "$py" -m pip install "${quiet[@]}" --disable-pip-version-check -r python/requirements-tvm.txt
fi
say "done in $((SECONDS - start)) s"
