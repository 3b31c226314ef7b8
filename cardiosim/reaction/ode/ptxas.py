"""What ptxas makes of each CUDA kernel variant: registers per thread, spills, local and constant memory.

``cardiosim kernels`` compiles every variant fresh (nvcc in a temporary folder, no cache) with ``-Xptxas -v`` and
reads ptxas's report. Needs nvcc (the CUDA toolkit), not a GPU: ``--arch`` names the target where no GPU is visible.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from cardiosim.runtime.errors import UserError
from cardiosim.runtime.gpu import query_gpus
from cardiosim.reaction.ode import kernel_variants
from cardiosim.reaction.ode.cuda_backend import (
    FUNCTION,
    MAXRREG_ENV,
    default_block,
    kernel_source,
    nvcc_options,
    second_cap,
)
from cardiosim.runtime.compile import header_dir, kernel_dir


def parse(text: str, function: str = FUNCTION) -> dict:
    """ptxas -v output -> registers, spill_stores, spill_loads, stack_frame (local bytes per thread), cmem (bytes per
    constant bank: bank 0 holds the kernel arguments, a higher bank the module's __constant__ data)."""
    out: dict = {"cmem": {}}
    lines = text.splitlines()
    mine = False
    for line in lines:
        if "Compiling entry function" in line or "Function properties for" in line:
            mine = f"'{function}'" in line or line.rstrip().endswith(function)
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and mine:
            out["stack_frame"], out["spill_stores"], out["spill_loads"] = map(int, m.groups())
        m = re.search(r"Used (\d+) registers", line)
        if m and mine:
            out["registers"] = int(m.group(1))
        for size, bank in re.findall(r"(\d+) bytes cmem\[(\d+)\]", line):
            out["cmem"][int(bank)] = out["cmem"].get(int(bank), 0) + int(size)
    if "registers" not in out:
        raise RuntimeError(f"no ptxas report for {function} in:\n{text}")
    return out


def constant_banks(cubin: bytes) -> dict:
    """Bytes per constant bank from a cubin's ELF sections (.nv.constant<bank>[.<kernel>]): ptxas from CUDA 13 on no
    longer prints cmem, the sizes of these sections are the same figures."""
    import struct
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        raise RuntimeError("not a 64-bit ELF cubin")
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    strtab_off = sections[shstrndx][4]
    banks: dict = {}
    for name_off, _type, _flags, _addr, _off, size in sections:
        end = cubin.index(b"\0", strtab_off + name_off)
        name = cubin[strtab_off + name_off:end].decode()
        m = re.match(r"\.nv\.constant(\d+)", name)
        if m:
            banks[int(m.group(1))] = banks.get(int(m.group(1)), 0) + size
    return banks


def detect_arch() -> str | None:
    """sm_XY of GPU 0 from nvidia-smi, or None."""
    rows, _ = query_gpus("compute_cap", timeout=None)
    cap = rows[0][0] if rows else ""
    return "sm_" + cap.replace(".", "") if re.fullmatch(r"\d+\.\d+", cap) else None


def report(model, variants, arch: str | None = None, fmad: bool = True, maxrreg: int | None = None,
           keep_cubin: bool = False) -> list[dict]:
    """Compile each of ``variants`` (names) for ``model`` and return ptxas's figures, one dict per variant.
    ``maxrreg``: a register cap (-maxrregcount); 0: none; None: ``$CARDIOSIM_CELL_MAXRREG`` as the CUDA backend
    reads it (cuda_backend.register_cap_options), unset there: the fused kernel under cuda_backend.auto_cap's cap,
    as the backend compiles it. ``keep_cubin``: each row's compiled cubin too, as "cubin" (bytes)."""
    if not shutil.which("nvcc"):
        raise UserError("cardiosim kernels: nvcc (the CUDA toolkit) is not on PATH; load CUDA, or run this on a GPU "
                        "node (cardiosim kernels --source VARIANT prints a variant's source without it)")
    arch = arch or detect_arch()
    if not arch:
        raise UserError("cardiosim kernels: no GPU visible to choose the target from; pass --arch, e.g. sm_90")
    if maxrreg == 0:
        opts = nvcc_options(fmad, environ={MAXRREG_ENV: "none"})
    else:
        opts = nvcc_options(fmad, [f"-maxrregcount={maxrreg}"] if maxrreg else [])
    cap = next((int(o.split("=")[1]) for o in opts if o.startswith("-maxrregcount=")), None)
    rows = []
    for name in variants:
        cubin, log = nvcc(model, name, "-cubin", arch, ["-Xptxas", "-v", *opts])
        row = {"variant": name, "arch": arch, "fmad": fmad, **parse(log)}
        auto = maxrreg is None and second_cap(kernel_variants.get(name, model.kernel_name), opts, row["registers"],
                                              default_block())
        if auto:
            cubin, log = nvcc(model, name, "-cubin", arch, ["-Xptxas", "-v", *opts, f"-maxrregcount={auto}"])
            row = {"variant": name, "arch": arch, "fmad": fmad, **parse(log)}
        if cap or auto:
            row["maxrreg"] = cap or auto
        if not row["cmem"]:
            row["cmem"] = constant_banks(cubin)
        if keep_cubin:
            row["cubin"] = cubin
        rows.append(row)
    return rows


def nvcc(model, variant: str, output: str, arch: str, options=()) -> tuple[bytes, str]:
    """Compile ``variant``'s generated source for ``model`` fresh, in a temporary folder: ``output`` is nvcc's
    "-cubin" or "-ptx". Returns the output file's bytes and what nvcc printed."""
    src, opts = kernel_source(model, model.parameter_vector(), kernel_variants.get(variant, model.kernel_name))
    with tempfile.TemporaryDirectory(prefix="cardiosim-nvcc-") as tmp:
        cu = Path(tmp) / f"{variant}.cu"
        cu.write_text(src)
        out = cu.with_suffix("." + output.lstrip("-"))
        cmd = [shutil.which("nvcc") or "nvcc", output, f"-arch={arch}", "-std=c++17", *options,
               f"-I{header_dir(model)}", f"-I{kernel_dir()}", *opts, "-o", str(out), str(cu)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"nvcc failed for {variant}:\n{' '.join(cmd)}\n{r.stderr}")
        return out.read_bytes(), r.stderr + r.stdout


def table(rows: list[dict]) -> str:
    """Markdown table of :func:`report`'s rows."""
    head = ("| variant | registers/thread | spill stores (B) | spill loads (B) | local/stack (B/thread) "
            "| constant, module (B) | constant, arguments (B) |\n|---|---|---|---|---|---|---|\n")
    body = ""
    for r in rows:
        banks = r["cmem"]
        module = sum(v for b, v in banks.items() if b != 0)
        body += (f"| {r['variant']} | {r['registers']} | {r.get('spill_stores', 0)} | {r.get('spill_loads', 0)} "
                 f"| {r.get('stack_frame', 0)} | {module} | {banks.get(0, 0)} |\n")
    caps = sorted({r["maxrreg"] for r in rows if r.get("maxrreg")})
    if caps:
        body += f"\n(register cap -maxrregcount={', '.join(map(str, caps))}: {MAXRREG_ENV} or maxrreg)\n"
    return head + body
