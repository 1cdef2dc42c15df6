"""ozaki_cutlass: FP64-accurate GEMM on INT8 tensor cores (Ozaki scheme II)."""
