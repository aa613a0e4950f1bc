#!/usr/bin/env bash
# shellcheck disable=SC2016  # single quotes on purpose: Markdown's backquotes, and $ for the shell inside the chroot
# Debian 13 ("trixie") for real, before a release: the course's set-up, doctor and fast tier (`make check`) in a
# fresh Debian 13 debootstrapped from Debian's archive, the way a learner's new Debian 13 machine runs them
# (issue 53, item 6). A maintainer runs it; it is not part of `make test`.
#
#   tools/maintainers/debian13_check.sh [--commit REV] [--dir SCRATCH] [--repo PATH] [--mirror URL]
#                                       [--results DIR] [--include PKGS] [--env NAME=VALUE]... [--debootstrap-only]
#
# What it proves: on Debian 13's own packages (Python 3.13 and no other, its g++, CMake, Open MPI, Chromium, Node)
# and with nothing of this machine's (no pip configuration, no kept Horovod wheel, no venv, no uv cache), a fresh
# clone of the course at REV (default HEAD of --repo, the repository holding this script) sets up as root with
# `make setup` (whose step 1 apt-installs the system packages itself: that is part of the test), `make doctor`
# says ready, and `make check` passes. What it does not: a GPU; `make test`'s notebooks, Horovod launches and
# browser tests (make check leaves them out); a desktop with systemd and a learner's account (everything runs as
# root in a chroot, and policy-rc.d keeps Debian's packages from starting their services, as in any chroot).
# How long (2 shared cores, load 5-12, 2026-12-02): removing the last run's folder 1-4 min, debootstrap 1-4 min, apt's
# upgrade 10 s, set-up's steps 1-3 about 3.5 min; then Horovod is compiled (the kept wheel is per machine, and the
# chroot has none: 5-7 min) and make check runs (2-5 min), neither measured here yet (results/*-debian13-chroot*.md).
# Needs: root; debootstrap with Debian's archive keyring for trixie (Debian 12: apt-get install debootstrap); network
# to Debian's archive (deb.debian.org), PyPI and npm's registry (the room's proxy); about 12 GB free in SCRATCH.
#
# Writes, whatever happens: RESULTS/<date>-debian13-chroot.md, a summary at its top (the course's commit, Debian's
# version inside, the Python set-up chose, the doctor's report, pass/fail counts, wall time per phase), and the full
# log beside it (<date>-debian13-chroot.log: progress-bar redraws and colour codes taken out, cut in the middle
# above 1 MB). RESULTS defaults to tools/maintainers/results/ of the repository holding this script. The untrimmed
# log stays in SCRATCH-logs/.
# Leaves nothing running or mounted: on any exit (done, failed, Ctrl-C, kill -TERM) a trap ends every process whose
# root is the chroot (TERM, then KILL after 10 s) and unmounts, in reverse order, everything it mounted. SCRATCH
# (default /var/tmp/course-debian13) stays for a look; the next run removes it (only a folder this script made,
# and only when nothing is mounted under it). --env passes a variable into the chroot (e.g. a torch index URL);
# --include adds Debian packages to the bare system (comma-separated, e.g. python3,python3-venv: a Debian 13 whose
# Python is installed already; the results' names then end in -with-<packages>); --debootstrap-only stops after
# the Debian 13 tree is made and mounted once (a check of this script).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
REPO=$ROOT
COMMIT=HEAD
DIR=/var/tmp/course-debian13
MIRROR=http://deb.debian.org/debian
RESULTS=$ROOT/tools/maintainers/results
ONLY_DEBOOTSTRAP=0
INCLUDE=
EXTRA_ENV=()
MARKER=.course-debian13-check   # in SCRATCH: made by this script, so the next run may remove it

usage() { sed -n '7,8p' "${BASH_SOURCE[0]}" | sed 's/^# *//' >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
        --commit) COMMIT=${2:?}; shift 2 ;;
        --dir) DIR=${2:?}; shift 2 ;;
        --repo) REPO=${2:?}; shift 2 ;;
        --mirror) MIRROR=${2:?}; shift 2 ;;
        --results) RESULTS=${2:?}; shift 2 ;;
        --include) INCLUDE=${2:?}; shift 2 ;;
        --env) [[ "${2:-}" == [A-Za-z_]*=* ]] || usage; EXTRA_ENV+=("$2"); shift 2 ;;
        --debootstrap-only) ONLY_DEBOOTSTRAP=1; shift ;;
        -h|--help) usage ;;
        *) printf 'unknown argument: %s\n' "$1" >&2; usage ;;
    esac
done

die() { printf '[debian13] ERROR: %s\n' "$*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root (debootstrap, mount and chroot need it)"
command -v debootstrap >/dev/null || die "debootstrap is missing: apt-get install -y debootstrap"
[ -f /usr/share/keyrings/debian-archive-keyring.gpg ] \
    || die "Debian's archive keyring is missing: apt-get install -y debian-archive-keyring"
SHA=$(git -C "$REPO" rev-parse --verify "$COMMIT^{commit}") || die "$COMMIT is not a commit of $REPO"
mkdir -p "$(dirname "$DIR")"
DIR=$(realpath -m "$DIR")
case "$DIR" in /|/var|/var/tmp|/tmp|/root|/home) die "--dir $DIR: give a folder of its own" ;; esac
DAY=$(date -u +%F)
LOGDIR=$DIR-logs
RAW=$LOGDIR/raw.log
NAME=$DAY-debian13-chroot${INCLUDE:+-with-${INCLUDE//,/-}}
RESULT_MD=$RESULTS/$NAME.md
RESULT_LOG=$RESULTS/$NAME.log

say() { printf '[debian13 %s] %s\n' "$(date -u +%TZ)" "$*" | tee -a "$RAW"; }

# Mount points under a folder (the folder itself included), from this process's mount table.
mounted_under() {
    awk -v d="$1" '{ p = $5; gsub(/\\040/, " ", p); if (p == d || index(p, d "/") == 1) print p }' /proc/self/mountinfo
}
# Processes whose root directory is the chroot or lies inside it.
chroot_pids() {
    local p r
    for p in /proc/[0-9]*; do
        r=$(readlink "$p/root" 2>/dev/null) || continue
        if [ "$r" = "$DIR" ] || [[ "$r" == "$DIR"/* ]]; then printf '%s\n' "${p#/proc/}"; fi
    done
}

# --- the scratch folder: a fresh one each run -------------------------------------------------------------------
[ -z "$(mounted_under "$DIR")" ] || die "something is still mounted under $DIR (umount it first):
$(mounted_under "$DIR")"
if [ -e "$DIR" ] && [ -n "$(ls -A "$DIR")" ]; then
    [ -f "$DIR/$MARKER" ] || die "$DIR is not empty and was not made by this script: give another --dir"
    [ -z "$(chroot_pids)" ] || die "processes still run inside $DIR: $(chroot_pids | tr '\n' ' ')"
    rm -rf --one-file-system "$DIR"
fi
mkdir -p "$DIR" "$LOGDIR" "$RESULTS"
: >"$RAW"
touch "$DIR/$MARKER"

MOUNTS=()        # what this run mounted, in order (unmounted in reverse by the trap)
PHASES=()        # "name|seconds|status", in the order they ran
JOB=             # the running phase's background pipeline
HOST_CAS=()      # this machine's own CA certificates, added to the chroot's store
VENV_PY=         # what the course's venv runs (after set-up)
STOPPED_AT=      # the phase that failed, or was running when a signal came
RUNNING=         # the phase running now, and when it started
RUNNING_T0=0
START=$SECONDS
HOST_LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

mnt() {  # mnt TARGET MOUNT-ARGS...: mount and remember it
    local target=$1; shift
    mount "$@" "$target" || return 1
    MOUNTS+=("$target")
}
mount_all() {
    mnt "$DIR/proc" -t proc proc
    mnt "$DIR/sys" -t sysfs sysfs 2>/dev/null || mnt "$DIR/sys" --bind /sys
    mnt "$DIR/dev" --bind /dev
    mnt "$DIR/dev/pts" --bind /dev/pts
    mnt "$DIR/dev/shm" -t tmpfs -o mode=1777,nosuid,nodev shm
}
end_processes() {  # TERM every process inside the chroot, KILL what is left after 10 s
    local pids i
    pids=$(chroot_pids)
    [ -n "$pids" ] || return 0
    say "ending $(wc -w <<<"$pids") process(es) left inside the chroot: $(tr '\n' ' ' <<<"$pids")"
    # shellcheck disable=SC2086  # one pid a word
    kill -TERM $pids 2>/dev/null || true
    for i in $(seq 20); do
        pids=$(chroot_pids)
        [ -n "$pids" ] || return 0
        sleep 0.5
    done
    say "KILL to what did not end on TERM: $(tr '\n' ' ' <<<"$pids")"
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    sleep 1
}
unmount_all() {
    local i
    for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
        umount "${MOUNTS[i]}" 2>/dev/null || { sleep 2; umount "${MOUNTS[i]}"; } \
            || say "WARNING: could not unmount ${MOUNTS[i]}"
    done
    MOUNTS=()
    if [ -n "$(mounted_under "$DIR")" ]; then
        say "WARNING: still mounted under $DIR: $(mounted_under "$DIR" | tr '\n' ' ')"
    fi
}

# run CMD...: CMD in the background, its output teed to the log, waited for (so that a TERM or Ctrl-C reaches the
# trap at once instead of after CMD ends). CAPTURE (if set) gets a copy of the output too.
CAPTURE=/dev/null
run() {
    ( "$@" 2>&1 | tee -a "$RAW" "$CAPTURE" ) &
    JOB=$!
    local rc=0
    wait "$JOB" || rc=$?
    JOB=
    return "$rc"
}
INSIDE_ENV=(HOME=/root USER=root LOGNAME=root SHELL=/bin/bash LANG=C.UTF-8 TERM=dumb
            PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${EXTRA_ENV[@]}")
inside() {  # inside 'COMMAND LINE': run it as root in the chroot, in the course's folder, with a clean environment
    run chroot "$DIR" /usr/bin/env -i "${INSIDE_ENV[@]}" /bin/bash -c "cd /root/course 2>/dev/null || cd /root; $1"
}
phase() {  # phase NAME CMD...: run CMD, time it, remember its status
    local name=$1 t0=$SECONDS rc=0
    shift
    STOPPED_AT=$name RUNNING=$name RUNNING_T0=$t0
    say "--- $name ---"
    "$@" || rc=$?
    PHASES+=("$name|$((SECONDS - t0))|$rc")
    RUNNING=
    say "--- $name: status $rc, $((SECONDS - t0)) s ---"
    [ "$rc" = 0 ] && STOPPED_AT=
    return "$rc"
}

# --- the results, written on every exit ---------------------------------------------------------------------------
field() { sed -n "s/^$1=//p" "$2" 2>/dev/null | tr -d '"' | head -n1; }
write_results() {
    local status=$1 verdict line name secs rc os pyline seterr doctor counts failures
    if [ "$status" = 0 ] && [ "$ONLY_DEBOOTSTRAP" = 1 ]; then
        verdict="stopped after Debian 13 was made (--debootstrap-only)"
    elif [ "$status" = 0 ]; then verdict="**passed** (every phase status 0)"
    elif [ -n "$STOPPED_AT" ]; then verdict="**FAILED** in phase \`$STOPPED_AT\` (script status $status)"
    else verdict="**FAILED** (script status $status)"; fi
    os=$(field PRETTY_NAME "$DIR/etc/os-release")
    [ -z "$os" ] || os="$os, /etc/debian_version $(cat "$DIR/etc/debian_version" 2>/dev/null)"
    pyline=$(grep -m1 -E '^\[setup\] (Python: |creating .* with )' "$RAW" | sed 's/^\[setup\] //' || true)
    seterr=$(grep -m1 -E '^\[setup\] ERROR: ' "$RAW" | sed 's/^\[setup\] ERROR: //' | cut -c1-300 || true)
    doctor=$(grep -E '^\[(  ok|warn|FAIL)\] |^       → |^Verdict: ' "$LOGDIR/doctor.txt" 2>/dev/null || true)
    counts=$(grep -E '^=*[^=]*\b(passed|failed|error|errors)\b.* in [0-9.]+s' "$LOGDIR/check.txt" 2>/dev/null \
        | tail -n1 | sed 's/^=* *//; s/ *=*$//' || true)
    failures=$(grep -E '^(FAILED|ERROR) ' "$LOGDIR/check.txt" 2>/dev/null | head -n 40 || true)
    {
        printf '# Debian 13 in a chroot: set-up, doctor and `make check` (%s)\n\n' "$DAY"
        printf 'Run by `tools/maintainers/debian13_check.sh` (issue 53, item 6); the full log: [%s](%s).\n\n' \
            "$(basename "$RESULT_LOG")" "$(basename "$RESULT_LOG")"
        printf -- '- Result: %s\n' "$verdict"
        printf -- '- Course: `%s` (%s), a fresh `git clone` in the chroot'"'"'s /root/course\n' \
            "$(git -C "$REPO" rev-parse --short=12 "$SHA")" "$(git -C "$REPO" log -1 --format=%s "$SHA" | cut -c1-100)"
        printf -- '- Inside: %s (debootstrap %s, variant minbase with ca-certificates,git,make,bash%s, from %s)\n' \
            "${os:-not reached}" "$(dpkg-query -W -f='${Version}' debootstrap 2>/dev/null || echo '?')" \
            "${INCLUDE:+,$INCLUDE}" "$MIRROR"
        printf -- '- Python set-up chose: %s; the venv runs %s\n' "${pyline:-not reached}" "${VENV_PY:-?}"
        [ -z "$seterr" ] || printf -- '- Set-up stopped with: %s\n' "$seterr"
        printf -- '- make check: %s\n' "${counts:-not reached}"
        printf -- '- Host: %s, %s cores, kernel %s; load average %s at the start, %s at the end (a shared machine)\n' \
            "$(field PRETTY_NAME /etc/os-release)" "$(nproc)" "$(uname -r)" "$HOST_LOAD_START" \
            "$(cut -d' ' -f1-3 /proc/loadavg)"
        [ ${#EXTRA_ENV[@]} = 0 ] || printf -- '- Passed into the chroot: `%s`\n' "${EXTRA_ENV[*]}"
        [ ${#HOST_CAS[@]} = 0 ] \
            || printf -- '- This network intercepts TLS: %s CA certificate(s) of this machine %s\n' "${#HOST_CAS[@]}" \
                "added to the chroot's store (SSL_CERT_FILE, NODE_EXTRA_CA_CERTS name it; no pip settings)"
        printf '\n| phase | wall s | status |\n|---|---|---|\n'
        for line in "${PHASES[@]}"; do
            IFS='|' read -r name secs rc <<<"$line"
            printf '| %s | %s | %s |\n' "$name" "$secs" "$rc"
        done
        [ -z "$RUNNING" ] || printf '| %s | stopped after %s | %s |\n' "$RUNNING" "$((SECONDS - RUNNING_T0))" "$status"
        printf '| all | %s | %s |\n' "$((SECONDS - START))" "$status"
        if [ -n "$doctor" ]; then printf '\nThe doctor (`make doctor`):\n\n```\n%s\n```\n' "$doctor"; fi
        if [ -n "$failures" ]; then printf '\n`make check`'"'"'s failures:\n\n```\n%s\n```\n' "$failures"; fi
    } >"$RESULT_MD"
    # The log: each line as last drawn (a progress bar's \r redraws dropped), no colour codes; cut in the middle
    # when over 1 MB.
    sed -e 's/.*\r//' -e 's/\x1b\[[0-9;]*[A-Za-z]//g' "$RAW" >"$RESULT_LOG.tmp"
    if [ "$(stat -c %s "$RESULT_LOG.tmp")" -gt 1000000 ]; then
        { head -c 400000 "$RESULT_LOG.tmp"
          printf '\n[... %s bytes of the log left out here; the whole log: %s ...]\n' \
              "$(( $(stat -c %s "$RESULT_LOG.tmp") - 900000 ))" "$RAW"
          tail -c 500000 "$RESULT_LOG.tmp"; } >"$RESULT_LOG"
        rm -f "$RESULT_LOG.tmp"
    else
        mv "$RESULT_LOG.tmp" "$RESULT_LOG"
    fi
}

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    set +e
    [ -z "$JOB" ] || { kill -TERM "$JOB" 2>/dev/null; }
    end_processes
    [ -z "$JOB" ] || wait "$JOB" 2>/dev/null
    local cfg=$DIR/root/course/.venv/pyvenv.cfg   # read, not run: its python links to the chroot's /usr/bin
    if [ -f "$cfg" ]; then
        VENV_PY="Python $(sed -n 's/^version *= *//p' "$cfg") from $(sed -n 's/^home *= *//p' "$cfg")"
        say "the venv runs $VENV_PY"
    fi
    unmount_all
    say "done: status $status in $((SECONDS - START)) s; results: $RESULT_MD"
    write_results "$status"
    exit "$status"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT
trap 'say "terminated"; exit 143' TERM

say "Debian 13 check of $SHA ($REPO) in $DIR; log $RAW"

# --- 1. Debian 13 from Debian's archive -------------------------------------------------------------------------
# minbase and what set-up needs before it can run (it apt-installs the rest itself, as a learner's set-up does).
phase debootstrap run debootstrap --variant=minbase --components=main \
    --include="ca-certificates,git,make,bash${INCLUDE:+,$INCLUDE}" trixie "$DIR" "$MIRROR"
# apt's sources as Debian 13's installer writes them (with updates and security), the host's resolver, and no
# services started by packages (the chroot convention: no init system runs here).
cat >"$DIR/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: trixie trixie-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: trixie-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
rm -f "$DIR/etc/apt/sources.list"
# A network that intercepts TLS (a company's proxy): this machine's own CA certificates (regular files in
# /usr/local/share/ca-certificates and /etc/ssl/certs, not Debian's links) go into the chroot's store, and
# SSL_CERT_FILE and NODE_EXTRA_CA_CERTS name that store for the tools with roots of their own (uv, Node); on a
# network that does not intercept, there are none and nothing changes.
HOST_CAS=()
for f in /usr/local/share/ca-certificates/*.crt /usr/local/share/ca-certificates/*/*.crt /etc/ssl/certs/*.pem; do
    # One of each name (update-ca-certificates writes /etc/ssl/certs/NAME.pem from .../NAME.crt).
    if [ -f "$f" ] && [ ! -L "$f" ] && [[ " ${HOST_CAS[*]##*/} " != *" $(basename "${f%.*}")."* ]]; then
        HOST_CAS+=("$f")
    fi
done
if [ ${#HOST_CAS[@]} -gt 0 ]; then
    mkdir -p "$DIR/usr/local/share/ca-certificates"
    for f in "${HOST_CAS[@]}"; do
        cp "$f" "$DIR/usr/local/share/ca-certificates/host-$(basename "${f%.*}").crt"
    done
    INSIDE_ENV+=(SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
                 NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt)
    say "this machine's CA certificates, added to the chroot's store: ${HOST_CAS[*]}"
fi
cp -L /etc/resolv.conf "$DIR/etc/resolv.conf"
cp /etc/hosts "$DIR/etc/hosts"
printf '#!/bin/sh\nexit 101\n' >"$DIR/usr/sbin/policy-rc.d"
chmod 755 "$DIR/usr/sbin/policy-rc.d"
mount_all
phase upgrade inside 'export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && apt-get full-upgrade -y -qq
    update-ca-certificates
    . /etc/os-release; echo "inside: $PRETTY_NAME, debian_version $(cat /etc/debian_version)"
    ls /usr/bin/python3* 2>/dev/null || echo "no python3 yet"'
if [ "$ONLY_DEBOOTSTRAP" = 1 ]; then
    say "--debootstrap-only: stopping here"
    exit 0
fi

# --- 2. the course: a fresh clone of the commit ----------------------------------------------------------------
phase clone run bash -c 'git clone --quiet --no-hardlinks "$1" "$2" && git -C "$2" checkout --quiet --detach "$3" \
    && git -C "$2" log -1 --format="cloned %H %s"' _ "$REPO" "$DIR/root/course" "$SHA"

# --- 3. inside: set-up, doctor, the fast tier ----------------------------------------------------------------------
phase setup inside 'make setup'
CAPTURE=$LOGDIR/doctor.txt
phase doctor inside 'make doctor' || true   # a doctor that says NOT ready is recorded; make check still runs
CAPTURE=$LOGDIR/check.txt
phase check inside 'make check'
CAPTURE=/dev/null
# Any phase that failed fails the run (the doctor's status too).
for line in "${PHASES[@]}"; do
    [ "${line##*|}" = 0 ] || { STOPPED_AT=${line%%|*}; exit 1; }
done
