#!/bin/bash
# The mpirun command line that `horovodrun --mpi` builds, written out (Open MPI).
#
# Usage (from the repository root):
#     NP=2 HOSTS=localhost:2 bash cluster/mpirun_horovod.sh --epochs 1 --train-subset 1024
#     NP=8 HOSTFILE=cluster/hostfile.example bash cluster/mpirun_horovod.sh --epochs 5
# Arguments go to the training script unchanged: COURSE_SCRIPT, a path in the course folder or an absolute
# one (default: source_code/horovod_fmnist.py), e.g. COURSE_SCRIPT=source_code/horovod_fmnist_minimal.py.
#
#   -bind-to none -map-by slot   do not pin a rank to one core; fill each host's slots in order
#   -x NAME                      export NAME from this shell to every rank (on every node)
#   -mca pml ob1 -mca btl ^openib  plain TCP/shared memory (leave out on InfiniBand clusters)
#   -mca mpi_yield_when_idle 1   a waiting rank yields its core instead of busy-polling
#   --tag-output                 prefix every line with [job,rank]<stream>: (course_lib parses it)
# Every node needs the same repository and venv path, the data, and passwordless ssh.

set -euo pipefail

COURSE_DIR=${COURSE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
COURSE_VENV=${COURSE_VENV:-$COURSE_DIR/.venv}
NP=${NP:-2}
HOSTS=${HOSTS:-localhost:$NP}
COURSE_SCRIPT=${COURSE_SCRIPT:-source_code/horovod_fmnist.py}
case "$COURSE_SCRIPT" in
    /*) SCRIPT=$COURSE_SCRIPT ;;
    *) SCRIPT=$COURSE_DIR/$COURSE_SCRIPT ;;
esac

WHERE=(-H "$HOSTS")
if [ -n "${HOSTFILE:-}" ]; then
    WHERE=(-hostfile "$HOSTFILE")
fi
ROOT=()
if [ "$(id -u)" -eq 0 ]; then
    ROOT=(--allow-run-as-root)  # Open MPI refuses root unless told; containers often run as root
fi

COMMAND=(mpirun "${ROOT[@]}" -np "$NP" "${WHERE[@]}" -bind-to none -map-by slot --tag-output
         -x PATH -x LD_LIBRARY_PATH -x PYTHONUNBUFFERED=1 -x TF_CPP_MIN_LOG_LEVEL=2
         -mca mpi_yield_when_idle 1 -mca pml ob1 -mca btl ^openib
         "$COURSE_VENV/bin/python" "$SCRIPT" "$@")
echo "+ ${COMMAND[*]}" >&2
exec "${COMMAND[@]}"
