#!/usr/bin/env bash
# Rebuilds data/records from ../shared/data (documentation of how the embedded data was chosen;
# not needed to build or test). Selection: the Roller (OSDI'22, MIT) single-operator Ansor logs whose
# file name exists for all three GPUs (K80, V100, MI50), every second one in sorted order, copied
# byte-identically (gzip). See data/README.md for provenance and licenses.
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:-../shared/data/roller_osdi22}
rm -rf data/records
common=$(comm -12 <(cd "$src/k80" && find . -name '*.gz' | sort) <(cd "$src/v100" && find . -name '*.gz' | sort) |
         comm -12 - <(cd "$src/mi50" && find . -name '*.gz' | sort) | awk 'NR % 2 == 1')
for gpu in k80 v100 mi50; do
  for f in $common; do
    mkdir -p "data/records/$gpu/$(dirname "$f")"
    cp "$src/$gpu/$f" "data/records/$gpu/$f"
  done
done
echo "$(echo "$common" | wc -l) files per GPU; $(du -sh data/records | cut -f1) in data/records"
