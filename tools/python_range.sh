#!/usr/bin/env bash
# The Pythons the course supports, read from the one place they are written: pyproject.toml's requires-python.
#
#   source tools/python_range.sh      (tools/setup.sh and tools/setup_frameworks.sh: the functions below)
#   bash tools/python_range.sh        (prints the range and its minors, newest first: ">=3.11,<3.14 3.13 3.12 3.11")
#
# Plain bash, no Python: set-up reads the range before it knows which Python, if any, it will use (a machine
# with none, or with only Ubuntu 26.04's 3.14). It reads the form ">=3.A,<3.B" only and refuses any other, so
# that the range is never guessed; tests/test_python_range.py checks that it agrees with packaging's reading of
# the same line.
#
# Functions (each prints its answer; none changes anything):
#   python_range                      the requires-python string of $PYTHON_RANGE_PYPROJECT (default: the
#                                     course's pyproject.toml)
#   python_minors                     the supported versions, newest first: "3.13 3.12 3.11"
#   python_version_of CAND            CAND's "X.Y" when it runs and has venv and ensurepip, else status 1
#                                     ("X.Y novenv" on stdout and status 2 when it runs but lacks them)
#   python_candidates                 the interpreters to try: python3.X on PATH for each supported X, pyenv's
#                                     versions/3.X*/bin/python3.X (its shims answer only for the selected
#                                     version), then python3
#   python_newest [CAND...]           "PATH X.Y" of the newest candidate in range with venv and ensurepip
#   python_newest_without_venv        "PATH X.Y" of the newest candidate in range that runs but lacks them (Debian's
#                                     python3 without python3.X-venv)
set -euo pipefail

PYTHON_RANGE_PYPROJECT=${PYTHON_RANGE_PYPROJECT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/pyproject.toml}

python_range() {
    local file=$PYTHON_RANGE_PYPROJECT line
    line=$(grep -E '^requires-python[[:space:]]*=' "$file" | head -n1) || true
    [[ "$line" =~ \"([^\"]*)\" ]] || { printf 'python_range: no requires-python in %s\n' "$file" >&2; return 1; }
    printf '%s' "${BASH_REMATCH[1]}"
}

python_minors() {
    local spec low high m out=()
    spec=$(python_range) || return 1
    spec=${spec// /}
    if [[ "$spec" =~ ^\>=3\.([0-9]+),\<3\.([0-9]+)$ ]]; then
        low=${BASH_REMATCH[1]} high=${BASH_REMATCH[2]}
    else
        printf 'python_range: requires-python "%s": only the form ">=3.A,<3.B" is read\n' "$spec" >&2
        return 1
    fi
    [ "$low" -lt "$high" ] || { printf 'python_range: requires-python "%s" admits no version\n' "$spec" >&2; return 1; }
    for ((m = high - 1; m >= low; m--)); do out+=("3.$m"); done
    printf '%s' "${out[*]}"
}

python_version_of() {
    local cand=$1 v
    command -v "$cand" >/dev/null 2>&1 || return 1
    v=$("$cand" -c 'import sys; print(*sys.version_info[:2], sep=".")' 2>/dev/null) || return 1
    [[ "$v" =~ ^[0-9]+\.[0-9]+$ ]] || return 1
    if "$cand" -c 'import ensurepip, venv' >/dev/null 2>&1; then
        printf '%s' "$v"
    else
        printf '%s novenv' "$v"
        return 2
    fi
}

python_candidates() {
    local minors m proot f out=()
    minors=$(python_minors) || return 1
    for m in $minors; do out+=("python$m"); done
    if command -v pyenv >/dev/null 2>&1 && proot=$(pyenv root 2>/dev/null) && [ -n "$proot" ]; then
        for m in $minors; do
            for f in "$proot"/versions/"$m"*/bin/python"$m"; do [ -x "$f" ] && out+=("$f"); done
        done
    fi
    out+=(python3)
    printf '%s\n' "${out[@]}"
}

python_newest() {
    local minors cand v best='' best_v='' m rank best_rank=999 cands=("$@")
    minors=" $(python_minors) " || return 1
    [ ${#cands[@]} -gt 0 ] || mapfile -t cands < <(python_candidates)
    for cand in "${cands[@]}"; do
        v=$(python_version_of "$cand") || continue
        [[ "$minors" == *" $v "* ]] || continue
        # rank: the position of v in the newest-first list; the first candidate of the newest version wins
        rank=0
        for m in $minors; do [ "$m" = "$v" ] && break; rank=$((rank + 1)); done
        if [ "$rank" -lt "$best_rank" ]; then best=$cand best_v=$v best_rank=$rank; fi
    done
    [ -n "$best" ] || return 1
    printf '%s %s' "$best" "$best_v"
}

python_newest_without_venv() {
    local minors cand v m found='' cands=()
    minors=$(python_minors) || return 1
    mapfile -t cands < <(python_candidates)
    for m in $minors; do
        for cand in "${cands[@]}"; do
            v=$(python_version_of "$cand") && continue   # has venv: python_newest's
            [ "$v" = "$m novenv" ] && found="$cand $m" && break 2
        done
    done
    [ -n "$found" ] || return 1
    printf '%s' "$found"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    range=$(python_range)
    minors=$(python_minors)
    printf '%s %s\n' "$range" "$minors"
fi
