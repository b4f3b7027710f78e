#!/usr/bin/env bash
# Installs the npm packages the tests drive for real — the official MCP
# TypeScript SDK (testdata/mcp) and axe-core (testdata/console), which the
# console's accessibility test injects into the page — from the npm
# registry, pinned by each folder's package-lock.json, into its git-ignored node_modules. It runs
# `npm ci` only when node_modules is missing or older than the lock file,
# so a second `make test` does not touch the network. Without Node.js it
# installs Debian's nodejs and npm first (as test-deps.sh installs the
# other real parts); if that is impossible the tests that need it fail
# with the install command, they never skip.
set -euo pipefail
cd "$(dirname "$0")/.."

dirs=("$@")
if [ ${#dirs[@]} -eq 0 ]; then dirs=(testdata/mcp testdata/console); fi

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  ./scripts/test-deps.sh nodejs npm
fi

for d in "${dirs[@]}"; do
  lock="$d/package-lock.json"
  stamp="$d/node_modules/.package-lock.json"
  if [ -f "$stamp" ] && [ "$stamp" -nt "$lock" ]; then
    echo "test-npm: $d is up to date"
    continue
  fi
  echo "test-npm: npm ci in $d"
  (cd "$d" && npm ci --no-audit --no-fund --loglevel=error)
done
