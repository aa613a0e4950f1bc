#!/usr/bin/env bash
# Course set-up: everything `make lab` and `make test` need, from a bare Debian/Ubuntu machine.
#
#   1. system packages (compiler, cmake, Open MPI, Debian's Fashion-MNIST, Chromium; and for the full profile
#      Slurm, munge, sshd and iproute2, the local cluster of the tests) when root with apt;
#      otherwise the exact list to install is printed and set-up goes on where it can;
#   0. (before anything is installed) the interpreter: an existing .venv in range is kept; else PYTHON=; else the
#      newest Python on PATH or in pyenv's versions whose version is in pyproject.toml's requires-python (read by
#      tools/python_range.sh) and which has venv and ensurepip; else (a machine with only Ubuntu 26.04's 3.14, or
#      none) uv's CPython of the newest supported version. A machine set-up cannot serve (an architecture without
#      TensorFlow wheels; no Python and uv's download unreachable) is refused here, with its remedies.
#      COURSE_SETUP_PLAN=1 prints this decision and the packages set-up would install, and stops: nothing changes;
#   2. the virtual environment in .venv/, from that interpreter (uv's: installed first into build/python with a
#      pinned uv from PyPI in build/uv-bootstrap, from a python3 that step 1 installs where there is none);
#   3. the pinned stack from requirements/constraints.txt, course_lib installed editable, and the TensorFlow
#      build this machine takes (course_lib.environment.tensorflow_build.tensorflow_variant, the one place that
#      decides): gpu where nvidia-smi lists a GPU or COURSE_GPU=1: tensorflow[and-cuda] with tf-keras; else cpu:
#      tensorflow-cpu, the CPU-only wheel (no CUDA start-up errors), with tf-keras installed without its
#      dependencies (it requires `tensorflow`, the CUDA-capable wheel) and checked (docs/decisions/tensorflow-2.21.md);
#   4. Horovod compiled against that TensorFlow (Gloo + MPI; NCCL on GPU hosts) from its source package
#      (sha256-checked) with the course's patches, requirements/patches/horovod-<version>.patch;
#   5. the venv's Jupyter kernel registered as `python3`;
#   and notebook 07's second venv, .venv-07 (PyTorch, JAX, Keras 3): tools/setup_frameworks.sh.
#
# Idempotent: a stamp in .venv records what was installed; a second run checks it and returns in seconds.
# Variables: PYTHON (interpreter to build the venv from), COURSE_VENV (venv path), COURSE_SETUP_PLAN=1 (the dry run),
# UV_PYTHON_INSTALL_MIRROR / UV_PYTHON_DOWNLOADS_JSON_URL / UV_PYTHON_INSTALL_DIR (uv's, passed on), COURSE_GPU (1/0 to force
# the GPU/CPU build), COURSE_SKIP_APT=1 (never call apt-get), COURSE_FORCE_SETUP=1 (ignore the stamp),
# COURSE_NO_BUILD_CACHE=1 (build Horovod even when this machine kept a wheel of the same build: tools/wheel_cache.py).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${COURSE_VENV:-$ROOT/.venv}
CONSTRAINTS=$ROOT/requirements/constraints.txt
# slurm-wlm, munge, openssh-server, iproute2: the local cluster of the tests (tools/localcluster: a one-node
# Slurm and two ssh hosts in network namespaces). The tests start their own daemons on private sockets, ports,
# state folders and namespaces; on a machine run by systemd, Debian's packages also enable their own services
# (ssh, munge): `systemctl disable --now ssh munge` if the machine should not keep them.
APT_PACKAGES=(g++ cmake make patch libopenmpi-dev openmpi-bin dataset-fashion-mnist chromium nodejs npm
              slurm-wlm munge openssh-server iproute2)
# COURSE_PROFILE=learner (make lab): what the notebooks need, without the test-only pieces (Chromium,
# Playwright, nbval, pytest, linters); full (default, make test): everything.
PROFILE=${COURSE_PROFILE:-full}
case "$PROFILE" in
    full) EXTRAS=lab,test,room ;;
    learner) EXTRAS=lab; APT_PACKAGES=(g++ cmake make patch libopenmpi-dev openmpi-bin dataset-fashion-mnist) ;;
    *) printf '[setup] ERROR: COURSE_PROFILE=%s: use learner (make lab) or full (make test)\n' "$PROFILE" >&2; exit 1 ;;
esac
START=$(date +%s)

say() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }
pin() {  # pin NAME -> version from the constraints file (the one place pins live)
    local v
    v=$(grep -i -E "^$1==" "$CONSTRAINTS" | head -n1 | cut -d= -f3)
    [ -n "$v" ] || die "no pin for $1 in $CONSTRAINTS"
    printf '%s' "$v"
}

# shellcheck source=tools/python_range.sh
source "$ROOT/tools/python_range.sh"   # the supported Pythons: pyproject.toml's requires-python, read in one place
PLAN=${COURSE_SETUP_PLAN:-0}
case "$PLAN" in 0|1) ;; *) die "COURSE_SETUP_PLAN=$PLAN: use 1 (print what set-up would do, change nothing) or leave it unset" ;; esac
can_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && [ "${COURSE_SKIP_APT:-0}" != 1 ]; }

# --- 0. the machine and its interpreter, decided before anything is installed ----------------------------
# Every refusal below comes before step 1: a machine set-up cannot serve is left as it was.
OS_RELEASE=${COURSE_OS_RELEASE:-/etc/os-release}
os_field() {  # os_field KEY -> its value in os-release (quotes removed), or nothing
    local v
    v=$(grep -E "^$1=" "$OS_RELEASE" 2>/dev/null | head -n1 | cut -d= -f2-) || true
    v=${v#\"}; printf '%s' "${v%\"}"
}
OS_ID=$(os_field ID); OS_VERSION=$(os_field VERSION_ID)
case "$OS_ID" in debian|ubuntu) OS_NAME="${OS_ID^} $OS_VERSION" ;; *) OS_NAME="$(os_field NAME) $OS_VERSION" ;; esac
ARCH=$(uname -m)
case "$ARCH" in
    x86_64|aarch64) ;;
    *) die "this machine is $ARCH: TensorFlow publishes Linux wheels for x86_64 and aarch64 only, so the course
    cannot be set up here. Nothing was installed. Use an x86_64 or aarch64 machine (a cloud VM, or a cluster:
    cluster/README.md)." ;;
esac
MINORS=$(python_minors) || die "pyproject.toml's requires-python cannot be read (above)"
NEWEST=${MINORS%% *}
RANGE="$(python_range) (Python ${MINORS##* } to $NEWEST)"
# The Python each distribution packages (its python3; Debian 12 and Ubuntu 24.04 also name it python3.X).
distro_remedy() {
    local v pkgs
    case "$OS_ID $OS_VERSION" in
        "debian 12") v=3.11 pkgs="python3.11 python3.11-venv" ;;
        "debian 13") v=3.13 pkgs="python3 python3-venv" ;;
        "ubuntu 24.04") v=3.12 pkgs="python3.12 python3.12-venv" ;;
        "ubuntu 26.04") v=3.14 pkgs= ;;
        *) printf 'install a Python %s with its venv module from your distribution' "$RANGE"; return ;;
    esac
    if [[ " $MINORS " == *" $v "* ]]; then
        printf '%s packages Python %s: sudo apt-get install -y %s' "$OS_NAME" "$v" "$pkgs"
    else
        printf '%s packages only Python %s, which the course cannot use (no TensorFlow wheel)' "$OS_NAME" "$v"
    fi
}
# Where uv downloads CPython from (uv's own default, its documented mirror variable, or a download list).
UV_DEFAULT_SOURCE=https://github.com/astral-sh/python-build-standalone/releases/download
uv_source() { printf '%s' "${UV_PYTHON_DOWNLOADS_JSON_URL:-${UV_PYTHON_INSTALL_MIRROR:-$UV_DEFAULT_SOURCE}}"; }
reachable() {  # reachable URL: a file that exists, or a server that answers (any HTTP status), within 15 s
    local url=$1 rest host port
    case "$url" in
        file://*) [ -r "${url#file://}" ]; return ;;
        http://*|https://*) ;;
        *) return 1 ;;
    esac
    if command -v curl >/dev/null; then
        curl -sS -o /dev/null -I --max-time 15 "$url" 2>/dev/null; return
    fi
    rest=${url#*://}; host=${rest%%/*}; port=443
    [[ "$url" == http://* ]] && port=80
    [[ "$host" == *:* ]] && port=${host##*:} && host=${host%:*}
    command -v timeout >/dev/null || return 1
    # shellcheck disable=SC2016  # expanded by the inner bash, from its arguments
    timeout 15 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$host" "$port" 2>/dev/null
}
apt_python3_minor() {  # the X.Y of the python3 apt would install here (apt's lists; nothing installed), or fail
    local line
    command -v apt-cache >/dev/null || return 1
    while IFS= read -r line; do
        if [[ "$line" =~ ^Version:\ ([0-9]+\.[0-9]+) ]]; then printf '%s' "${BASH_REMATCH[1]}"; return 0; fi
    done < <(apt-cache show --no-all-versions python3 2>/dev/null)
    return 1
}
refuse() {  # refuse MESSAGE: before anything is installed
    [ "$PLAN" = 1 ] && say "plan: python: refused"
    die "$1
    Nothing was installed."
}
# PY_HOW: venv (the existing venv, kept), given (PYTHON=), found (the newest in range here) or uv (uv's CPython).
PY='' PY_V='' PY_HOW='' BOOT_PY='' APT_PYTHON=()
# shellcheck disable=SC2119  # python_newest without arguments: the interpreters of PATH and pyenv
if [ -e "$VENV/bin/python" ]; then
    PY_V=$("$VENV/bin/python" -c 'import sys; print(*sys.version_info[:2], sep=".")' 2>/dev/null) \
        || refuse "$VENV/bin/python does not run (its base Python was removed?): remove the venv (rm -rf $VENV) and run set-up again"
    [[ " $MINORS " == *" $PY_V "* ]] \
        || refuse "$VENV is Python $PY_V; the course needs $RANGE: remove it (rm -rf $VENV) and run set-up again"
    PY=$VENV/bin/python PY_HOW=venv
elif [ -n "${PYTHON:-}" ]; then
    rc=0; PY_V=$(python_version_of "$PYTHON") || rc=$?
    PY_V=${PY_V% novenv}
    [ -n "$PY_V" ] || refuse "PYTHON=$PYTHON does not run"
    [[ " $MINORS " == *" $PY_V "* ]] || refuse "PYTHON=$PYTHON is Python $PY_V; the course needs $RANGE"
    [ "$rc" = 0 ] || refuse "PYTHON=$PYTHON (Python $PY_V) has no venv module (Debian/Ubuntu: sudo apt-get install -y python$PY_V-venv)"
    PY=$PYTHON PY_HOW=given
elif found=$(python_newest); then
    PY=${found% *} PY_V=${found##* } PY_HOW=found
elif can_apt && found=$(python_newest_without_venv) \
        && dpkg-query -S "$(command -v "${found% *}")" >/dev/null 2>&1; then
    # The distribution's Python in range without its venv module (Debian 13's python3 without python3-venv):
    # step 1 installs python3.X-venv for it.
    PY=${found% *} PY_V=${found##* } PY_HOW=found APT_PYTHON=("python$PY_V-venv")
elif ! command -v python3 >/dev/null && can_apt && apt_v=$(apt_python3_minor) \
        && [[ " $MINORS " == *" $apt_v "* ]]; then
    # No Python at all, and the distribution's python3 is in range (a bare Debian 13: 3.13, asked of apt's lists,
    # nothing installed yet): step 1 installs it with its venv module, and the venv is made from it.
    PY=python3 PY_V=$apt_v PY_HOW=found APT_PYTHON=(python3 python3-venv)
else
    # None in range (Ubuntu 26.04 ships 3.14 only; a bare machine has none): uv installs the newest supported
    # CPython, with a uv from PyPI in a bootstrap venv of whatever python3 the distribution has.
    PY_HOW=uv PY_V=$NEWEST
    if python_version_of python3 >/dev/null; then
        BOOT_PY=python3
    elif can_apt; then
        APT_PYTHON=(python3 python3-venv)
    else
        refuse "no Python $RANGE with venv here, and no python3 with venv to bring one with uv; set-up cannot
    install one (needs root and apt). Remedies: $(distro_remedy); or sudo apt-get install -y python3 python3-venv
    (set-up then installs CPython $NEWEST with uv); or PYTHON=/path/to/python$NEWEST; or conda: conda env create -f environment.yml"
    fi
    reachable "$(uv_source)" || refuse "no Python $RANGE with venv here, and uv's CPython download ($(uv_source)) cannot
    be reached. Remedies: $(distro_remedy); or point UV_PYTHON_INSTALL_MIRROR at a reachable mirror of
    python-build-standalone's releases; or PYTHON=/path/to/python$NEWEST; or conda: conda env create -f environment.yml"
fi
# uv's CPython goes beside the course's venv, in build/python (UV_PYTHON_INSTALL_DIR chooses another folder): whoever
# can run .venv can run its interpreter, a room's learner accounts included (make room), which a home folder's
# ~/.local/share/uv would not give them; `make clean` removes it with the venv.
UV_PY_DIR=${UV_PYTHON_INSTALL_DIR:-$ROOT/build/python}
UV_BOOT=$ROOT/build/uv-bootstrap
case "$PY_HOW" in
    venv) py_line="venv Python $PY_V: $VENV, kept" ;;
    given) py_line="given Python $PY_V: PYTHON=$PY" ;;
    found) py_line="found Python $PY_V: $PY${APT_PYTHON:+ (step 1 installs ${APT_PYTHON[*]}, which it lacks)}" ;;
    uv) py_line="uv-managed Python $PY_V: no Python $RANGE with venv here, so uv $(pin uv) installs CPython $PY_V into $UV_PY_DIR from $(uv_source) (a network that blocks it: set UV_PYTHON_INSTALL_MIRROR)" ;;
esac

# The system packages set-up would install: what dpkg lacks (a probe: its answer is read, not shown).
missing=()
for p in "${APT_PYTHON[@]}" "${APT_PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>&1 || true)
    [[ "$status" == *"install ok installed"* ]] && continue
    # Node from another source (NodeSource's nodejs ships npm) satisfies nodejs/npm: Debian's npm would conflict.
    case "$p" in nodejs) command -v node >/dev/null && continue ;; npm) command -v npm >/dev/null && continue ;; esac
    missing+=("$p")
done

if [ "$PLAN" = 1 ]; then
    # COURSE_SETUP_PLAN=1: what set-up would use and install here; no apt, no venv, no download.
    say "plan (COURSE_SETUP_PLAN=1: nothing is changed): $OS_NAME, $ARCH, $PROFILE profile"
    say "plan: python: $py_line"
    if [ ${#missing[@]} = 0 ]; then apt_line="nothing missing"
    elif can_apt; then apt_line="apt-get install ${missing[*]}"
    else apt_line="missing, printed for sudo (set-up cannot install as this user): ${missing[*]}"; fi
    say "plan: apt: $apt_line"
    pin_for() {  # pin_for NAME -> NAME's pin for Python $PY_V (a line's python_version marker, where it has one)
        local line ver op want have=$(( ${PY_V%%.*} * 100 + ${PY_V#*.} ))
        while IFS= read -r line; do
            ver=${line#*==}; ver=${ver%%;*}; ver=${ver// /}
            [[ "$line" == *";"* ]] || { printf '%s' "$ver"; return; }
            [[ "$line" =~ python_version[[:space:]]*(\<=|\>=|==|!=|\<|\>)[[:space:]]*\"([0-9]+)\.([0-9]+)\" ]] || continue
            op=${BASH_REMATCH[1]} want=$(( BASH_REMATCH[2] * 100 + BASH_REMATCH[3] ))
            case "$op" in
                "<") (( have < want )) ;; "<=") (( have <= want )) ;; ">") (( have > want )) ;;
                ">=") (( have >= want )) ;; "==") (( have == want )) ;; "!=") (( have != want )) ;;
            esac && { printf '%s' "$ver"; return; }
        done < <(grep -i -E "^$1==" "$CONSTRAINTS")
        printf 'unpinned'
    }
    # The TensorFlow build: asked from course_lib (stdlib only) with any Python 3.11+ already here.
    variant=
    for q in "$PY" "$BOOT_PY"; do
        [ -n "$q" ] || continue
        variant=$(PYTHONPATH="$ROOT" "$q" -P -m course_lib.environment.tensorflow_build variant 2>/dev/null) && break
        variant=
    done
    v='cpu|gpu'
    if [ -z "$variant" ]; then tf_line="tensorflow $(pin tensorflow) (the build course_lib decides once Python is here)"
    else
        v=${variant%%$'\t'*}
        if [ "$v" = gpu ]; then tf="tensorflow[and-cuda]==$(pin tensorflow)"
        elif [ "$ARCH" = x86_64 ]; then tf="tensorflow-cpu==$(pin tensorflow)"
        else tf="tensorflow==$(pin tensorflow)"; fi
        tf_line="$tf ($v build: ${variant#*$'\t'}), tf-keras==$(pin tf_keras)$([ "$v" = cpu ] && printf ' without its dependencies')"
    fi
    say "plan: pip: $tf_line; numpy==$(pin_for numpy), protobuf==$(pin_for protobuf), h5py==$(pin_for h5py); course_lib[$v,$EXTRAS] editable, with uv==$(pin uv), all -c requirements/constraints.txt"
    say "plan: horovod: horovod==$(pin horovod) compiled from its source package (sha256-checked) with requirements/patches/horovod-$(pin horovod).patch, Gloo$(command -v mpicxx >/dev/null && printf ' + MPI'), or its wheel from ~/.cache/course-dl when this machine built the same before"
    exit 0
fi
say "Python: $py_line"

# --- 1. system packages ---------------------------------------------------------------------------
if [ ${#missing[@]} -gt 0 ]; then
    if can_apt; then
        say "installing system packages: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}"
    else
        say "WARNING: these system packages are missing and set-up cannot install them (needs root and apt):"
        say "    sudo apt-get install -y ${missing[*]}"
        say "continuing: without g++/cmake Horovod cannot be built; without dataset-fashion-mnist the data"
        say "must be downloaded (online) or COURSE_DATA_DIR set; without openmpi-bin only Gloo is available."
    fi
fi

# --- 2. interpreter and venv -------------------------------------------------------------------------
if [ "$PY_HOW" = uv ]; then
    if [ -z "$BOOT_PY" ]; then
        python_version_of python3 >/dev/null || die "python3 with venv is still missing after step 1 (above)"
        BOOT_PY=python3
    fi
    if [ "$("$UV_BOOT/bin/uv" --version 2>/dev/null || true)" != "uv $(pin uv)" ]; then
        # Removed on any failure or interrupt: no half-made bootstrap venv is left behind.
        trap 'rm -rf "$UV_BOOT"' EXIT
        rm -rf "$UV_BOOT"
        "$BOOT_PY" -m venv "$UV_BOOT" || die "could not create $UV_BOOT with $BOOT_PY (above)"
        "$UV_BOOT/bin/python" -m pip install -q --disable-pip-version-check "uv==$(pin uv)" \
            || die "could not install uv $(pin uv) from the package index (above)"
        trap - EXIT
    fi
    (umask 022; UV_PYTHON_INSTALL_DIR=$UV_PY_DIR "$UV_BOOT/bin/uv" python install --no-bin "$PY_V") \
        || die "uv could not install CPython $PY_V from $(uv_source) (above): where that host is blocked, set
    UV_PYTHON_INSTALL_MIRROR to a reachable mirror of python-build-standalone's releases, then run again"
    PY=$(UV_PYTHON_INSTALL_DIR=$UV_PY_DIR "$UV_BOOT/bin/uv" python find --managed-python "$PY_V") \
        || die "uv installed CPython $PY_V but cannot find it in $UV_PY_DIR (above)"
fi
if [ "$PY_HOW" = found ] && [ ${#APT_PYTHON[@]} -gt 0 ]; then
    python_version_of "$PY" >/dev/null || die "$PY still lacks the venv module after step 1 (above)"
fi
if [ "$PY_HOW" != venv ]; then
    say "creating $VENV with $PY (Python $PY_V)"
    made=0; [ -e "$VENV" ] || made=1
    if ! "$PY" -m venv "$VENV"; then
        [ "$made" = 0 ] || rm -rf "$VENV"   # a venv this run began is not left half-made
        die "could not create the venv (Debian/Ubuntu: sudo apt-get install python$PY_V-venv)"
    fi
fi
if [ "${COURSE_SETUP_VENV_ONLY:-0}" = 1 ]; then
    say "COURSE_SETUP_VENV_ONLY=1: stopping after step 2 ($VENV, Python $PY_V)"
    exit 0
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)
# course_lib from this folder (the venv's editable install may not exist yet), for what set-up asks it; -P: not
# a course_lib in the folder set-up was started from.
course_py() { PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$VENV/bin/python" -P "$@"; }
# The TensorFlow build this machine takes: asked, never decided here (COURSE_GPU=1/0 forces it).
variant_line=$(course_py -m course_lib.environment.tensorflow_build variant) \
    || die "could not decide the TensorFlow build (above)"
variant=${variant_line%%$'\t'*}
variant_why=${variant_line#*$'\t'}

# The room's proxy lock counts when present (the learner edition ships without classroom/).
ROOM_LOCK=()
[ -f "$ROOT/classroom/package-lock.json" ] && ROOM_LOCK=("$ROOT/classroom/package-lock.json")
HVD_VERSION=$(pin horovod)
HVD_PATCH=$ROOT/requirements/patches/horovod-$HVD_VERSION.patch
# The source package set-up builds from (PyPI's horovod-0.28.1.tar.gz), checked before it is unpacked.
HVD_SDIST_SHA256=92a43f5a94c43907a56805bad15f19700c62ffc83b7ca483f9e104e229f67ef0
# A line hunk 4 of the patch adds to horovod/tensorflow/keras/callbacks.py: its presence in the installed
# file shows the patched build is the one installed (course_lib.environment.doctor checks the same line).
HVD_PATCH_MARKER="K = keras.backend  # tf.keras's own backend"
stamp_id=$( { cat "$CONSTRAINTS" "$ROOT/pyproject.toml" "${BASH_SOURCE[0]}" "$ROOT/tools/jupyterlab-overrides.json" "${ROOM_LOCK[@]}" "$HVD_PATCH"; echo "$variant"; } | sha256sum | cut -c1-16)
STAMP=$VENV/.course-setup-$stamp_id-$PROFILE
if [ "$PROFILE" = learner ] && [ -f "$VENV/.course-setup-$stamp_id-full" ]; then
    STAMP=$VENV/.course-setup-$stamp_id-full  # a full set-up includes everything the learner needs
fi
# Notebook 07's second venv (PyTorch, JAX, Keras 3), beside this one and never in it: its own script and stamp
# (returns at once when set up; docs/decisions/frameworks-venv.md). Called here when this venv is set up, else
# after step 3, where uv is installed for it to use.
frameworks() { COURSE_VENV=$VENV bash "$ROOT/tools/setup_frameworks.sh" "$variant"; }
if [ -f "$STAMP" ] && [ "${COURSE_FORCE_SETUP:-0}" != 1 ] && [ -x "$VENV/bin/horovodrun" ] \
        && "$VENV/bin/python" -c "import course_lib"; then
    frameworks
    say "already set up ($variant build, $PROFILE profile, stamp $stamp_id); checked in $(( $(date +%s) - START )) s"
    exit 0
fi

# --- 3. the pinned stack ------------------------------------------------------------------------------
# A venv made for another TensorFlow (a learner's .venv from before an upgrade of the course) is upgraded in
# place; its Horovod, compiled against the old TensorFlow, is removed first and built again in step 4.
old_tf=$(course_py -m course_lib.environment.tensorflow_build installed) || old_tf=
if [ -n "$old_tf" ] && [ "$old_tf" != "$(pin tensorflow)" ]; then
    say "upgrading $VENV from TensorFlow $old_tf to $(pin tensorflow) (Horovod is built again against it)"
    "${PIP[@]}" uninstall -q -y horovod || true
fi
say "installing the pinned stack ($variant build of TensorFlow $(pin tensorflow): $variant_why)"
"${PIP[@]}" install -q "pip==$(pin pip)" "setuptools==$(pin setuptools)" "wheel==$(pin wheel)"
# tensorflow and tensorflow-cpu install the same tensorflow/ folder: one installed over the other leaves a mix,
# and removing one afterwards deletes files the other needs. So a build this machine does not take (a venv made
# before the course installed tensorflow-cpu, or on a machine that since gained or lost a GPU) is removed
# first, and Horovod with it (it was compiled against that build), and tf-keras (installed again below; left
# in place, its requirement on `tensorflow` would make pip report a conflict while it installs tensorflow-cpu).
unwanted=$(course_py -m course_lib.environment.tensorflow_build unwanted "$variant") \
    || die "could not read which TensorFlow build this venv holds (above)"
if [ -n "$unwanted" ]; then
    say "removing $unwanted, tf-keras and Horovod: this machine takes the $variant build"
    # shellcheck disable=SC2086  # one word per distribution
    "${PIP[@]}" uninstall -q -y $unwanted tf-keras horovod
fi
# The stack: pyproject.toml's extra named by the variant (gpu: tensorflow[and-cuda] with tf-keras; cpu:
# tensorflow-cpu) and the profile's extras. tf-keras requires `tensorflow` by that name: on cpu it is installed
# after the stack, without its dependencies (uv and pip alike), and the check below ("pip check" with
# tensorflow-cpu standing for tensorflow) shows nothing is missing or conflicting.
STACK=(-e "${ROOT}[$variant,$EXTRAS]")
KERAS2=()
if [ "$variant" = cpu ]; then KERAS2=(--no-deps "tf-keras==$(pin tf_keras)"); fi
# uv where it can (tools/uv_install.py): it downloads in parallel and links files from its cache, so that a
# second set-up on a machine installs in seconds; it is given pip's configuration of this machine (indexes,
# find-links, constraints, certificate) and leaves the work to pip when a setting has no uv equivalent, when
# uv cannot be installed or fails, or with COURSE_NO_UV=1. --compile-bytecode: pip's .pyc files, on every core.
uv_install() {
    "$VENV/bin/python" "$ROOT/tools/uv_install.py" "$VENV/bin/uv" "$VENV/bin/python" --quiet --compile-bytecode \
        -c "$CONSTRAINTS" "$@"
}
installed_with=
if [ "${COURSE_NO_UV:-0}" != 1 ]; then
    if ! "${PIP[@]}" install -q "uv==$(pin uv)"; then
        say "uv $(pin uv) could not be installed (above): installing with pip"
    elif uv_install "${STACK[@]}" && { [ ${#KERAS2[@]} = 0 ] || uv_install "${KERAS2[@]}"; }; then
        installed_with=uv
    else
        rc=$?
        [ "$rc" = 3 ] || say "uv could not install the stack (status $rc, above): installing with pip"
    fi
fi
if [ -z "$installed_with" ]; then
    # --no-compile, then compileall on every core: pip byte-compiles the ~14 000 .py files it unpacks on one
    # core (about half of this step's time); compileall -j 0 writes the same .pyc files (timestamp-checked, as
    # pip's) on all of them. As with pip, a file that does not compile only loads from source; compileall lists
    # it. (-W ignore: third-party SyntaxWarnings, which pip's compile hides too.)
    "${PIP[@]}" install -q --no-compile -c "$CONSTRAINTS" "${STACK[@]}"
    [ ${#KERAS2[@]} = 0 ] || "${PIP[@]}" install -q --no-compile -c "$CONSTRAINTS" "${KERAS2[@]}"
    "$VENV/bin/python" -W ignore -m compileall -q -j 0 \
        "$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
        || say "WARNING: the files listed above did not byte-compile; they will load from source (slower)"
fi

problems=$(course_py -m course_lib.environment.tensorflow_build check) \
    || die "the installed packages are not consistent (pip check, tensorflow-cpu standing for tensorflow):
$problems"
# Notebook 07's venv is built while steps 4-6 run (they are mostly one core's work: a wheel install, npm, the
# data's preparation), in a session of its own so that an interrupted or failed set-up ends it with everything
# it started; its lines are shown when it ends (before the stamp), and set-up fails if it failed.
FW_LOG=$(mktemp "${TMPDIR:-/tmp}/course-frameworks.XXXXXX")
COURSE_VENV=$VENV setsid bash "$ROOT/tools/setup_frameworks.sh" "$variant" >"$FW_LOG" 2>&1 &
FW_PID=$!
HVD_SRC=
cleanup() {
    if [ -n "${FW_PID:-}" ]; then
        kill -TERM -- "-$FW_PID" 2>/dev/null || true
        wait "$FW_PID" 2>/dev/null || true
    fi
    rm -f "${FW_LOG:-}"
    [ -z "${HVD_SRC:-}" ] || rm -rf "$HVD_SRC"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- 4. Horovod, compiled against this TensorFlow ------------------------------------------------------
# Horovod's TensorFlow extension loads and has Gloo: the doctor's probe (course_lib.environment.doctor,
# one import of TensorFlow instead of the six of `horovodrun --check-build`).
HVD_PROBE='import sys; from course_lib.environment.doctor import horovod_build_info
info = horovod_build_info()
if info.get("TensorFlow") is True and info.get("Gloo"):  # kept for horovodrun: no question at a first launch
    from course_lib.runner.horovodrun import remember_answers
    remember_answers({"mpi_built": bool(info.get("MPI")), "gloo_built": True})
sys.exit(0 if info.get("TensorFlow") is True and info.get("Gloo") else f"build: {info}")'
hvd_has_tf() {
    [ -x "$VENV/bin/horovodrun" ] || { HVD_WHY="no horovodrun in $VENV/bin"; return 1; }
    HVD_WHY=$("$VENV/bin/python" -c "$HVD_PROBE" 2>&1 | tail -n 3) && return 0
    return 1
}
hvd_callbacks() {  # the installed horovod/tensorflow/keras/callbacks.py (found without importing TensorFlow)
    "$VENV/bin/python" -c 'import importlib.util, os
spec = importlib.util.find_spec("horovod")
print(os.path.join(spec.submodule_search_locations[0], "tensorflow", "keras", "callbacks.py"))'
}
hvd_patched() {
    local f
    f=$(hvd_callbacks 2>/dev/null) && [ -f "$f" ] && grep -qF "$HVD_PATCH_MARKER" "$f"
}
# A wheel built before from the same inputs (tools/wheel_cache.py: the source's sha256, the patch, Python,
# the TensorFlow build by name and version (tensorflow-cpu or tensorflow), variant, build flags, architecture) is installed instead of building again, then checked like a
# fresh build; COURSE_NO_BUILD_CACHE=1 always builds.
WHEEL_CACHE=$ROOT/tools/wheel_cache.py
HVD_KEY=
hvd_flags=$(command -v mpicxx >/dev/null && echo mpi || echo nompi)
if [ "${COURSE_NO_BUILD_CACHE:-0}" != 1 ] && [ -f "$WHEEL_CACHE" ]; then
    HVD_KEY=$("$VENV/bin/python" "$WHEEL_CACHE" key "$HVD_SDIST_SHA256" "$HVD_PATCH" "$variant" "$hvd_flags" \
        "$(uname -m)" "$("$VENV/bin/python" "$WHEEL_CACHE" built-against)") || HVD_KEY=
fi
if "$VENV/bin/python" -c "import horovod, sys; sys.exit(horovod.__version__ != '$HVD_VERSION')" 2>/dev/null \
        && hvd_has_tf && hvd_patched; then
    say "Horovod $HVD_VERSION already built with TensorFlow and the course's patches"
elif [ -n "$HVD_KEY" ] && cached=$("$VENV/bin/python" "$WHEEL_CACHE" find "$HVD_KEY") \
        && { "${PIP[@]}" uninstall -q -y horovod || true; } \
        && "${PIP[@]}" install -q -c "$CONSTRAINTS" "$cached" && hvd_has_tf && hvd_patched; then
    say "Horovod $HVD_VERSION installed from the wheel this machine built before ($cached; checked like a build)"
else
    if [ -n "$HVD_KEY" ] && [ -n "${cached:-}" ]; then
        say "the cached Horovod wheel $cached failed its checks ($HVD_WHY): dropped, building"
        "$VENV/bin/python" "$WHEEL_CACHE" drop "$HVD_KEY"
    fi
    command -v g++ >/dev/null && command -v cmake >/dev/null \
        || die "Horovod needs a C++ compiler and cmake: sudo apt-get install -y g++ cmake (then run again)"
    export HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1
    if command -v mpicxx >/dev/null; then export HOROVOD_WITH_MPI=1; fi
    if [ "$variant" = gpu ]; then export HOROVOD_GPU_OPERATIONS=NCCL; fi
    export MAKEFLAGS="-j$(nproc)"
    # CMake >= 4 (Ubuntu 26.04 ships 4.2) refuses the cmake_minimum_required(VERSION 2.8...) of Horovod's bundled
    # Gloo unless told which policies to assume; older CMakes ignore the variable (tests/test_cmake4.py).
    cmake_major=$(cmake --version | sed -n -E '1s/^cmake version ([0-9]+).*/\1/p')
    if [ "${cmake_major:-0}" -ge 4 ]; then export CMAKE_POLICY_VERSION_MINIMUM=3.5; fi
    [ -f "$HVD_PATCH" ] || die "the patch file $HVD_PATCH is missing"
    command -v patch >/dev/null || die "Horovod's source needs the course's patches: sudo apt-get install -y patch"
    HVD_SRC=$(mktemp -d "${TMPDIR:-/tmp}/course-horovod.XXXXXX")   # removed by cleanup on any exit
    "${PIP[@]}" download -q --no-deps --no-binary :all: --no-cache-dir -d "$HVD_SRC" "horovod==$HVD_VERSION" \
        || die "could not download horovod-$HVD_VERSION.tar.gz from the package index (see above)"
    sdist=$HVD_SRC/horovod-$HVD_VERSION.tar.gz
    [ -f "$sdist" ] || die "pip download left no $sdist"
    got=$(sha256sum "$sdist" | cut -d' ' -f1)
    [ "$got" = "$HVD_SDIST_SHA256" ] || die "horovod-$HVD_VERSION.tar.gz has sha256 $got, expected $HVD_SDIST_SHA256:
    not the source package the course's patches were made for; remove it from any local index and run again"
    tar -xzf "$sdist" -C "$HVD_SRC"
    say "applying $(basename "$HVD_PATCH") to Horovod $HVD_VERSION"
    (cd "$HVD_SRC/horovod-$HVD_VERSION" && patch -p1 --dry-run --batch --silent <"$HVD_PATCH") \
        || die "$(basename "$HVD_PATCH") does not apply to horovod-$HVD_VERSION.tar.gz (output above); nothing was built"
    (cd "$HVD_SRC/horovod-$HVD_VERSION" && patch -p1 --batch --silent <"$HVD_PATCH")
    say "building Horovod $HVD_VERSION against TensorFlow (about 2-4 minutes on 2 cores)"
    "${PIP[@]}" uninstall -q -y horovod || true
    "${PIP[@]}" wheel -q --no-deps --no-cache-dir --no-build-isolation -c "$CONSTRAINTS" \
        -w "$HVD_SRC/wheel" "$HVD_SRC/horovod-$HVD_VERSION"
    "${PIP[@]}" install -q -c "$CONSTRAINTS" "$HVD_SRC"/wheel/horovod-*.whl   # with its dependencies (cloudpickle...)
    hvd_has_tf || die "Horovod was built without TensorFlow or Gloo support ($HVD_WHY); see the build log above"
    hvd_patched || die "the installed Horovod ($(hvd_callbacks)) lacks the course's patch line: $HVD_PATCH_MARKER"
    if [ -n "$HVD_KEY" ]; then
        kept=$("$VENV/bin/python" "$WHEEL_CACHE" store "$HVD_KEY" "$HVD_SRC"/wheel/horovod-*.whl) \
            && say "kept the wheel for the next set-up on this machine: $kept"
    fi
    rm -rf "$HVD_SRC"; HVD_SRC=
fi

# --- 5. Jupyter kernel --------------------------------------------------------------------------------
"$VENV/bin/python" -m ipykernel install --sys-prefix --name python3 \
    --display-name "Python 3 (course .venv)" >/dev/null
# No news or update pop-ups in the lab: they need the internet and distract a room of learners.
mkdir -p "$VENV/share/jupyter/lab/settings"
cp "$ROOT/tools/jupyterlab-overrides.json" "$VENV/share/jupyter/lab/settings/overrides.json"

# --- 5b. the room's proxy (make room, full profile): configurable-http-proxy, pinned by classroom/package-lock.json
if [ "$PROFILE" = full ] && [ -f "$ROOT/classroom/package-lock.json" ]; then
    PROXY_DIR=$ROOT/build/classroom-proxy
    if [ -x "$PROXY_DIR/node_modules/.bin/configurable-http-proxy" ] \
            && cmp -s "$ROOT/classroom/package-lock.json" "$PROXY_DIR/package-lock.json"; then
        say "configurable-http-proxy already installed"
    elif command -v npm >/dev/null; then
        mkdir -p "$PROXY_DIR"
        cp "$ROOT/classroom/package.json" "$ROOT/classroom/package-lock.json" "$PROXY_DIR/"
        (cd "$PROXY_DIR" && npm ci --no-audit --no-fund --omit=dev --loglevel=error) \
            || die "npm ci of configurable-http-proxy failed (see above); make room needs it"
    else
        say "WARNING: npm not found: make room (and tests/test_room.py) need it: sudo apt-get install -y nodejs npm"
    fi
fi

# --- 6. the data, prepared once for tfds (notebooks then start at once) ----------------------------------
"$VENV/bin/python" -m course_lib prepare-data \
    || say "WARNING: Fashion-MNIST could not be prepared now; run \`make doctor\` to see why"

fw_status=0
wait "$FW_PID" || fw_status=$?
FW_PID=
cat "$FW_LOG"
[ "$fw_status" = 0 ] || die "notebook 07's venv (tools/setup_frameworks.sh) failed with status $fw_status (its lines above)"

rm -f "$VENV"/.course-setup-*
date -u +%FT%TZ > "$STAMP"
say "done in $(( $(date +%s) - START )) s; check it with: make doctor"
