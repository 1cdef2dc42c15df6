// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// What every generated translation unit renders before our headers, from the C ABI
// description of ozaki_cutlass.generator.abi (the template places `{{ abi.prelude }}`
// first): the OZAKI_EXPORT macro that marks the entry points, the status codes every
// entry returns (ozaki::kStatusOk, kStatusUnsupported, kStatusCudaError) and, for the
// stage kernels, the ABI structs passed by host pointer (ozaki::CrtConstants,
// ozaki::NonfiniteSource) with their layout asserted. Headers that use any of these
// include this one, which only checks that the prelude is there: the prototypes, the
// version, the structs and their ctypes twins all come from that one Python description.

#pragma once

#if !defined(OZAKI_ABI_RENDERED)
#error "ozaki headers need the ABI prelude that ozaki_cutlass.generator.abi renders into each translation unit"
#endif
