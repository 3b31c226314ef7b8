#!/usr/bin/env bash
# Sets up .venv for cardiosim on a fresh machine: MPI, mpi4py, PETSc + petsc4py, numpy, h5py, test tools.
# Called by `make` on first use; safe to re-run. Nothing here needs a person to answer.
#
#   MPI    an mpicc on PATH (clusters) is used as it is; otherwise MPICH from PyPI.
#   PETSc  PETSC_DIR/PETSC_ARCH when set (clusters); otherwise PETSc and petsc4py built from the PyPI sources
#          (~20 min on 2 cores), cached as wheels under $CARDIOSIM_CACHE so the next fresh clone on this machine installs
#          in seconds. A cached wheel that does not import is thrown away and rebuilt: a cold start never fails.
#   BLAS   PETSc needs LAPACK; where none is installed and apt-get can be run (root), liblapack-dev is installed.
#   Sundials  Myokit's CVODES simulation (the independent integrator of the CellML tests) needs the Sundials
#          libraries, which the myokit wheel does not bundle; where they are missing and apt-get can be run (root),
#          Debian's two runtime libraries are installed and the headers of libsundials-dev unpacked into
#          $VENV/sundials (not the package itself: it pulls in Open MPI, whose mpicc the next set-up would take for
#          the system MPI). Elsewhere those tests skip (CI requires them: CARDIOSIM_REQUIRE).
#   Extras test,plot,movie by default (pytest, matplotlib, imageio-ffmpeg: the ffmpeg of cardiosim plot --movie's
#          MP4s, a 68 MB wheel; without it movies are GIFs); EXTRAS=test,plot,movie,gpu adds PyCUDA (needs CUDA's nvcc).
#   GPUs   where nvcc is on PATH and nvidia-smi lists a GPU (or CARDIOSIM_GPU=1, e.g. on a login node without GPUs):
#          PETSc is built with CUDA for the GPU's architecture (CARDIOSIM_CUDA_ARCH=90 to choose it), a PETSC_DIR
#          must have CUDA, and PyCUDA is built from its PyPI sources (beside PETSc, in the background); both cached
#          as wheels like the CPU ones. CARDIOSIM_GPU=0: the CPU set-up whatever the machine has.
#   Offline  CARDIOSIM_WHEELHOUSE=DIR[:DIR...]: pip takes every package from these folders of wheels and sdists
#          (`pip download` them on a machine that reaches PyPI; tools/gpu/wheelhouse.sh) and never asks an index;
#          nothing is fetched with apt-get either. CARDIOSIM_SYSTEM_SITE=1: a new venv also sees the packages of the
#          Python it is made from (an image's or a module's numpy, scipy, h5py, mpi4py), so they need not be carried.
set -euo pipefail
plan=0
case ${1:-} in
    --plan) plan=1 ;;            # say what would be set up (GPU or not, from where), change nothing
    "") ;;
    *) printf '[bootstrap] error: unknown argument %s (only --plan)\n' "$1" >&2; exit 2 ;;
esac

here=$(cd "$(dirname "$0")/.." && pwd)
# Every path is made absolute here: PETSc's configure and pip's builds run in other directories, so a relative
# VENV or CARDIOSIM_CACHE (make's default is VENV=.venv) would name a different place there.
absolute() { case $1 in /*) printf '%s' "$1" ;; *) printf '%s/%s' "$PWD" "$1" ;; esac; }
venv=$(absolute "${VENV:-$here/.venv}")
python=${PYTHON:-python3}
extras=${EXTRAS:-test,plot,movie}
petsc_version=3.26.1
cache=$(absolute "${CARDIOSIM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cardiosim}")

say() { printf '[bootstrap %4ds] %s\n' "$SECONDS" "$*"; }
die() { printf '[bootstrap] error: %s\n' "$*" >&2; exit 1; }

"$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
    || die "$python is older than 3.10; set PYTHON=/path/to/python3.10+"

# --- GPU or CPU ----------------------------------------------------------------------------------------------------
# A GPU set-up needs CUDA's compiler (PETSc's CUDA sources, PyCUDA) and the architecture to compile for: the first
# GPU's, or CARDIOSIM_CUDA_ARCH where none is here (a login node). PETSc with CUDA runs on a machine without a GPU
# too (its device starts lazily), so a login node may set up for the compute nodes.
gpu=${CARDIOSIM_GPU:-auto}
nvcc=$(command -v nvcc || true)
gpu_list=$(nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader 2>/dev/null || true)
case $gpu in
    0) say "GPU: no (CARDIOSIM_GPU=0): PETSc for CPUs, no PyCUDA" ;;
    1) [ -n "$nvcc" ] || die "CARDIOSIM_GPU=1 but no nvcc on PATH: load CUDA (its bin/ on PATH) first" ;;
    auto)
        if [ -n "$nvcc" ] && [ -n "$gpu_list" ]; then
            gpu=1
        else
            gpu=0
            why=$([ -z "$nvcc" ] && echo "no nvcc on PATH" || echo "nvcc but no GPU that nvidia-smi lists")
            say "GPU: no ($why): PETSc for CPUs (CARDIOSIM_GPU=1 builds for GPUs, e.g. on a login node)"
        fi ;;
    *) die "CARDIOSIM_GPU=$gpu: use 1 (build for GPUs), 0 (CPUs only) or leave it unset (GPUs where nvcc and a GPU are seen)" ;;
esac
cuda_key=""
if [ "$gpu" = 1 ]; then
    cuda_root=$("$nvcc" -v -E -x cu /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p' | head -n 1)
    cuda_root=$(cd "${cuda_root:-$(dirname "$nvcc")/..}" && pwd -P)
    cuda_version=$("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
    arch=${CARDIOSIM_CUDA_ARCH:-$(printf '%s\n' "$gpu_list" | head -n 1 | sed 's/.*,[[:space:]]*//; s/\.//')}
    [[ $arch =~ ^[0-9]+$ ]] || die "CARDIOSIM_GPU=1 and no GPU here to read the architecture from: set CARDIOSIM_CUDA_ARCH (90 for H100/H200, 80 for A100)"
    gpus=$(printf '%s\n' "$gpu_list" | grep -c . || true)
    seen="$gpus GPU(s) seen"
    [ "$gpus" = 0 ] || seen="$seen: $(printf '%s\n' "$gpu_list" | head -n 1 | cut -d, -f1)"
    say "GPU: yes (nvcc $cuda_version at $cuda_root; $seen): PETSc with CUDA for sm_$arch, PyCUDA (CARDIOSIM_GPU=0 for CPUs only)"
    cuda_key=-cuda$cuda_version-sm$arch
    case ",$extras," in *,gpu,*) ;; *) extras=$extras,gpu ;; esac
fi

# --- where packages come from ------------------------------------------------------------------------------------
offline=0
if [ -n "${CARDIOSIM_WHEELHOUSE:-}" ]; then
    links=""
    IFS=: read -ra dirs <<< "$CARDIOSIM_WHEELHOUSE"
    for d in "${dirs[@]}"; do
        [ -d "$d" ] || die "CARDIOSIM_WHEELHOUSE: $d is not a folder (a folder of wheels and sdists, or several joined by :)"
        links="$links $(absolute "$d")"
    done
    export PIP_NO_INDEX=1 PIP_FIND_LINKS="${links# }"
    offline=1
    say "packages: only from $PIP_FIND_LINKS (CARDIOSIM_WHEELHOUSE; no index, no apt-get)"
fi

if [ -n "${PETSC_DIR:-}" ]; then
    say "PETSc: PETSC_DIR=$PETSC_DIR PETSC_ARCH=${PETSC_ARCH:-}$([ "$gpu" = 1 ] && echo " (must have CUDA)")"
fi
[ "$plan" = 1 ] && exit 0

if [ ! -x "$venv/bin/python" ]; then
    say "creating $venv"
    see_theirs=${CARDIOSIM_SYSTEM_SITE:-0}
    if ! "$python" -m venv "$venv" 2>/dev/null; then
        # Debian's and Ubuntu's python3 without python3-venv has no ensurepip: a venv without pip of its own, which
        # runs the pip of $python (seen through the .pth below) and installs into the venv.
        rm -rf "$venv"
        "$python" -m pip --version >/dev/null 2>&1 \
            || die "$python cannot make a venv (no ensurepip: install python3-venv) and has no pip to use instead"
        say "venv: $python has no ensurepip; a venv using its pip and seeing its packages"
        "$python" -m venv --without-pip "$venv"
        see_theirs=1
    fi
    if [ "$see_theirs" = 1 ]; then
        # A .pth naming the site-packages of $python, after the venv's own: where $python is itself a venv (an image's
        # /opt/.../.venv), --system-site-packages would show the base interpreter's packages instead of these.
        purelib=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
        "$python" -c 'import site, sys; print("\n".join(site.getsitepackages()))' > "$purelib/zz-cardiosim-base-site.pth"
        say "venv: also sees the packages of $python ($(tr '\n' ' ' < "$purelib/zz-cardiosim-base-site.pth" | sed 's/ $//'))"
    fi
fi
vpy="$venv/bin/python"
# Open MPI's mpiexec refuses root unless told (containers, the GPU nodes): PETSc's configure and mpi4py's checks
# run it.
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
pip() { "$vpy" -m pip --disable-pip-version-check -q "$@"; }
pip install --upgrade pip setuptools wheel

# --- MPI -----------------------------------------------------------------------------------------------------
# A system MPI wins (clusters: its mpirun knows the interconnect and the scheduler). mpi4py is then built against
# it. Otherwise MPICH from PyPI, with the mpi4py wheel that uses it.
if [ -z "${MPICC:-}" ] && command -v mpicc >/dev/null 2>&1 && [ "$(command -v mpicc)" != "$venv/bin/mpicc" ]; then
    export MPICC=$(command -v mpicc)
fi
if [ -n "${MPICC:-}" ]; then
    say "MPI: system ($MPICC)"
    mpi_key=$(basename "$(dirname "$(dirname "$MPICC")")")-$("$MPICC" -show 2>/dev/null | md5sum | cut -c1-8)
    "$vpy" -c 'import mpi4py' 2>/dev/null || pip install --no-binary mpi4py mpi4py
else
    say "MPI: MPICH from PyPI"
    pip install 'mpich>=4.2' 'mpi4py>=4'
    export MPICC=$venv/bin/mpicc
    mpi_key=pypi-mpich-$("$vpy" -c 'import importlib.metadata as m; print(m.version("mpich"))')
fi
export PATH=$venv/bin:$PATH

pip install 'numpy>=1.24' 'h5py>=3.8' 'cython>=3'
pyver=$("$vpy" -c 'import sys; print("%d%d" % sys.version_info[:2])')

# --- PyCUDA, built in the background while PETSc builds (one core of many; it takes a few minutes) --------------
pycuda_job=""
if [ "$gpu" = 1 ] && ! "$vpy" -c 'import pycuda' 2>/dev/null; then
    pycuda_wheels=$cache/wheels/pycuda-py$pyver-cuda$cuda_version
    if ls "$pycuda_wheels"/pycuda-*.whl >/dev/null 2>&1; then
        say "PyCUDA: cached wheel from $pycuda_wheels"
    else
        say "PyCUDA: building from the PyPI sources against $cuda_root (in the background)"
        mkdir -p "$pycuda_wheels"
        pycuda_tmp=$(mktemp -d "$cache/build.XXXXXX")
        # PyCUDA takes CUDA's root from the first nvcc on PATH (a wrapper in /usr/local/bin would give /usr/local).
        # In a process group of its own, so that a set-up that stops early (a failed PETSc build) ends it too.
        PATH=$cuda_root/bin:$PATH setsid "$vpy" -m pip --disable-pip-version-check -q wheel --no-cache-dir --no-deps \
            --no-build-isolation -w "$pycuda_tmp" pycuda >"$pycuda_tmp/build.log" 2>&1 &
        pycuda_job=$!
        trap '[ -z "$pycuda_job" ] || kill -- "-$pycuda_job" 2>/dev/null || true' EXIT
    fi
fi

# --- PETSc and petsc4py ----------------------------------------------------------------------------------------
petsc_ok() { CUDA_WANTED=$gpu "$vpy" - <<'PY' 2>/dev/null
import os, sys, petsc4py
petsc4py.init([])
from petsc4py import PETSc
v = PETSc.Vec().createSeq(3); v.set(1.0); assert v.sum() == 3.0
assert os.environ["CUDA_WANTED"] != "1" or PETSc.Sys.hasExternalPackage("cuda")
PY
}

have_lapack() {
    ldconfig -p 2>/dev/null | grep -q 'liblapack\.so ' && ldconfig -p 2>/dev/null | grep -q 'libblas\.so '
}

if petsc_ok; then
    say "PETSc: petsc4py already works$([ "$gpu" = 1 ] && echo ", with CUDA")"
elif [ -n "${PETSC_DIR:-}" ]; then
    say "PETSc: building petsc4py against PETSC_DIR=$PETSC_DIR PETSC_ARCH=${PETSC_ARCH:-}"
    pip install --no-build-isolation "petsc4py"
    gpu=0 petsc_ok || die "petsc4py does not import against PETSC_DIR=$PETSC_DIR; check PETSC_DIR/PETSC_ARCH"
    petsc_ok || die "PETSC_DIR=$PETSC_DIR has no CUDA, and this is a GPU set-up: point PETSC_DIR/PETSC_ARCH at a PETSc configured --with-cuda, unset PETSC_DIR to build one here, or CARDIOSIM_GPU=0 for CPUs only"
else
    if "$vpy" -c 'import petsc4py' 2>/dev/null && gpu=0 petsc_ok; then
        say "PETSc: the installed one has no CUDA; replacing it with one built with CUDA"
        pip uninstall -y petsc4py petsc >/dev/null 2>&1 || true
    fi
    wheels=$cache/wheels/petsc-$petsc_version$cuda_key-py$pyver-$mpi_key
    if ls "$wheels"/petsc4py-*.whl >/dev/null 2>&1; then
        say "PETSc: installing cached wheels from $wheels"
        pip install --no-deps "$wheels"/petsc-*.whl "$wheels"/petsc4py-*.whl || true
        if ! petsc_ok; then
            say "PETSc: cached wheels do not work here; rebuilding"
            rm -rf "$wheels"
            pip uninstall -y petsc4py petsc >/dev/null 2>&1 || true
        fi
    fi
    if ! petsc_ok; then
        if ! have_lapack; then
            if [ "$offline" = 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
                say "BLAS/LAPACK: installing Debian's liblapack-dev"
                (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq liblapack-dev) >/dev/null
            else
                die "PETSc needs BLAS/LAPACK and none was found; install liblapack-dev (or set PETSC_DIR to an existing PETSc)"
            fi
        fi
        if [ "$gpu" = 1 ]; then
            say "PETSc $petsc_version with CUDA (sm_$arch): building from the PyPI sources, then petsc4py (about 15 minutes on 16 cores, most of it nvcc; once per machine)"
        else
            say "PETSc $petsc_version: building from the PyPI sources, then petsc4py (about 20 minutes together on 2 cores; once per machine)"
        fi
        mkdir -p "$wheels"
        tmp=$(mktemp -d "$cache/build.XXXXXX")
        # Optimised, no Fortran, no X, nothing downloaded; configure finds BLAS/LAPACK (and nvcc on PATH) by itself.
        # With CUDA: one architecture only (each more is another nvcc pass over every CUDA source).
        export PETSC_CONFIGURE_OPTIONS="${PETSC_CONFIGURE_OPTIONS:---with-fc=0 --with-debugging=0 COPTFLAGS=-O2 CXXOPTFLAGS=-O2}"
        if [ "$gpu" = 1 ]; then
            # The toolkit of the nvcc found (PETSc's own search misses one whose nvcc is a wrapper elsewhere on PATH).
            PETSC_CONFIGURE_OPTIONS="$PETSC_CONFIGURE_OPTIONS --with-cuda=1 --with-cuda-dir=$cuda_root --with-cuda-arch=$arch"
            PETSC_CONFIGURE_OPTIONS="$PETSC_CONFIGURE_OPTIONS CUDAOPTFLAGS=-O2 --with-x=0"
        fi
        # --no-cache-dir: pip's own wheel cache keys a wheel built from an sdist by the sdist alone, so it would hand
        # back a PETSc built earlier with other options (a CPU one for a GPU set-up, another MPI); ours has the key.
        pip wheel --no-cache-dir --no-deps -w "$tmp" "petsc==$petsc_version"
        pip install --no-deps "$tmp"/petsc-*.whl
        say "petsc4py $petsc_version: building"
        # petsc4py is one generated C file of 35 MB compiled on one core, by default with Python's "-g ... -O3".
        # Its debug information (70 of the object's 80 MB) is not used and -O3 buys nothing measurable in wrapper
        # code: -g0 -O2 takes 41 % less compiler time (measured on 2 cores: 407 s against 695 s of CPU time).
        # The run-time path to MPI's library: PETSc's configure records the absolute folder of the venv that built
        # the wheels (the MPICH from PyPI lives in <venv>/lib), so a cached wheel installed in another venv loaded
        # MPI from the first one, and stopped importing once that was deleted. The extension module needs libmpi
        # itself and is loaded first, so a path relative to it, <venv>/lib from <venv>/lib/pythonX.Y/site-packages/
        # petsc4py/lib, brings MPI for libpetsc too.
        CFLAGS="${CFLAGS:-} -g0 -O2" LDFLAGS="${LDFLAGS:-} -Wl,-rpath,\$ORIGIN/../../../.." \
            pip wheel --no-cache-dir --no-deps --no-build-isolation -w "$tmp" "petsc4py==$petsc_version"
        pip install --no-deps "$tmp"/petsc4py-*.whl
        petsc_ok || die "petsc4py was built but does not import$([ "$gpu" = 1 ] && echo " or has no CUDA"); see the messages above"
        mv "$tmp"/*.whl "$wheels"/ && rmdir "$tmp"
    fi
fi

if [ -n "$pycuda_job" ]; then
    say "PyCUDA: waiting for its build"
    if ! wait "$pycuda_job"; then
        pycuda_job=""
        tail -n 30 "$pycuda_tmp/build.log" >&2
        die "PyCUDA did not build (the end of its log is above; all of it: $pycuda_tmp/build.log)"
    fi
    pycuda_job=""
    mv "$pycuda_tmp"/pycuda-*.whl "$pycuda_wheels"/ && rm -rf "$pycuda_tmp"
fi
if [ "$gpu" = 1 ] && ! "$vpy" -c 'import pycuda' 2>/dev/null; then
    pip install "$pycuda_wheels"/pycuda-*.whl
    say "PyCUDA: $("$vpy" -c 'import pycuda; print(pycuda.VERSION_TEXT)') installed"
fi

# --- Sundials for Myokit's CVODES simulation (tests only: cardiosim runs without it) ------------------------------
# Myokit compiles its CVODES simulation against the headers and links libsundials_cvodes and _nvecserial. Debian's
# libsundials-dev would bring them, and with them cmake, Open MPI (mpicc on PATH: the next set-up on this machine would
# build on it, and its mpirun refuses root), PETSc 3.18, hypre and gfortran. So: the two runtime libraries (they need
# only libc and libgfortran), and that package's headers and link names unpacked into $venv/sundials, where
# cardiosim.cells.cellml.myokit_cvodes() points Myokit. A Sundials of one's own: CARDIOSIM_SUNDIALS=/its/prefix.
have_sundials() {
    { [ -e "$venv/sundials/include/cvodes/cvodes.h" ] && [ -e "$venv/sundials/lib/libsundials_cvodes.so" ]; } \
        || { ldconfig -p 2>/dev/null | grep -q 'libsundials_cvodes\.so ' && [ -e /usr/include/cvodes/cvodes.h ]; }
}
sundials_into_venv() {
    local arch tmp lib so runtime
    arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
    tmp=$(mktemp -d)
    apt-get update -qq || return 1
    # the runtime packages the -dev package names (libsundials-cvodes6 and -nvecserial6 on Debian 12)
    runtime=$(apt-cache depends libsundials-dev | grep -oE 'libsundials-(cvodes|nvecserial)[0-9]+' | sort -u)
    [ -n "$runtime" ] \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $runtime \
        && (cd "$tmp" && chmod 777 . && apt-get download -qq libsundials-dev) \
        && dpkg-deb -x "$tmp"/libsundials-dev_*.deb "$tmp/x" || { rm -rf "$tmp"; return 1; }
    rm -rf "$venv/sundials" && mkdir -p "$venv/sundials/lib" \
        && cp -r "$tmp/x/usr/include" "$venv/sundials/include" || { rm -rf "$tmp" "$venv/sundials"; return 1; }
    rm -rf "$tmp"
    for lib in cvodes nvecserial; do
        # the soname (.so.6 sorts before .so.6.4.1)
        so=$(ls /usr/lib/"$arch"/libsundials_$lib.so.[0-9]* 2>/dev/null | sort | head -n 1)
        [ -n "$so" ] && ln -s "$so" "$venv/sundials/lib/libsundials_$lib.so" || { rm -rf "$venv/sundials"; return 1; }
    done
}
if ! have_sundials; then
    if [ "$offline" = 1 ]; then
        say "Sundials: not found; not installed offline (CARDIOSIM_WHEELHOUSE); the CVODES tests will skip"
    elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "Sundials: Debian's CVODES libraries, headers into $venv/sundials (for Myokit's CVODES in the tests)"
        sundials_into_venv >/dev/null || say "Sundials: apt-get failed; the tests that need CVODES will skip"
    else
        say "Sundials: not found and cannot install it (not root or no apt-get); the CVODES tests will skip"
    fi
fi

# --- cardiosim itself -----------------------------------------------------------------------------------------
pip install -e "$here[$extras]"
say "done: $venv"
