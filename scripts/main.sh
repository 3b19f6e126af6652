#!/usr/bin/env bash
# The main job: installs dependencies, builds, and runs the whole TCL pipeline (tclm transfer) on the
# embedded data (data/records: Roller's Ansor logs of a K80, a V100 and an MI50): learn the K80 and
# the V100 one after the other with continual knowledge distillation, let the RDU sampler choose 10%
# of the MI50's programs to "measure", learn the MI50 from them (the knowledge base distilled on all
# of the MI50's training programs, whose labels it never reads), and print every platform's top-1 /
# top-5 on held-out workloads next to the baselines (a model trained on the MI50's 10% alone, and
# fine-tuning a model of the sources on it). Outputs in out/main/: kb.tclm (the deployable knowledge
# base), transfer.md, phases.csv, test_tasks.csv, transfer.json, transfer.png.
#
# By default a short run that shows the whole pipeline (fewer epochs and steps, the sources' training
# tasks at 30% of their programs, one seed: no paired verdict); its figures are a demonstration, not
# the study's. It takes a few minutes on 2 cores (2-vCPU AMD EPYC VM: 3 min 27 s, 265 s user + 140 s
# system CPU time).
#   scripts/main.sh --full   the study's configuration: all source programs, 6 CL / 4 KD epochs, 6
#                            epochs per baseline, at least 150 steps per phase, and all the MI50's
#                            data as a further baseline (about 25 minutes on 2 cores with 4 CL
#                            epochs; not timed with 6)
# Other arguments go to `tclm transfer` after these (see `build/tclm transfer --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
full=0
if [ "${1:-}" = "--full" ]; then
  full=1
  shift
fi
bash scripts/build.sh
common=(--sources k80,v100 --target mi50 --budget 0.1 -o out/main)
if [ "$full" = 1 ]; then
  exec ./build/tclm transfer "${common[@]}" --methods tcl,target-only,finetune,full \
    --epochs-cl 6 --epochs-kd 4 --epochs 6 "$@"
fi
exec ./build/tclm transfer "${common[@]}" --methods tcl,target-only,finetune \
  --source-fraction 0.3 --epochs-cl 3 --epochs-kd 2 --epochs 3 --min-steps 40 "$@"
