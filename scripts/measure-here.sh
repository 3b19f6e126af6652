#!/usr/bin/env bash
# Measures this machine as a platform of data/measured (data/measured/README.md), with one command:
# the random program pools (256 programs per task, Ansor's sketch sampling, seed 0) of the tasks of
# resnet-50 and squeezenet that are not in resnet-18 or mobilenet (44 tasks on x86), every program
# measured, then 8 programs per task measured again for the run-to-run noise, then the export into
# data/measured/<platform>/. Hours on 2 cores: run it on an idle machine, in the background; it resumes
# where it stopped when run again (the work directory keeps the plain records). Extra arguments go to
# `tclm collect` (e.g. --cores 8).
#   TCLM_MEASURE_WORK=DIR  work directory (default out/measured-here)
set -euo pipefail
cd "$(dirname "$0")/.."
work=${TCLM_MEASURE_WORK:-out/measured-here}
[ -x build/tclm ] || bash scripts/build.sh
[ -x .venv-ansor/bin/python ] || bash scripts/setup-ansor.sh --quiet
args=(collect --scheduler ansor --networks resnet-50,squeezenet --exclude-networks resnet-18,mobilenet --pool 256
      --budget 1 --out "$work")
build/tclm "${args[@]}" "$@"
build/tclm "${args[@]}" --remeasure 8 "$@"
python3 scripts/export-measured.py "$work"
