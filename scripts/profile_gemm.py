"""One ozaki_cutlass.gemm call on CuPy arrays, for a profiler to watch (ncu in
scripts/device_profile.sh). Inputs are made on the host and copied, so every kernel
launched is ours: python scripts/profile_gemm.py N PATH [MODULI] [MODE] [--warm]."""

import sys

import cupy
import numpy as np

import ozaki_cutlass
from ozaki_cutlass.numerics.accuracy import random_matrix

n, path = int(sys.argv[1]), sys.argv[2]
args = [x for x in sys.argv[3:] if not x.startswith("--")]
count = int(args[0]) if args else 15
mode = args[1] if len(args) > 1 else "accurate"
rng = np.random.default_rng(n)
a = cupy.asarray(random_matrix(n, n, 0.5, rng))
b = cupy.asarray(random_matrix(n, n, 0.5, rng))
if "--warm" in sys.argv:  # a first call loads the kernels and grows the workspace
    ozaki_cutlass.gemm(a, b, moduli=count, mode=mode, path=path)
t = {}
ozaki_cutlass.gemm(a, b, moduli=count, mode=mode, path=path, timings=t)
print(f"n={n} path={path} moduli={count} mode={mode}:",
      ", ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in t.items()))
