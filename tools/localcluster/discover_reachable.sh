#!/bin/bash
# Horovod Elastic host discovery for the local cluster (tools/localcluster): print "host:slots" for
# each candidate host whose sshd answers now, so a host whose link is down drops out of the job and
# comes back when its link returns. Candidates: DISCOVER_HOSTS (default "hostA:1 hostB:1"); port:
# DISCOVER_PORT (22). Each probe is a TCP connect bounded by a 1 s timeout (horovodrun polls this
# script about once a second). On a real cluster print your scheduler's nodes instead
# (cluster/discover_hosts.sh).

set -uo pipefail

port=${DISCOVER_PORT:-22}
for entry in ${DISCOVER_HOSTS:-hostA:1 hostB:1}; do
    host=${entry%%:*}
    if timeout 1 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$host" "$port" 2>/dev/null; then
        echo "$entry"
    fi
done
exit 0
