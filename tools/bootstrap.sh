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
#   Extras test,plot by default (pytest, matplotlib); EXTRAS=test,plot,gpu adds PyCUDA (needs CUDA's nvcc).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
# Every path is made absolute here: PETSc's configure and pip's builds run in other directories, so a relative
# VENV or CARDIOSIM_CACHE (make's default is VENV=.venv) would name a different place there.
absolute() { case $1 in /*) printf '%s' "$1" ;; *) printf '%s/%s' "$PWD" "$1" ;; esac; }
venv=$(absolute "${VENV:-$here/.venv}")
python=${PYTHON:-python3}
extras=${EXTRAS:-test,plot}
petsc_version=3.26.1
cache=$(absolute "${CARDIOSIM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cardiosim}")

say() { printf '[bootstrap %4ds] %s\n' "$SECONDS" "$*"; }
die() { printf '[bootstrap] error: %s\n' "$*" >&2; exit 1; }

"$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
    || die "$python is older than 3.10; set PYTHON=/path/to/python3.10+"

if [ ! -x "$venv/bin/python" ]; then
    say "creating $venv"
    "$python" -m venv "$venv"
fi
vpy="$venv/bin/python"
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

# --- PETSc and petsc4py ----------------------------------------------------------------------------------------
petsc_ok() { "$vpy" - <<'PY' 2>/dev/null
import sys, petsc4py
petsc4py.init([])
from petsc4py import PETSc
v = PETSc.Vec().createSeq(3); v.set(1.0); assert v.sum() == 3.0
PY
}

have_lapack() {
    ldconfig -p 2>/dev/null | grep -q 'liblapack\.so ' && ldconfig -p 2>/dev/null | grep -q 'libblas\.so '
}

if petsc_ok; then
    say "PETSc: petsc4py already works"
elif [ -n "${PETSC_DIR:-}" ]; then
    say "PETSc: building petsc4py against PETSC_DIR=$PETSC_DIR PETSC_ARCH=${PETSC_ARCH:-}"
    pip install --no-build-isolation "petsc4py"
    petsc_ok || die "petsc4py does not import against PETSC_DIR=$PETSC_DIR; check PETSC_DIR/PETSC_ARCH"
else
    pyver=$("$vpy" -c 'import sys; print("%d%d" % sys.version_info[:2])')
    wheels=$cache/wheels/petsc-$petsc_version-py$pyver-$mpi_key
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
            if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
                say "BLAS/LAPACK: installing Debian's liblapack-dev"
                (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq liblapack-dev) >/dev/null
            else
                die "PETSc needs BLAS/LAPACK and none was found; install liblapack-dev (or set PETSC_DIR to an existing PETSc)"
            fi
        fi
        say "PETSc $petsc_version: building from the PyPI sources, then petsc4py (about 20 minutes together on 2 cores; once per machine)"
        mkdir -p "$wheels"
        tmp=$(mktemp -d "$cache/build.XXXXXX")
        # Optimised, no Fortran; configure finds BLAS/LAPACK by itself.
        export PETSC_CONFIGURE_OPTIONS="${PETSC_CONFIGURE_OPTIONS:---with-fc=0 --with-debugging=0 COPTFLAGS=-O2 CXXOPTFLAGS=-O2}"
        pip wheel --no-deps -w "$tmp" "petsc==$petsc_version"
        pip install --no-deps "$tmp"/petsc-*.whl
        say "petsc4py $petsc_version: building"
        # petsc4py is one generated C file of 35 MB compiled on one core, by default with Python's "-g ... -O3".
        # Its debug information (70 of the object's 80 MB) is not used and -O3 buys nothing measurable in wrapper
        # code: -g0 -O2 takes 41 % less compiler time (measured on 2 cores: 407 s against 695 s of CPU time).
        CFLAGS="${CFLAGS:-} -g0 -O2" pip wheel --no-deps --no-build-isolation -w "$tmp" "petsc4py==$petsc_version"
        pip install --no-deps "$tmp"/petsc4py-*.whl
        petsc_ok || die "petsc4py was built but does not import; see the messages above"
        mv "$tmp"/*.whl "$wheels"/ && rmdir "$tmp"
    fi
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
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "Sundials: Debian's CVODES libraries, headers into $venv/sundials (for Myokit's CVODES in the tests)"
        sundials_into_venv >/dev/null || say "Sundials: apt-get failed; the tests that need CVODES will skip"
    else
        say "Sundials: not found and cannot install it (not root or no apt-get); the CVODES tests will skip"
    fi
fi

# --- cardiosim itself -----------------------------------------------------------------------------------------
pip install -e "$here[$extras]"
say "done: $venv"
