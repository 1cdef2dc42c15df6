// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// Host-only driver of the fused kernels' argument checks (ozaki/group_gemm_abi.h,
// check_group_problem), for tests/test_group_abi.py: no kernel, no GPU. Reads one problem
// per line from stdin,
//   G m n k_pad groups lda ldb ldx stride_x tile_k moduli...
// (pointers are fixed 16-byte-aligned dummies; G is 1 or 4, the kernels' extremes), and
// prints "ok" with each group's product of moduli, or "refused <message>". Built with the
// fused kernels' rendered ABI prelude (-include, tests/test_group_abi.py).

#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "ozaki/group_gemm_abi.h"

namespace {

template <int G>
std::string check(ozaki::GroupGemmProblem p, int tile_k) {
  using ElementX = ozaki::PartialElement<G>;
  const ozaki::GroupGemmLimits limits = ozaki::tma_group_limits<ElementX>(tile_k);  // the sm_90 kernels'
  ozaki::GroupConstants constants[ozaki::kMaxGroups];
  ozaki::ErrorMessage err;
  if (ozaki::check_group_problem<G>(p, limits, constants, err) != ozaki::Status::kOk) {
    return std::string("refused ") + err.c_str();
  }
  std::ostringstream out;
  out << "ok";
  for (int q = 0; q < p.groups; ++q) out << ' ' << constants[q].crt.product;
  return out.str();
}

}  // namespace

int main() {
  alignas(16) static int8_t a[16], b[16];
  alignas(16) static uint32_t x[4];
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    int g = 0, tile_k = 0;
    ozaki::GroupGemmProblem p;
    in >> g >> p.m >> p.n >> p.k_pad >> p.groups >> p.lda >> p.ldb >> p.ldx >> p.stride_x >> tile_k;
    std::vector<uint32_t> moduli;
    for (uint32_t m; in >> m;) moduli.push_back(m);
    p.group_size = g;
    p.a = a;
    p.b = b;
    p.x = x;
    p.moduli = moduli.empty() ? nullptr : moduli.data();
    std::cout << (g == 1 ? check<1>(p, tile_k) : check<4>(p, tile_k)) << '\n';
  }
  return 0;
}
