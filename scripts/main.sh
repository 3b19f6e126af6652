#!/usr/bin/env bash
# The main job: installs dependencies, builds, and runs the whole TCL pipeline (tclm transfer) on the
# embedded data (data/records: Roller's Ansor logs of a K80, a V100 and an MI50): learn the K80 and
# the V100 one after the other with continual knowledge distillation, let the RDU sampler choose 10%
# of the MI50's programs to "measure", learn the MI50 from them, and print every platform's top-1 /
# top-5 on held-out workloads next to the baselines (a model trained on the MI50's 10% alone,
# fine-tuning a source model, all MI50 data). Outputs in out/main/: kb.tclm (the deployable
# knowledge base), transfer.md, phases.csv, transfer.json, transfer.png.
# Extra arguments go to `tclm transfer` (see `build/tclm transfer --help`). Timed only next to other
# jobs (24 min with one thread next to another job on 2 cores, 2026-12-01).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec ./build/tclm transfer --sources k80,v100 --target mi50 --budget 0.1 \
  --methods tcl,target-only,finetune,full --epochs-cl 4 --epochs-kd 4 --epochs 6 -o out/main "$@"
