#!/usr/bin/env bash
# The main job: installs dependencies, builds, trains a Mamba cost model on the embedded data
# (data/records: Roller's Ansor logs of a K80, a V100 and an MI50) and prints top-1/top-5 on
# held-out workloads next to a random ranking of the same tasks. Extra arguments go to
# `tclm train` (see `build/tclm train --help`); the default here is 10 epochs (~4 min on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
args=("$@")
case " $* " in *" --epochs "*|*" --epochs="*) ;; *) args=(--epochs 10 "${args[@]}") ;; esac
exec ./build/tclm train --out out/main "${args[@]}"
