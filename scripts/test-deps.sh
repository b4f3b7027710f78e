#!/usr/bin/env bash
# Installs the Debian packages the integration tests need, only when one is
# missing: `apt-get update` once, then `apt-get install -y`. The tests meet a
# real ROS master, MQTT broker, browser and promtool; they fail (never skip)
# when a part is missing, so this runs before them.
set -euo pipefail

have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

missing=()
for p in "$@"; do
  have_pkg "$p" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "test-deps: all present ($*)"
  exit 0
fi
echo "test-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
