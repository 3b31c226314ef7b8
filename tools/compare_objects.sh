#!/usr/bin/env bash
# Compare the compiled objects of a kernel source between two source trees: whether a change to kernels/ (moving code
# between files, rewording comments) left the machine code as it was.
#
#   tools/compare_objects.sh OLD_TREE NEW_TREE [SOURCE]
#
# SOURCE (default stencil_mg.cpp) is a file of each tree's kernels/ folder, built both ways the stencil library is
# (cardiosim/solvers/multigrid.py, _build; keep the flags below equal to those):
#   host  $CXX -x c++ -O2 -std=c++14 -shared -fPIC                                         (default g++)
#   GPU   $NVCC -x cu -O3 -std=c++17 --extended-lambda -arch=$ARCH -shared -Xcompiler -fPIC -cudart shared
#         (default nvcc, sm_90; needs no GPU)
# each with the MPI flags of $MPICC (-show or --showme; default mpicc on PATH). $CUOBJDUMP and $NVDISASM: default
# on PATH (the CUDA toolkit's, or PyPI's nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm). Each tree's kernels/ folder
# is copied in turn to the same scratch path and built there, so that no path differs between the two builds.
# Compared: objdump -d of the host library and of the GPU library's host code, cuobjdump -sass of the GPU library,
# nvdisasm of its cubins, and the bytes of the libraries and cubins. Exit status 0 when the disassemblies are identical, 1 when
# any differs (the diff is printed), 2 on a usage or build error. KEEP=1 keeps the scratch folder.
set -euo pipefail

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
    sed -n '5p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
old=$(cd "$1" && pwd)
new=$(cd "$2" && pwd)
source=${3:-stencil_mg.cpp}
CXX=${CXX:-g++}
NVCC=${NVCC:-nvcc}
ARCH=${ARCH:-sm_90}
MPICC=${MPICC:-mpicc}
CUOBJDUMP=${CUOBJDUMP:-cuobjdump}
NVDISASM=${NVDISASM:-nvdisasm}
for tool in "$CXX" "$NVCC" "$CUOBJDUMP" "$NVDISASM" objdump; do
    command -v "$tool" > /dev/null || { echo "compare_objects: '$tool' not found" >&2; exit 2; }
done
for tree in "$old" "$new"; do
    [ -f "$tree/kernels/$source" ] || { echo "compare_objects: no kernels/$source in $tree" >&2; exit 2; }
done

# the MPI flags, as cardiosim.solvers.multigrid.mpi_flags takes them from the wrapper
show=$("$MPICC" -show 2>/dev/null || "$MPICC" --showme 2>/dev/null) ||
    { echo "compare_objects: '$MPICC' answers neither -show nor --showme; set MPICC" >&2; exit 2; }
mpi_host=() mpi_nvcc=()
for tok in ${show#* }; do
    case $tok in
        -I*|-L*|-l*) mpi_host+=("$tok"); mpi_nvcc+=("$tok") ;;
        -Wl,*) mpi_host+=("$tok"); mpi_nvcc+=("-Xlinker=${tok#-Wl,}") ;;
        -pthread) mpi_host+=("$tok") ;;
    esac
done

scratch=$(mktemp -d "${TMPDIR:-/tmp}/compare_objects.XXXXXX")
if [ "${KEEP:-0}" = 1 ]; then echo "compare_objects: scratch folder $scratch"; else trap 'rm -rf "$scratch"' EXIT; fi

build() {   # build TREE into $scratch/OUT: the libraries and their disassemblies
    local tree=$1 out=$scratch/$2
    rm -rf "$scratch/src" && mkdir -p "$scratch/src" "$out"
    cp -r "$tree/kernels" "$scratch/src/kernels"
    local src=$scratch/src/kernels/$source
    (
        cd "$out"
        "$CXX" -x c++ -O2 -std=c++14 -shared -fPIC "$src" -o host.so "${mpi_host[@]}"
        "$NVCC" -x cu -O3 -std=c++17 --extended-lambda -arch="$ARCH" -shared -Xcompiler -fPIC -cudart shared \
            "$src" -o cuda.so "${mpi_nvcc[@]}"
        objdump -d --no-show-raw-insn host.so > host.objdump
        objdump -d --no-show-raw-insn cuda.so > cuda.objdump
        "$CUOBJDUMP" -sass cuda.so > cuda.sass
        mkdir cubins && (cd cubins && "$CUOBJDUMP" -xelf all ../cuda.so > /dev/null)
        for c in cubins/*.cubin; do "$NVDISASM" "$c"; done > cuda.nvdisasm
    ) || { echo "compare_objects: building $tree/kernels/$source failed" >&2; exit 2; }
}

echo "compare_objects: kernels/$source of $old and $new ($CXX; $NVCC -arch=$ARCH)"
build "$old" old
build "$new" new

status=0
for f in host.objdump cuda.objdump cuda.sass cuda.nvdisasm; do
    if diff -q "$scratch/old/$f" "$scratch/new/$f" > /dev/null; then
        echo "  $f: identical ($(wc -l < "$scratch/old/$f") lines)"
    else
        echo "  $f: DIFFERS"
        diff "$scratch/old/$f" "$scratch/new/$f" | head -n 40 || true
        status=1
    fi
done
# nvcc names its temporary files by process id (tmpxft_<pid>_...), and the symbol table keeps one such name
tmpnames() { LC_ALL=C sed 's/tmpxft_[0-9a-f]\{8\}/tmpxft_XXXXXXXX/g' "$1"; }
for f in host.so cuda.so; do
    if cmp -s "$scratch/old/$f" "$scratch/new/$f"; then echo "  $f: the same bytes"
    elif cmp -s <(tmpnames "$scratch/old/$f") <(tmpnames "$scratch/new/$f"); then
        echo "  $f: the same bytes but for the name of nvcc's temporary file"
    else echo "  $f: the bytes differ (disassembly compared above)"; fi
done
for c in "$scratch"/old/cubins/*.cubin; do
    n=$(basename "$c")
    if cmp -s "$c" "$scratch/new/cubins/$n"; then echo "  $n: the same bytes"
    else echo "  $n: the bytes differ (disassembly compared above)"; fi
done
[ $status = 0 ] && echo "compare_objects: the compiled code is identical" || echo "compare_objects: the compiled code differs"
exit $status
