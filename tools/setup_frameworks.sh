#!/usr/bin/env bash
# Notebook 07's second virtual environment: PyTorch, JAX and Keras 3 beside the course's .venv, never in it.
#
#   bash tools/setup_frameworks.sh VARIANT      (tools/setup.sh calls it; VARIANT is the TensorFlow build, cpu|gpu)
#
# Why a second venv, and what it costs (measured): docs/decisions/frameworks-venv.md. In short: TensorFlow 2.18
# caps NumPy below 2.1 and PyPI's Linux torch wheel is a CUDA build of several GB; a venv of its own takes the CPU
# build where one is offered (Python 3.11 preferred where the course's range has it) and leaves the course's stack untouched. The notebook's kernel
# stays in .venv; notebook 07 starts its PyTorch and JAX scripts as processes of this venv's python.
#
# Where: $COURSE_FRAMEWORKS_VENV, else the course venv's path with -07 added (.venv-07). What: torch, jax, jaxlib
# and keras pinned by requirements/frameworks.txt, and course_lib from this folder on the path (a .pth file; its
# training layer's NumPy-only modules are what the scripts import). VARIANT gpu takes torch's CUDA build (the
# CPU build excluded by name); cpu takes whatever torch==X the indexes offer, the CPU build first where one is
# offered (COURSE_TORCH_INDEX_URL adds an index, e.g. PyTorch's own CPU index on a machine that reaches it).
# Idempotent: a stamp records what was installed; a second run returns at once. COURSE_NO_FRAMEWORKS=1 skips
# the whole step (notebook 07 then says how to set it up).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VARIANT=${1:-cpu}
MAIN_VENV=${COURSE_VENV:-$ROOT/.venv}
FW_VENV=${COURSE_FRAMEWORKS_VENV:-${MAIN_VENV%/}-07}
FW_CONSTRAINTS=$ROOT/requirements/frameworks.txt

say() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }
pin() {  # pin NAME -> version from requirements/frameworks.txt
    local v
    v=$(grep -i -E "^$1==" "$FW_CONSTRAINTS" | head -n1 | cut -d= -f3)
    [ -n "$v" ] || die "no pin for $1 in $FW_CONSTRAINTS"
    printf '%s' "$v"
}

if [ "${COURSE_NO_FRAMEWORKS:-0}" = 1 ]; then
    say "COURSE_NO_FRAMEWORKS=1: notebook 07's PyTorch/JAX venv is not set up"
    exit 0
fi
case "$VARIANT" in cpu|gpu) ;; *) die "variant $VARIANT: use cpu or gpu" ;; esac
[ -f "$FW_CONSTRAINTS" ] || die "$FW_CONSTRAINTS is missing"
stamp_id=$( { cat "$FW_CONSTRAINTS" "${BASH_SOURCE[0]}"; echo "$VARIANT ${COURSE_TORCH_INDEX_URL:-}"; } \
    | sha256sum | cut -c1-16)
STAMP=$FW_VENV/.course-frameworks-$stamp_id
if [ -f "$STAMP" ] && [ -x "$FW_VENV/bin/python" ] && [ "${COURSE_FORCE_SETUP:-0}" != 1 ]; then
    exit 0
fi
START=$(date +%s)

if [ ! -x "$FW_VENV/bin/python" ]; then
    # The course's range (pyproject.toml's requires-python, read by tools/python_range.sh, as tools/setup.sh does).
    # Python 3.11 first where it is in range and here: a CPU build of torch for it may lie on this machine's disk
    # (the one this course's machine reaches is cp311; PyTorch's CPU index has one for every version); then the
    # newest in range on PATH or in pyenv; then whatever the course's venv was made from (uv's CPython on a machine
    # that had none).
    # shellcheck source=tools/python_range.sh
    source "$ROOT/tools/python_range.sh"
    PREFERRED=3.11
    MINORS=$(python_minors) || die "pyproject.toml's requires-python cannot be read (above)"
    preferred=()
    if [[ " $MINORS " == *" $PREFERRED "* ]]; then
        mapfile -t preferred < <(python_candidates | grep -E "python$PREFERRED\$" || true)
    fi
    base=$("$MAIN_VENV/bin/python" -c 'import sys; print(sys._base_executable)' 2>/dev/null || true)
    py=
    # shellcheck disable=SC2119  # python_newest without arguments: the interpreters of PATH and pyenv
    for found in "$([ ${#preferred[@]} = 0 ] || python_newest "${preferred[@]}")" "$(python_newest || true)" \
            "$([ -z "$base" ] || python_newest "$base")"; do
        [ -n "$found" ] && py=${found% *} && break
    done
    [ -n "$py" ] || die "no Python $(python_range) with venv for notebook 07's venv, and the course venv's own
    ($base) is not one: run make setup first (it finds or installs one), or PYTHON=... make setup"
    say "creating $FW_VENV (PyTorch, JAX, Keras 3 for notebook 07) with $py"
    "$py" -m venv "$FW_VENV" || die "could not create $FW_VENV"
fi
PIP=("$FW_VENV/bin/python" -m pip --disable-pip-version-check)
TORCH="torch==$(pin torch)"
# gpu: the CUDA build; the CPU build of the same version (a local version label, +cpu) is excluded by name.
[ "$VARIANT" = gpu ] && TORCH="$TORCH,!=$(pin torch)+cpu"
INDEX=()
[ -n "${COURSE_TORCH_INDEX_URL:-}" ] && INDEX=(--extra-index-url "$COURSE_TORCH_INDEX_URL")
say "installing notebook 07's frameworks into $FW_VENV: $TORCH ($VARIANT), jax $(pin jax), keras $(pin keras)"
WANT=("$TORCH" "jax==$(pin jax)" "jaxlib==$(pin jaxlib)" "keras==$(pin keras)" "pip==$(pin pip)")
# uv where the course venv has it (tools/setup.sh installs it in step 3, before it calls this script): uv is
# given this machine's pip configuration (find-links folders with a CPU build, extra indexes, caps:
# tools/uv_install.py) and picks the same torch build as pip (2.13.0+cpu from a find-links folder where one is
# offered: a local version sorts above the plain one). Parallel downloads and bytecode on every core: 56 s with
# pip, measured in docs/decisions/frameworks-venv.md. pip when uv is missing, cannot translate a setting (status
# 3), fails, or COURSE_NO_UV=1.
installed_with=
UV=$MAIN_VENV/bin/uv
if [ "${COURSE_NO_UV:-0}" != 1 ] && [ -x "$UV" ] && [ -f "$ROOT/tools/uv_install.py" ]; then
    if "$MAIN_VENV/bin/python" "$ROOT/tools/uv_install.py" "$UV" "$FW_VENV/bin/python" --quiet --compile-bytecode \
            "${INDEX[@]}" -c "$FW_CONSTRAINTS" "${WANT[@]}"; then
        installed_with=uv
    else
        rc=$?
        [ "$rc" = 3 ] || say "uv could not install notebook 07's frameworks (status $rc, above): installing with pip"
    fi
fi
if [ -z "$installed_with" ]; then
    "${PIP[@]}" install -q "pip==$(pin pip)"
    "${PIP[@]}" install -q "${INDEX[@]}" -c "$FW_CONSTRAINTS" "${WANT[@]}"
fi
# course_lib from this folder, without its dependencies (TensorFlow and friends are .venv's): a path file.
site=$("$FW_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
printf '%s\n' "$ROOT" > "$site/course_lib_path.pth"
"$FW_VENV/bin/python" - "$(pin torch)" <<'EOF' || die "notebook 07's venv does not import its frameworks (above)"
import os, sys
os.environ["KERAS_BACKEND"] = "jax"
import jax, keras, torch, torch.distributed as dist
import course_lib.training.idx_arrays  # the course's NumPy-only data loader
want = sys.argv[1]
assert torch.__version__.split("+")[0] == want, f"torch {torch.__version__}, pinned {want}"
assert dist.is_gloo_available(), "this torch build has no Gloo"
print(f"[setup] notebook 07's venv: torch {torch.__version__}, jax {jax.__version__}, keras {keras.__version__}")
EOF
rm -f "$FW_VENV"/.course-frameworks-*
date -u +%FT%TZ > "$STAMP"
say "notebook 07's venv done in $(( $(date +%s) - START )) s ($(du -sh "$FW_VENV" | cut -f1))"
