#!/bin/bash
# Horovod Elastic host discovery: print one "host:slots" line per host that may run workers.
#
# horovodrun polls this script about once a second (--host-discovery-script); a host that
# disappears from the output is removed, a new one is added. On a real cluster, print the nodes
# your scheduler gives you (e.g. from `scontrol show hostnames`). Here the default is the two
# names of this machine that Horovod's own tests use, so that a failed worker blacklists only
# one of them:
#     DISCOVER_HOSTS="localhost:1 127.0.0.1:1"
# A file named by DISCOVER_HOSTS_FILE, if it exists, overrides that list (one host:slots per
# line), so a running job can be shrunk or grown by editing the file.

set -euo pipefail

if [ -n "${DISCOVER_HOSTS_FILE:-}" ] && [ -f "$DISCOVER_HOSTS_FILE" ]; then
    grep -E '^[^#[:space:]]+:[0-9]+$' "$DISCOVER_HOSTS_FILE" || true
    exit 0
fi
for entry in ${DISCOVER_HOSTS:-localhost:1 127.0.0.1:1}; do
    echo "$entry"
done
