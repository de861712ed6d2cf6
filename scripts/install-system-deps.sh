#!/usr/bin/env bash
# System packages the test suite needs, from Debian's packages, installed only when missing:
#   - PostgreSQL's server binaries (initdb, pg_ctl, postgres): the db tests start a throwaway
#     cluster on 127.0.0.1 themselves (tests/support/postgres.py), nothing runs as a service;
#   - Chromium: the JupyterLab browser test drives Debian's /usr/bin/chromium headless.
# Idempotent and quick when everything is there; needs root (or sudo) only when it installs.
set -euo pipefail

need=()
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || need+=(postgresql)
command -v chromium >/dev/null || need+=(chromium)

if ((${#need[@]} == 0)); then
    echo "install-system-deps: PostgreSQL server binaries and Chromium are present"
    exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "install-system-deps: root or sudo is needed to install: ${need[*]}" >&2; exit 1; }
    SUDO="sudo"
fi
echo "install-system-deps: installing ${need[*]}"
# A package's post-install script may try to start a service; in a container there is no init to
# do it, and the tests never use one: policy-rc.d 101 tells invoke-rc.d not to start anything.
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod +x /usr/sbin/policy-rc.d
    trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
echo "install-system-deps: done"
