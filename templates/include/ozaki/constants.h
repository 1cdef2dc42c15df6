// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The numeric constants the kernels share with Python (kMaxModuli, kMaxLimbs, kLimbBits,
// kCoarseBits, kNoConstraint, kKAlignment, kExactKLimit, kMaxGroupSize, kPartialBytes, in
// namespace ozaki) are rendered into each translation unit that needs
// them, from their one home, templates/constants.py (ozaki_cutlass.templates.constants;
// the template's `{{ abi.prelude }}`). This header only checks that they are there; no
// header defines or restates their values.

#pragma once

#if !defined(OZAKI_KERNEL_CONSTANTS)
#error "ozaki headers need the kernel constants that templates/constants.py renders into the translation unit"
#endif
