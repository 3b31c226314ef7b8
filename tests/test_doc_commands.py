"""Every documented command runs as written: the ```sh blocks of README.md and docs/**/*.md (docs/dev/testing.md,
"Commands in the docs").

Each document's blocks run in order in one ``bash -euo pipefail`` (a later block may use what an earlier one made,
or the venv it activated), from the root of a scratch copy of the repository: the files git tracks (and those it
would: not ignored, not yet committed; in a clone there are none), copied to tmp_path with their times, ``.venv`` a
link to this venv so that ``make`` targets find it, the venv's bin first on PATH. Nothing in the real tree is
written. ```sh slow blocks run only in the slow variant (with the document's other
blocks, in order); a block that cannot run here (a GPU node, SLURM, ``make test`` itself, long benchmarks) or that
shows output is ```text.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ROOT, require_mpirun

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SHELL_INFOS = {"sh", "sh slow"}
OTHER_SHELLS = {"bash", "shell", "console", "zsh", "sh-session", "shell-session"}   # say sh or text instead
MARK = "::doc-block::"
TIMEOUT = 1800                  # s, one document (the slow variant's longest run is the tutorial's)
STDERR_TAIL = 3000              # characters of the failing block's stderr in the message
# a block that starts MPI ranks: mpirun itself, or the make targets that call it (make run, make examples)
STARTS_RANKS = re.compile(r"\b(mpirun|mpiexec)\b|\bmake\b[^\n#]*\b(run|examples)\b")
# make checks the venv's stamp against these: in the copy they must not look newer than the venv's set-up
SETUP_INPUTS = ("tools/bootstrap.sh", "setup.cfg", "pyproject.toml")


@dataclass
class Block:
    line: int           # of the opening fence, 1-based
    info: str           # the info string: "sh", "sh slow", "text", ...
    text: str


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a markdown file (``` or ~~~, any indentation), in order."""
    found, open_fence = [], None
    for number, line in enumerate(path.read_text().splitlines(), 1):
        m = re.match(r"^\s*(`{3,}|~{3,})(.*)$", line)
        if open_fence is None:
            if m:
                open_fence, info, start, body = m.group(1), " ".join(m.group(2).split()), number, []
        elif m and m.group(1).startswith(open_fence) and not m.group(2).strip():
            found.append(Block(start, info, "\n".join(body)))
            open_fence = None
        else:
            body.append(line)
    assert open_fence is None, f"{path}: the code block at line {start} is not closed"
    return found


def commands(path: Path, slow: bool) -> list[Block]:
    return [b for b in blocks(path) if b.info == "sh" or (slow and b.info == "sh slow")]


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def _params(docs: list[Path], slow: bool) -> list:
    """The pages as test parameters, marked mpi where a block starts ranks."""
    return [pytest.param(d, id=_name(d), marks=[pytest.mark.mpi] if _starts_ranks(d, slow) else [])
            for d in docs]


def _starts_ranks(doc: Path, slow: bool) -> bool:
    return any(STARTS_RANKS.search(b.text) for b in commands(doc, slow))


QUICK = [d for d in DOCS if commands(d, slow=False)]
SLOW = [d for d in DOCS if any(b.info == "sh slow" for b in blocks(d))]


def scratch_copy(dest: Path) -> Path:
    """The files git tracks (as they are in the working tree) and those it would (not ignored: a new module not yet
    committed, which ``python -m cardiosim`` in the copy imports), with their times, and .venv linked to this venv."""
    root = dest / "repo"
    for rel in _repository_files():
        src = ROOT / rel
        if rel and src.is_file():                  # a file deleted in the working tree is not copied
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, root / rel)
    venv = Path(sys.prefix)
    (root / ".venv").symlink_to(venv, target_is_directory=True)
    stamp = venv / ".cardiosim-setup"
    if stamp.exists():
        old = stamp.stat().st_mtime - 1
        for rel in SETUP_INPUTS:
            if (root / rel).exists():
                os.utime(root / rel, (old, old))
    return root


def _repository_files() -> list[str]:
    """Paths relative to ROOT: git's list; in a tree without git (an unpacked archive), every file but what
    .gitignore leaves out (the venv, out/, build/, caches)."""
    if (ROOT / ".git").exists():
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                                capture_output=True, check=True).stdout
        return listed.decode().split("\0")
    skip = {".venv", "out", "build", ".pytest_cache", "__pycache__", ".git"}
    return [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
            if p.is_file() and not skip & set(p.relative_to(ROOT).parts)
            and not any(part.endswith(".egg-info") for part in p.relative_to(ROOT).parts)]


def script(doc_blocks: list[Block]) -> str:
    """One bash script of the blocks, each announced on stdout and stderr so that a failure names its block."""
    parts = ["set -euo pipefail"]
    for b in doc_blocks:
        parts += [f"echo '{MARK} {b.line}'; echo '{MARK} {b.line}' >&2", b.text]
    return "\n".join(parts) + "\n"


def run_doc(doc: Path, tmp_path: Path, slow: bool) -> None:
    doc_blocks = commands(doc, slow)
    if _starts_ranks(doc, slow):
        require_mpirun()
    root = scratch_copy(tmp_path)
    # not this suite's own: a page's pytest would log into its CARDIOSIM_TEST_LOG
    env = {k: v for k, v in os.environ.items()
           if k not in ("PETSC_OPTIONS", "PYTHONPATH", "VIRTUAL_ENV", "CARDIOSIM_TEST_LOG", "PYTEST_CURRENT_TEST")}
    env.update(PATH=f"{Path(sys.prefix) / 'bin'}{os.pathsep}{env.get('PATH', '')}", PYTHONUNBUFFERED="1",
               HOME=env.get("HOME", str(tmp_path)), MPLBACKEND="Agg")
    if "PETSC_OPTIONS" in os.environ:           # the conftest's GPU-aware-MPI option, for a CUDA PETSc
        env["PETSC_OPTIONS"] = os.environ["PETSC_OPTIONS"]
    try:
        proc = subprocess.run(["bash", "-c", script(doc_blocks)], cwd=root, capture_output=True, text=True,
                              env=env, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{_name(doc)}: its commands ran longer than {TIMEOUT} s", pytrace=False)
    if proc.returncode == 0:
        return
    line, stderr = _last_block(proc.stderr)
    _, stdout = _last_block(proc.stdout)
    pytest.fail(f"{_name(doc)}: the ```sh block at line {line} failed (exit status {proc.returncode}); its "
                f"stderr ends:\n{stderr[-STDERR_TAIL:]}\nits stdout ends:\n{stdout[-1000:]}", pytrace=False)


def _last_block(output: str) -> tuple[str, str]:
    """(the line of the last block announced in ``output``, what that block wrote)."""
    _, mark, tail = output.rpartition(MARK)
    line, _, text = tail.lstrip(" ").partition("\n") if mark else ("?", "", output)
    return line, text


@pytest.mark.parametrize("doc", _params(QUICK, slow=False))
def test_doc_commands_run_as_written(doc, tmp_path):
    run_doc(doc, tmp_path, slow=False)


@pytest.mark.slow
@pytest.mark.parametrize("doc", _params(SLOW, slow=True))
def test_doc_commands_run_as_written_slow(doc, tmp_path):
    run_doc(doc, tmp_path, slow=True)


def test_shell_blocks_say_sh_or_text():
    """A block of commands is ```sh (run by these tests), ```sh slow or ```text (shown, not run): no other shell
    info string, so that no block of commands escapes the tests unnoticed."""
    wrong = [f"{_name(d)}:{b.line}: ```{b.info}" for d in DOCS for b in blocks(d)
             if b.info.split(" ")[0] in OTHER_SHELLS or (b.info.startswith("sh") and b.info not in SHELL_INFOS)]
    assert not wrong, "use ```sh, ```sh slow or ```text (docs/dev/testing.md):\n" + "\n".join(wrong)


def test_block_parser(tmp_path):
    doc = tmp_path / "d.md"
    doc.write_text("text\n```sh\necho a\n```\n\n  ~~~sh slow\n  echo b\n  ~~~\n```text\nx\n```\n````sh\n```\n````\n")
    got = [(b.line, b.info, b.text) for b in blocks(doc)]
    assert got == [(2, "sh", "echo a"), (6, "sh slow", "  echo b"), (9, "text", "x"), (12, "sh", "```")]
    assert [b.line for b in commands(doc, slow=False)] == [2, 12]
    assert [b.line for b in commands(doc, slow=True)] == [2, 6, 12]


def test_a_failing_block_is_named_with_its_stderr(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("# A page\n\n```sh\ntouch made-here; echo first\n```\n\n```sh\ntest -e made-here\n"
                   "echo 'the second block' >&2; false\necho never\n```\n")
    with pytest.raises(pytest.fail.Exception) as failed:
        run_doc(doc, tmp_path / "scratch", slow=False)
    message = str(failed.value)
    assert "doc.md: the ```sh block at line 7 failed (exit status 1)" in message, message
    assert "the second block" in message and "never" not in message, message
    assert "first" not in message, message                    # the first block's output is not the second's
    assert not (ROOT / "made-here").exists()
