#!/usr/bin/env bash
# Installs tclm's build dependencies from Debian's packages (Debian 12). Idempotent: does nothing
# when everything is already installed. Run as root (or with sudo available).
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config
  libtorch-dev            # training (libtorch 1.13, CPU)
  libgloo-dev             # headers of the Gloo library libtorch's c10d runs on (data-parallel training)
  libopenblas0-pthread    # without it libtorch falls back to the reference BLAS (~30x slower)
  libopenblas-dev
  libsimdjson-dev         # record parsing
  zlib1g-dev              # gzip records, CRC-32
  libcli11-dev libfmt-dev # CLI, formatting
  nlohmann-json3-dev      # JSON outputs
  ccache                  # compiler cache for rebuilds (used when present)
  libgtest-dev libgmock-dev libbenchmark-dev
  libxgboost-dev          # the XGBoost baseline (tclm compare; what TVM's tuners use by default)
  python3-matplotlib      # PNG plots of the study commands (tools/plot_results.py)
  libfaiss-dev            # k-means of the RDU active sampler (src/sample)
  python3-venv python3-dev  # the Python package's venv and extension headers (scripts/setup-python.sh)
)

exec bash "$(dirname "$0")/apt-install.sh" setup "${PACKAGES[@]}"
