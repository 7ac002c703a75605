#!/usr/bin/env bash
# Installs what the browser tests drive: Debian's Chromium (the tests install playwright-core
# from npm themselves, as the real agent tests install the agents). Idempotent; needs root.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends chromium >/dev/null 2>&1 \
    || { apt-get update >/dev/null && apt-get install -y --no-install-recommends chromium >/dev/null; }
command -v chromium >/dev/null
