"""kernels/stencil_mg.cpp and its fragments (kernels/stencil_mg/*.inc, one translation unit): the stencil library's
build hash covers every fragment, every fragment is included by the main file, and the package data ships them all.
Host only, no compiler run."""

from __future__ import annotations

import configparser
import glob
import shutil
from pathlib import Path

import pytest

from cardiosim.runtime.compile import kernel_dir
from cardiosim.solvers import multigrid

ROOT = Path(__file__).resolve().parents[1]
MAIN = kernel_dir() / multigrid.SOURCE


def test_every_fragment_is_included_once_and_exists():
    files = multigrid.source_files(MAIN)
    assert files[0] == MAIN
    assert len(files) == len(set(files))
    for f in files:
        assert f.is_file(), f"{f} is included but missing"
    on_disk = sorted((kernel_dir() / "stencil_mg").glob("*"))
    assert on_disk, "no fragments in kernels/stencil_mg/"
    assert sorted(files[1:]) == on_disk, "kernels/stencil_mg/ holds a file that stencil_mg.cpp does not include"


def test_the_digest_covers_every_fragment(tmp_path):
    copy = tmp_path / "kernels"
    shutil.copytree(kernel_dir(), copy)
    main = copy / multigrid.SOURCE
    base = multigrid.source_digest(main)
    assert base == multigrid.source_digest(MAIN), "the digest depends on where the folder is"
    seen = {base}
    for f in multigrid.source_files(main):
        text = f.read_text()
        f.write_text(text + "/* changed */\n")
        changed = multigrid.source_digest(main)
        assert changed not in seen, f"changing {f.relative_to(copy)} leaves the digest as it was"
        seen.add(changed)
        f.write_text(text)
    assert multigrid.source_digest(main) == base


def test_an_include_in_a_fragment_is_followed(tmp_path):
    (tmp_path / "parts").mkdir()
    (tmp_path / "main.cpp").write_text('#include <math.h>\n#include "parts/a.inc"\n  #  include "parts/b.inc"\n'
                                       '/* #include "parts/not.inc" */\n')
    (tmp_path / "parts" / "a.inc").write_text('#include "c.inc"\n')
    (tmp_path / "parts" / "b.inc").write_text('#include "a.inc"\n')
    (tmp_path / "parts" / "c.inc").write_text("int c;\n")
    names = [str(p.relative_to(tmp_path)) for p in multigrid.source_files(tmp_path / "main.cpp")]
    assert names == ["main.cpp", "parts/a.inc", "parts/b.inc", "parts/c.inc"]


def test_the_build_hash_is_the_digest(monkeypatch, tmp_path):
    """_build's cache name changes with source_digest (and so with any fragment): the compiler and MPI not run."""
    made = []
    monkeypatch.setenv("CARDIOSIM_CACHE", str(tmp_path))
    monkeypatch.setattr(multigrid, "mpi_flags", lambda gpu: [])
    monkeypatch.setattr(multigrid, "compile_once", lambda out, command, what: made.append(out) or out)
    monkeypatch.setattr(multigrid.subprocess, "run", lambda *a, **k: type("R", (), {"stdout": "cc 1.0"})())
    for digest in ("a", "b", "a"):
        monkeypatch.setattr(multigrid, "source_digest", lambda src, d=digest: d)
        multigrid._build(False)
    assert made[0] != made[1] and made[0] == made[2]


def test_package_data_ships_every_source():
    cfg = ROOT / "setup.cfg"
    if not cfg.is_file():
        pytest.skip("not a source checkout (no setup.cfg)")
    parser = configparser.ConfigParser()
    parser.read(cfg)
    patterns = [p.strip() for p in parser["options.package_data"]["cardiosim"].split(",") if p.strip()]
    package = ROOT / "cardiosim"
    shipped = {Path(m) for p in patterns for m in glob.glob(p, root_dir=package)}
    for f in multigrid.source_files(MAIN):
        rel = Path("kernels") / f.relative_to(kernel_dir())
        assert rel in shipped, f"{rel} is not in setup.cfg's package_data"
