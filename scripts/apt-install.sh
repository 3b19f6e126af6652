#!/usr/bin/env bash
# Installs the given Debian packages that are not installed yet (idempotent: does nothing when all are).
# Usage: scripts/apt-install.sh LABEL PACKAGE...   (LABEL prefixes the message, e.g. "setup")
# Runs apt-get as root, or through sudo.
set -euo pipefail
label=$1
shift
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "$label: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
