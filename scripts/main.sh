#!/usr/bin/env bash
# The main job: installs dependencies, builds, trains a Mamba cost model on the embedded data
# (data/records: Roller's Ansor logs of two GPUs) and prints top-1/top-5 on held-out tasks next to
# a random ranking of the same tasks. Extra arguments go to `tclm train` (see `build/tclm train --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec ./build/tclm train --out out/main "$@"
