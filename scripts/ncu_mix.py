"""The instruction mix and stall reasons of a kernel, from Nsight Compute's source page at
SASS level (scripts/device_profile.sh writes it with KERNEL=REGEX):
    ncu -i REPORT.ncu-rep --page source --csv --print-source sass > SOURCE.csv
    python scripts/ncu_mix.py SOURCE.csv [--entries N] [--top 24] [--lines N] [--json F]
Per SASS opcode: its share of the executed warp instructions and of the warp-stall
samples, and, with --entries (the output entries the launch covers), its thread
instructions per entry (warp instructions x 32 / entries). Then each stall reason's share
of all samples; with --lines N, the N SASS lines with the most samples (offset from the
kernel's first line, times executed, share of the samples, their largest stall reasons)."""

import argparse
import csv
import sys
from collections import Counter

from ozaki_cutlass.tools.measure import write_results

EXECUTED = "Instructions Executed"
SAMPLES = "Warp Stall Sampling (All Samples)"


def number(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def opcode(sass: str) -> str:
    """The opcode of one SASS line without its predicate and modifiers: '@P0 IMAD.WIDE.U32
    R4, ...' -> 'IMAD'."""
    words = sass.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else ""


def kernels(lines) -> list[dict]:
    """The source page's kernels: [{"name", "rows": [dict per SASS line]}]. Each kernel
    opens with a "Kernel Name" row, then a header row, then one row per instruction."""
    out, header = [], None
    for row in csv.reader(lines):
        if not row:
            continue
        if row[0] == "Kernel Name":
            out.append({"name": row[1] if len(row) > 1 else "", "rows": []})
            header = None
        elif header is None and out:
            header = row
            if "Source" not in header or EXECUTED not in header:
                raise ValueError(f"not an ncu source page at SASS level: header {header[:4]}")
        elif header is not None and len(row) == len(header):
            out[-1]["rows"].append(dict(zip(header, row)))
    if not out:
        raise ValueError("no kernel in this file (expected ncu --page source --csv --print-source sass)")
    # ncu 2025.3 prints each profiled launch's page twice when a report holds several
    # launches: a block equal to the one before it is that repeat, not another launch
    return [k for i, k in enumerate(out) if i == 0 or k != out[i - 1]]


def line_stalls(row: dict) -> Counter:
    """One SASS line's samples per stall reason (all samples, not only the not-issued)."""
    return Counter({key[len("stall_"):]: number(value) for key, value in row.items()
                    if key.startswith("stall_") and "Not Issued" not in key})


def mix(kernel: dict, entries: int | None, lines: int = 0) -> dict:
    """Executed warp instructions and stall samples per opcode, stall reasons summed; with
    ``lines``, that many SASS lines with the most samples."""
    executed, sampled, stalls = Counter(), Counter(), Counter()
    for r in kernel["rows"]:
        op = opcode(r["Source"])
        executed[op] += number(r[EXECUTED])
        sampled[op] += number(r.get(SAMPLES, "0"))
        stalls += line_stalls(r)
    total, samples, stall_total = sum(executed.values()), sum(sampled.values()), sum(stalls.values())
    rows = kernel["rows"]
    base = int(rows[0]["Address"], 16) if rows and "Address" in rows[0] else 0
    hot = sorted((r for r in rows if number(r.get(SAMPLES, "0")) > 0), key=lambda r: -number(r[SAMPLES]))[:lines]
    top_lines = [{"offset": int(r["Address"], 16) - base if "Address" in r else None,
                  "sass": " ".join(r["Source"].split()), "executed": number(r[EXECUTED]),
                  "sample_share": number(r[SAMPLES]) / samples,
                  "stalls": {k: v / number(r[SAMPLES]) for k, v in line_stalls(r).most_common(3) if v > 0}}
                 for r in hot]
    ops = [{"opcode": op, "warp_instructions": n, "share": n / total if total else 0.0,
            "sample_share": sampled[op] / samples if samples else 0.0,
            **({"per_entry": 32.0 * n / entries} if entries else {})}
           for op, n in executed.most_common() if n > 0]
    return {"kernel": kernel["name"], "warp_instructions": total,
            **({"per_entry": 32.0 * total / entries} if entries else {}),
            "opcodes": ops,
            "stalls": {k: v / stall_total for k, v in stalls.most_common() if stall_total and v > 0},
            **({"lines": top_lines} if lines else {})}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", help="ncu --page source --csv --print-source sass output")
    ap.add_argument("--entries", type=int, default=None, help="output entries the launch covers (m x n)")
    ap.add_argument("--top", type=int, default=24, help="opcodes listed (default: %(default)s)")
    ap.add_argument("--lines", type=int, default=0, help="SASS lines with the most samples listed (default: none)")
    ap.add_argument("--json", default=None, help="write the mix here too")
    args = ap.parse_args()
    if args.entries is not None and args.entries < 1:
        ap.error("--entries must be at least 1")
    if args.lines < 0:
        ap.error("--lines must be at least 0")
    try:
        with open(args.source, newline="") as f:
            found = kernels(f)
    except (OSError, ValueError) as exc:
        print(f"ncu_mix: {args.source}: {exc}", file=sys.stderr)
        return 1
    results = [mix(k, args.entries, args.lines) for k in found]
    for res in results:
        per = f", {res['per_entry']:.1f} thread instructions per entry" if "per_entry" in res else ""
        print(f"{res['kernel']}: {res['warp_instructions']:,.0f} warp instructions{per}")
        print(f"  {'opcode':10s} {'instr %':>8s} {'samples %':>10s}" + (f" {'per entry':>10s}" if per else ""))
        for op in res["opcodes"][:args.top]:
            print(f"  {op['opcode']:10s} {100 * op['share']:8.1f} {100 * op['sample_share']:10.1f}"
                  + (f" {op['per_entry']:10.1f}" if per else ""))
        print("  stall reasons (share of all samples): "
              + ", ".join(f"{k} {100 * v:.1f} %" for k, v in res["stalls"].items() if v >= 0.005))
        for ln in res.get("lines", []):
            where = f"+0x{ln['offset']:05x}" if ln["offset"] is not None else "?"
            why = ", ".join(f"{k} {100 * v:.0f} %" for k, v in ln["stalls"].items())
            print(f"  {where} {100 * ln['sample_share']:5.1f} % of samples, executed {ln['executed']:,.0f}: "
                  f"{ln['sass']}  ({why})")
    if args.json:  # made from ncu's page: the GPU is the profiled run's, not this machine's
        write_results(args.json, {"source": args.source, "entries": args.entries, "kernels": results}, gpu=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
