"""How fast can the INT8 products alone go on this GPU? (device run)

The emulation's speed targets are bounded by its INT8 GEMMs: at `count` moduli a call does
`count` INT8 products of the full shape, so even with every other stage free it cannot beat
    2 m n k / (time of the `count` INT8 products).
This script times, in alternation on random int8 operands (m = n = k = N):
  cublas   cuBLAS's INT8 GEMM (torch._int_mm, int32 out), `count` separate calls, each on
           its own operands (so nothing is served from L2 across calls)
  ours     the package's plain sm_90a kernel, one batched launch over the `count` products
           (the staged path's INT8 phase)
and prints each one's TOP/s and the emulated-DGEMM ceiling it implies in FP64 TFLOP/s, next
to the speed targets of issues 5 and 6 (75 / 90 / 100 TFLOP/s at 4096 / 8192 / 16384; 85 / 110
at 4096 / 16384). It checks that both give the same int32 products (two planes compared).
Then it runs our kernel alone for about two seconds while `nvidia-smi` samples the SM clock,
the power draw and the throttle reasons, and prints the tensor cores' dense INT8 rate at the
clock the GPU held (SMs x 8192 INT8 operations per clock per SM, Hopper's dense rate: the
1979 TOP/s of the datasheet is 132 SMs at 1830 MHz) and our kernel's share of it.
    python scripts/int8_ceiling.py [--sizes 4096 8192 16384] [--count 15] [--json out.json]"""

import argparse
import statistics
import subprocess
import time

from ozaki_cutlass import dispatch
from ozaki_cutlass.device import driver
from ozaki_cutlass.kernels.gemm import load_int8_gemm
from ozaki_cutlass.tools.measure import write_rows

PLAIN = "i8_sm90a_256x128x128_c1x2_coop_s0_int32_g1"
DATASHEET_TOPS = 1979.0
OPS_PER_CLOCK_PER_SM = 8192  # dense INT8 mma, Hopper
QUERY = "clocks.sm,power.draw,clocks_throttle_reasons.sw_power_cap,clocks_throttle_reasons.hw_slowdown"
TARGETS = {4096: "75 (issue 5), 85 (issue 6)", 8192: "90 (issue 5)", 16384: "100 (issue 5), 110 (issue 6)"}


def measure(n: int, count: int) -> dict:
    import torch

    plain = load_int8_gemm(dispatch.variant_by_name(PLAIN, "int8 ceiling"))
    a = torch.randint(-127, 128, (count, n, n), dtype=torch.int8, device="cuda")
    b = torch.randint(-127, 128, (count, n, n), dtype=torch.int8, device="cuda")  # rows of B^T
    c_ours = torch.empty((count, n, n), dtype=torch.int32, device="cuda")
    c_blas = [None] * count
    wsb = max(plain.workspace_size(n, n, n, count), 16)
    ws = torch.empty(wsb, dtype=torch.uint8, device="cuda")
    plane = n * n

    def cublas():
        for g in range(count):  # A (n x k, row-major) times B^T's rows as columns: TN, as cuBLAS likes
            c_blas[g] = torch._int_mm(a[g], b[g].t())

    def ours():
        plain(n, n, n, count, a.data_ptr(), n, plane, b.data_ptr(), n, plane, c_ours.data_ptr(), n, plane,
              ws.data_ptr(), wsb)

    torch.cuda.synchronize()
    times, _ = driver.event_times([cublas, ours], warmup=2, reps=5)
    torch.cuda.synchronize()
    clocks = sustained(ours, times[1])
    same = all(bool(torch.equal(c_blas[g], c_ours[g])) for g in (0, count - 1))
    ops = 2.0 * n ** 3 * count
    out = {"n": n, "count": count, "same_products": same}
    for name, t in zip(("cublas", "ours"), times):
        ms = statistics.median(t)
        out[name] = {"ms": ms, "top_s": ops / ms / 1e9, "of_datasheet": ops / ms / 1e9 / DATASHEET_TOPS,
                     "emulation_ceiling_tflops": 2.0 * n ** 3 / ms / 1e9, "all_ms": t}
    if clocks:
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        peak = sms * OPS_PER_CLOCK_PER_SM * clocks["sm_mhz"] * 1e6 / 1e12
        ours_sustained = ops / clocks["ms"] / 1e9
        out["sustained"] = {**clocks, "sms": sms, "peak_top_s_at_clock": peak, "top_s": ours_sustained,
                            "of_peak_at_clock": ours_sustained / peak}
    return out


def sustained(call, ms_each: list, seconds: float = 2.0) -> dict | None:
    """Run ``call`` back to back for about ``seconds`` while nvidia-smi samples every 50 ms;
    the median SM clock and power of the samples taken while it ran, the share of samples
    with a throttle reason active, and the call's mean time. None without nvidia-smi."""
    import torch

    reps = max(3, int(seconds * 1e3 / statistics.median(ms_each)))
    try:
        smi = subprocess.Popen(["nvidia-smi", "-i", "0", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits",
                                "-lms", "50"], stdout=subprocess.PIPE, text=True)
    except OSError:
        return None
    time.sleep(0.3)  # let it start sampling
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        call()
    stop.record()
    stop.synchronize()
    smi.terminate()
    text, _ = smi.communicate()
    rows = [[f.strip() for f in line.split(",")] for line in text.splitlines() if line.count(",") == 3]
    busy = [r for r in rows if r[0].isdigit() and float(r[1]) > 300.0]  # samples under load
    if not busy:
        return None
    return {"ms": start.elapsed_time(stop) / reps, "reps": reps, "samples": len(busy),
            "sm_mhz": statistics.median(float(r[0]) for r in busy),
            "power_w": statistics.median(float(r[1]) for r in busy),
            "power_cap_share": sum(r[2] == "Active" for r in busy) / len(busy),
            "hw_slowdown_share": sum(r[3] == "Active" for r in busy) / len(busy)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192, 16384])
    ap.add_argument("--count", type=int, default=15)
    ap.add_argument("--json")
    args = ap.parse_args()
    import cupy as cp
    import torch

    cp.cuda.Device(0).use()
    print(f"{args.count} INT8 products of N x N x N, median of 5 after 2 warm-up, in alternation; "
          f"ceiling = 2 N^3 / (INT8 time): the emulated DGEMM rate if every other stage were free")
    res = []
    for n in args.sizes:
        r = measure(n, args.count)
        torch.cuda.empty_cache()  # the operands of this size, before the next
        res.append(r)
        for name in ("cublas", "ours"):
            q = r[name]
            print(f"  N = {n:5d}  {name:6s} {q['ms']:8.2f} ms  {q['top_s']:6.0f} TOP/s "
                  f"({q['of_datasheet']:.0%} of {DATASHEET_TOPS:.0f})  ceiling {q['emulation_ceiling_tflops']:5.1f} "
                  f"TFLOP/s  [target {TARGETS.get(n, '-')}]")
        print(f"  N = {n:5d}  same int32 products: {r['same_products']}")
        q = r.get("sustained")
        if q:
            print(f"  N = {n:5d}  ours back to back ({q['reps']} calls): {q['top_s']:.0f} TOP/s at a median SM clock of "
                  f"{q['sm_mhz']:.0f} MHz, {q['power_w']:.0f} W (power cap active in {q['power_cap_share']:.0%} of "
                  f"{q['samples']} samples, hardware slowdown in {q['hw_slowdown_share']:.0%}); the tensor cores' "
                  f"dense INT8 rate at that clock: {q['peak_top_s_at_clock']:.0f} TOP/s, ours "
                  f"{q['of_peak_at_clock']:.0%} of it")
    if args.json:
        write_rows(args.json, res)


if __name__ == "__main__":
    main()
