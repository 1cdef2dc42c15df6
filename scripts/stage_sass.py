"""The SASS of the stage kernels, counted: the figures docs/stages/ quotes as "SASS".

    python scripts/stage_sass.py [REGEX] [--arch sm_90a] [--cuobjdump PATH] [--keep DIR]
                                 [--against SASS]

Renders the stage library's source (the generator's StagesVariant for the arch), compiles it
to a cubin with the toolchain's nvcc and `-Xptxas -v`, disassembles it with cuobjdump and
prints, for every kernel whose mangled name matches REGEX (a Python regular expression;
default: every kernel): its instruction count, registers and spills, and each loop (a
backward branch) with its size and its most frequent opcodes. No GPU is needed.

cuobjdump: --cuobjdump, else $CUOBJDUMP, else the one beside nvcc, else PATH. NVIDIA's
`nvidia-cuda-cuobjdump` wheel carries one; it needs `nvdisasm` (`nvidia-cuda-nvdisasm`) in
the same folder or on PATH. --keep DIR keeps the source, the cubin and the SASS there.
--against SASS (a stages.sass that --keep kept, e.g. from another commit) adds which of the
matching kernels are gone, new, or have other instructions (addresses aside) than there.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ozaki_cutlass.generator import Arch, StagesVariant
from ozaki_cutlass.generator.render import render
from ozaki_cutlass.generator.toolchain import nvcc_command, resolve_toolchain
from ncu_mix import opcode  # scripts/, next to this one

ARCHS = {"sm_90a": Arch.SM90A, "sm_80": Arch.SM80}
#: nvcc_command's flags for a shared library, dropped for a cubin
SHARED_ONLY = {"-shared", "-fPIC", "-Xcompiler", "-lcuda"}


class Kernel:
    """One kernel's instructions (address, text) and ptxas's figures for it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.instructions: list[tuple[int, str]] = []
        self.registers: int | None = None
        self.spill_stores: int | None = None
        self.spill_loads: int | None = None


def parse_sass(text: str) -> dict[str, Kernel]:
    """cuobjdump -sass output -> kernels by mangled name, with their instructions."""
    kernels: dict[str, Kernel] = {}
    current: Kernel | None = None
    for line in text.splitlines():
        head = re.search(r"Function : (\S+)", line)
        if head:
            current = kernels.setdefault(head.group(1), Kernel(head.group(1)))
            continue
        ins = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if ins and current is not None:
            current.instructions.append((int(ins.group(1), 16), ins.group(2)))
    return kernels


def parse_ptxas(text: str, kernels: dict[str, Kernel]) -> None:
    """Registers and spills from `-Xptxas -v` output, into the kernels of that name."""
    name = None
    for line in text.splitlines():
        entry = re.search(r"Compiling entry function '([^']+)'", line)
        if entry:
            name = entry.group(1)
            continue
        if name not in kernels:
            continue
        spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if spills:
            kernels[name].spill_stores, kernels[name].spill_loads = int(spills.group(1)), int(spills.group(2))
        regs = re.search(r"Used (\d+) registers", line)
        if regs:
            kernels[name].registers = int(regs.group(1))


def loops(kernel: Kernel) -> list[tuple[int, int, collections.Counter]]:
    """Each backward branch as (first address, branch address, opcode counts of the body)."""
    index = {address: i for i, (address, _) in enumerate(kernel.instructions)}
    found = []
    for i, (address, text) in enumerate(kernel.instructions):
        if opcode(text) != "BRA":
            continue
        target = re.search(r"0x([0-9a-f]+)", text.split("BRA", 1)[1])
        if target is None:
            continue
        start = int(target.group(1), 16)
        if start <= address and start in index:
            body = kernel.instructions[index[start]:i + 1]
            found.append((start, address, collections.Counter(opcode(t) for _, t in body)))
    return found


def report(kernel: Kernel, top: int) -> str:
    spills = ("" if kernel.spill_stores is None
              else f", spills {kernel.spill_stores} B stored / {kernel.spill_loads} B loaded")
    lines = [f"{kernel.name}: {len(kernel.instructions)} instructions, "
             f"{kernel.registers if kernel.registers is not None else '?'} registers{spills}"]
    for start, end, mix in loops(kernel):
        size = sum(mix.values())
        common = ", ".join(f"{op} {n}" for op, n in mix.most_common(top))
        lines.append(f"  loop {start:#07x}-{end:#07x}: {size} instructions ({common})")
    return "\n".join(lines)


def compare(kernels: dict[str, Kernel], other: dict[str, Kernel]) -> dict[str, list[str]]:
    """Kernel names only in `other` (gone), only in `kernels` (new), and in both with other
    instruction text (changed; addresses aside), each sorted."""
    def text(k: Kernel) -> list[str]:
        return [t for _, t in k.instructions]

    return {"gone": sorted(set(other) - set(kernels)), "new": sorted(set(kernels) - set(other)),
            "changed": sorted(name for name in set(kernels) & set(other)
                              if text(kernels[name]) != text(other[name]))}


def find_cuobjdump(explicit: str | None, nvcc: Path) -> str:
    for candidate in (explicit, os.environ.get("CUOBJDUMP"), str(nvcc.parent / "cuobjdump"),
                      shutil.which("cuobjdump")):
        if candidate and Path(candidate).is_file():
            return candidate
    raise SystemExit("stage_sass.py: no cuobjdump (give --cuobjdump or $CUOBJDUMP; "
                     "pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm has both)")


def cubin_command(command: list[str], arch: str, cubin: str) -> list[str]:
    """nvcc_command's shared-library line turned into one that writes a cubin."""
    out: list[str] = []
    skip = False
    for word in command:
        if skip:
            skip = False
            continue
        if word == "-o":
            skip = True
            continue
        if word in SHARED_ONLY or word.startswith(("-gencode", "-L", "-Xcompiler=")):
            continue
        out.append(word)
    return out + ["-cubin", f"-arch={arch}", "-Xptxas", "-v", "-o", cubin]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("regex", nargs="?", default=".", help="kernels whose mangled name matches (default: all)")
    ap.add_argument("--arch", choices=sorted(ARCHS), default="sm_90a")
    ap.add_argument("--cuobjdump", default=None, help="the cuobjdump to run")
    ap.add_argument("--keep", default=None, metavar="DIR", help="keep the source, cubin and SASS here")
    ap.add_argument("--top", type=int, default=10, help="opcodes listed per loop (default: %(default)s)")
    ap.add_argument("--against", default=None, metavar="SASS",
                    help="a kept stages.sass: list the matching kernels gone, new or changed since")
    args = ap.parse_args(argv)
    pattern = re.compile(args.regex)

    toolchain = resolve_toolchain()
    cuobjdump = find_cuobjdump(args.cuobjdump, Path(toolchain.nvcc))
    variant = StagesVariant(arch=ARCHS[args.arch])
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="stage_sass_"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "stages.cu").write_text(render(variant))
    command = cubin_command(nvcc_command(variant, toolchain, source="stages.cu", output="stages.so"),
                            args.arch, "stages.cubin")
    built = subprocess.run(command, cwd=work, capture_output=True, text=True, check=False)
    if built.returncode != 0:
        sys.stderr.write(built.stdout + built.stderr)
        return built.returncode
    sass = subprocess.run([cuobjdump, "-sass", str(work / "stages.cubin")], capture_output=True, text=True,
                          check=False)
    if sass.returncode != 0 or "Function :" not in sass.stdout:
        sys.stderr.write(sass.stdout + sass.stderr)
        return sass.returncode or 1
    if args.keep:
        (work / "stages.sass").write_text(sass.stdout)
    kernels = parse_sass(sass.stdout)
    parse_ptxas(built.stdout + built.stderr, kernels)
    chosen = [k for name, k in kernels.items() if pattern.search(name)]
    if not chosen:
        print(f"no kernel matches {args.regex!r} ({len(kernels)} kernels)", file=sys.stderr)
        return 1
    print(f"# {toolchain.nvcc_version.strip().splitlines()[-1]}; {args.arch}")
    for kernel in chosen:
        print(report(kernel, args.top))
    if args.against:
        other = {name: k for name, k in parse_sass(Path(args.against).read_text()).items() if pattern.search(name)}
        for what, names in compare({k.name: k for k in chosen}, other).items():
            print(f"# {what} against {args.against}: {len(names)}")
            for name in names:
                print(f"#   {name}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
