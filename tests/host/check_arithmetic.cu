// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// Host-only checker of the pure arithmetic helpers that the GPU kernels are built from:
//   ozaki/scaling.h        (scan, coarse magnitudes, accurate shifts)
//   ozaki/residue_arith.h  (float-pipe residues of the scaled integers)
//   ozaki/crt_arith.h      (CRT limb sums, double-word finish, unscale, NaN/Inf pattern)
//   ozaki/barrett.h        (the one Barrett reduction: stage CRT inputs, the fused fold,
//                           the fused epilogue's 64-bit partial CRT)
//   ozaki/group_arith.h    (fused modulus-group fold and partial CRT)
//   ozaki/inner_arith.h    (the accuracy contract's inner statistics: runs and combine)
// Every helper is __host__ __device__, so calling it here on the CPU runs the same source
// the kernels run (the device-only intrinsics have exact host twins in the headers).
// Nothing touches a GPU.
//
// Build (tests/test_host_arithmetic.py does this; prelude.h is the stage library's
// rendered ABI prelude, ozaki_cutlass.generator.abi.STAGES.prelude(): the constants and
// structs these headers need):
//   nvcc -x cu -std=c++17 -O2 -Xcompiler -ffp-contract=off -I templates/include \
//        -include prelude.h tests/host/check_arithmetic.cu -o check_arithmetic
// -ffp-contract=off matters: the reference's double sequences contain no FMAs, and the
// host fallbacks of add_rn/mul_rn are plain operators.
//
// Usage: check_arithmetic CASES_FILE   (or "-" for stdin)
// Each line of CASES_FILE is "<tag> <fields...>": inputs and the expected answers that
// tests/test_host_arithmetic.py computed from ozaki_cutlass.reference (or from exact
// Python integers). Doubles travel as the hex of their bits. The sweep_* tags instead
// name a range of inputs and the checker compares against plain 64-bit integer
// arithmetic (a ground truth as obvious as Python's %), so that millions of values need
// no text. Output:
//   MISMATCH <tag> line <n>: <detail> | <the line>     (the first few per tag)
//   COUNT <tag> <cases> <mismatches>                   (one per tag seen)
//   TOTAL <cases> <mismatches>
// Exit status: 0 all match, 1 some mismatch, 2 a malformed line or an unknown tag.

#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ozaki/barrett.h"
#include "ozaki/crt_arith.h"
#include "ozaki/group_arith.h"
#include "ozaki/inner_arith.h"
#include "ozaki/karatsuba_arith.h"
#include "ozaki/residue_arith.h"
#include "ozaki/scaling.h"

namespace st = ozaki::stages;

namespace {

constexpr int kMaxReports = 5;  // MISMATCH lines printed per tag

// --- parsing ------------------------------------------------------------------------

double double_from_hex(const std::string& s) {
  const uint64_t bits = std::strtoull(s.c_str(), nullptr, 16);
  double d;
  std::memcpy(&d, &bits, sizeof d);
  return d;
}

// Bitwise equality, any NaN equal to any NaN (NumPy does not promise a NaN payload).
bool same_double(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || ozaki::double_bits(a) == ozaki::double_bits(b);
}

std::string hex_of(double d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%" PRIx64, ozaki::double_bits(d));
  return buf;
}

// A line's fields, read in order; `ok()` is false once any read failed.
class Fields {
 public:
  explicit Fields(const std::string& line) : s_(line) {}
  template <typename T>
  T get() {
    T v{};
    s_ >> v;
    return v;
  }
  long long i() { return get<long long>(); }
  unsigned long long u() { return get<unsigned long long>(); }
  double hex() { return double_from_hex(get<std::string>()); }
  bool ok() const { return !s_.fail(); }
  bool at_end() {  // nothing but blanks left
    std::string extra;
    return !(s_ >> extra);
  }
  std::string rest() {
    std::string r;
    std::getline(s_ >> std::ws, r);
    return r;
  }

 private:
  std::istringstream s_;
};

// --- tallies ------------------------------------------------------------------------

struct Tally {
  long long cases = 0;
  long long bad = 0;
};

std::map<std::string, Tally> g_tally;
std::string g_line;   // the line being checked, for reports
long long g_lineno = 0;

void count(const std::string& tag, long long n = 1) { g_tally[tag].cases += n; }

void mismatch(const std::string& tag, const std::string& detail, long long n = 1) {
  Tally& t = g_tally[tag];
  if (t.bad < kMaxReports) {
    std::printf("MISMATCH %s line %lld: %s | %.240s\n", tag.c_str(), g_lineno, detail.c_str(),
                g_line.c_str());
  }
  t.bad += n;
}

// One checked value: counts a case, reports a mismatch with got/want.
template <typename T>
bool expect_eq(const std::string& tag, const char* what, T got, T want) {
  if (got == want) return true;
  std::ostringstream d;
  d << what << ": got " << +got << ", want " << +want;
  mismatch(tag, d.str());
  return false;
}

// Python's a % m (m > 0) and the symmetric residue, in 64-bit integers.
int64_t py_mod(int64_t a, int64_t m) { return ((a % m) + m) % m; }
int sym_mod(int64_t y, int64_t m) {
  const int64_t r = py_mod(y, m);
  return static_cast<int>(r >= (m + 1) / 2 ? r - m : r);
}

// The fastmod path of P_residues for one value and modulus: the general (any e) route,
// where e <= kWideMaxExp the five wide pieces (and where e <= kWide4MaxExp the four), and
// where e == 0 the e == 0 route. Returns false
// (and reports) on mismatch.
// V = value 2^exp (exp <= kWideMaxExp) in two words, by plain shifts: the checker's own
// form of the kernel's wide_integer.
st::WideInteger wide_words(const st::ScaledInteger& sv) {
  st::WideInteger w;
  w.lo = sv.value << sv.exp;
  w.hi = sv.exp == 0 ? 0u : static_cast<uint32_t>(sv.value >> (64 - sv.exp));
  w.sign = sv.negative ? st::kSignBit : 0u;
  return w;
}

bool check_fastmod_residue(const std::string& tag, const st::ScaledInteger& sv, uint32_t m,
                           int want) {
  const st::FloatModulus k = st::float_modulus(m);
  const st::Pieces p = st::residue_pieces(sv, false);
  const int scaled = st::residue_byte(st::residue_scaled(p, st::pow2_factor(sv.exp, m), k));
  if (scaled != want) {
    mismatch(tag, "residue_scaled m=" + std::to_string(m) + ": got " + std::to_string(scaled) +
                      ", want " + std::to_string(want));
    return false;
  }
  if (sv.exp <= st::kWideMaxExp) {
    const st::WidePieces w = st::wide_pieces(wide_words(sv));
    const int wide = st::residue_byte(st::residue_wide<5>(w, st::wide_modulus(m)));
    if (wide != want) {
      mismatch(tag, "residue_wide<5> m=" + std::to_string(m) + " e=" + std::to_string(sv.exp) + ": got " +
                        std::to_string(wide) + ", want " + std::to_string(want));
      return false;
    }
    if (sv.exp <= st::kWide4MaxExp) {
      const int wide4 = st::residue_byte(st::residue_wide<4>(w, st::wide_modulus(m)));
      if (w.w4 != 0.0f || wide4 != want) {
        mismatch(tag, "residue_wide<4> m=" + std::to_string(m) + " e=" + std::to_string(sv.exp) + ": got " +
                          std::to_string(wide4) + ", want " + std::to_string(want) + " (w4 must be 0)");
        return false;
      }
    }
  }
  if (sv.exp == 0) {
    const int e0 = st::residue_byte(st::residue_e0(st::residue_pieces(sv, true), k));
    if (e0 != want) {
      mismatch(tag, "residue_e0 m=" + std::to_string(m) + ": got " + std::to_string(e0) +
                        ", want " + std::to_string(want));
      return false;
    }
  }
  return true;
}

// --- the double path: a second, independent route to the residues ---------------------
// The kernels' first residue path, kept here as a twin of the FP32 one: an integer-valued
// finite double split as in reference.residues (|a| < 2^53 is the integer `value`; larger
// |a| = value * 2^exp with value the 53-bit integer mantissa), reduced with 64-bit `%`.
struct IntegerDouble {
  bool negative;
  uint64_t value;
  int exp;  // 0 for |a| < 2^53, else frexp exponent - 53 (> 0)
};

IntegerDouble decompose_integer(double a) {
  IntegerDouble d;
  d.negative = a < 0.0;
  const double magnitude = std::fabs(a);
  if (magnitude < 9007199254740992.0) {  // 2^53
    d.value = static_cast<uint64_t>(magnitude);
    d.exp = 0;
  } else {
    const uint64_t bits = ozaki::double_bits(magnitude);
    d.value = (bits & 0x000fffffffffffffull) | 0x0010000000000000ull;
    d.exp = static_cast<int>(bits >> 52) - 1075;  // (biased - 1022) - 53
  }
  return d;
}

// The residue of the integer in [0, m).
uint32_t residue_of(const IntegerDouble& d, uint32_t m) {
  uint32_t r = static_cast<uint32_t>(d.value % m);
  if (d.exp > 0) r = r * st::pow2_mod(d.exp, m) % m;
  if (d.negative) r = (m - r) % m;
  return r;
}

// The stored (symmetric) residue: r >= (m + 1) / 2 maps to r - m; 256's 128 is -128.
int8_t symmetric_residue(uint32_t r, uint32_t m) {
  const int32_t s = r >= (m + 1) / 2 ? static_cast<int32_t>(r) - static_cast<int32_t>(m)
                                     : static_cast<int32_t>(r);
  return static_cast<int8_t>(s);
}

// trunc(ldexp(x, shift)) for finite x (reference.scale_to_integers).
double scale_to_integer(double x, int shift) { return std::trunc(std::ldexp(x, shift)); }

// c mod m in [0, m) with the hardware's division: the obvious twin of mod_i32.
int32_t positive_mod(int32_t c, int32_t m) {
  const int32_t r = c % m;
  return r < 0 ? r + m : r;
}

// The double path end to end: decompose_integer + residue_of + symmetric_residue.
int old_residue(double integer_valued, uint32_t m) {
  return symmetric_residue(residue_of(decompose_integer(integer_valued), m), m);
}

// ozaki::crt_finish<G> with a runtime G.
uint32_t group_crt_finish(int g, uint32_t packed, const ozaki::GroupCrtConstants& k) {
  switch (g) {
    case 1: return ozaki::crt_finish<1>(packed, k);
    case 2: return ozaki::crt_finish<2>(packed, k);
    case 3: return ozaki::crt_finish<3>(packed, k);
    default: return ozaki::crt_finish<4>(packed, k);
  }
}

// --- the checks, one function per tag -------------------------------------------------
// Each returns false for a malformed line.

std::map<int, ozaki::CrtConstants> g_crt_constants;  // by moduli count, from "crt_const"
std::vector<uint32_t> g_sres_moduli;                 // from "sres_moduli"

// clog2 <v> <ceil_log2(v)>                         reference._ceil_log2
bool check_clog2(Fields& f, const std::string& tag) {
  const unsigned long long v = f.u();
  const int want = static_cast<int>(f.i());
  if (!f.ok()) return false;
  count(tag);
  expect_eq(tag, "ceil_log2", st::ceil_log2(v), want);
  return true;
}

// fdiv <a> <b> <a // b>
bool check_fdiv(Fields& f, const std::string& tag) {
  const long long a = f.i(), b = f.i(), want = f.i();
  if (!f.ok()) return false;
  count(tag);
  expect_eq<int64_t>(tag, "floor_div", st::floor_div(a, b), want);
  return true;
}

// fbb <k> <fast_bound_bits(k)>
bool check_fbb(Fields& f, const std::string& tag) {
  const long long k = f.i();
  const int want = static_cast<int>(f.i());
  if (!f.ok()) return false;
  count(tag);
  expect_eq(tag, "fast_bound_bits", st::fast_bound_bits(k), want);
  return true;
}

// frexp <hex x> <np.frexp(x)[1]>
bool check_frexp(Fields& f, const std::string& tag) {
  const double x = f.hex();
  const int want = static_cast<int>(f.i());
  if (!f.ok()) return false;
  count(tag);
  expect_eq(tag, "frexp_exponent", st::frexp_exponent(x), want);
  return true;
}

// res <hex integer-valued x> <m> <symmetric residue>      reference.residues
// Both the double path and the fastmod path (shift 0).
bool check_res(Fields& f, const std::string& tag) {
  const double x = f.hex();
  const uint32_t m = static_cast<uint32_t>(f.u());
  const int want = static_cast<int>(f.i());
  if (!f.ok()) return false;
  count(tag);
  if (expect_eq(tag, "decompose_integer+residue", old_residue(x, m), want))
    check_fastmod_residue(tag, st::scaled_integer(x, 0), m, want);
  return true;
}

// pmod <c> <m> <c % m>
bool check_pmod(Fields& f, const std::string& tag) {
  const int32_t c = static_cast<int32_t>(f.i()), m = static_cast<int32_t>(f.i());
  const int32_t want = static_cast<int32_t>(f.i());
  if (!f.ok()) return false;
  count(tag);
  expect_eq(tag, "positive_mod", positive_mod(c, m), want);
  return true;
}

// scan <pb> <k> <E> <fast shift> <#non-finite> <hex x_0> ... <hex x_{k-1}>
// What scan_kernel does for one vector (one thread here): reference.exponents and
// reference.fast_shifts on the finite part, and the non-finite count.
bool check_scan(Fields& f, const std::string& tag) {
  const int pb = static_cast<int>(f.i());
  const long long k = f.i();
  const int want_e = static_cast<int>(f.i()), want_s = static_cast<int>(f.i());
  const int want_nf = static_cast<int>(f.i());
  std::vector<double> x(k > 0 ? k : 0);
  for (auto& v : x) v = f.hex();
  if (!f.ok()) return false;
  count(tag);
  double vmax = 0;
  int nonfinite = 0;
  for (double a : x) {
    if (!std::isfinite(a)) ++nonfinite;
    else if (std::fabs(a) > vmax) vmax = std::fabs(a);
  }
  const int e = st::frexp_exponent(vmax);
  const int qb = st::fast_bound_bits(k);
  uint64_t sum = 0;
  for (double a : x) {
    if (std::isfinite(a)) {
      const uint64_t q = st::ceil_scaled_magnitude(a, qb - e);
      sum += q * q;
    }
  }
  expect_eq(tag, "exponent", e, want_e) &&
      expect_eq(tag, "fast_shift_value", st::fast_shift_value(sum, e, qb, pb), want_s) &&
      expect_eq(tag, "non-finite count", nonfinite, want_nf);
  return true;
}

// csm <hex x> <e> <q>: ceil(2^e |x|) raised to 1 for x != 0 (the q of the scan and of
// the coarse magnitudes), against Python's exact fractions.
bool check_csm(Fields& f, const std::string& tag) {
  const double x = f.hex();
  const int e = static_cast<int>(f.i());
  const unsigned long long want = f.u();
  if (!f.ok()) return false;
  count(tag);
  expect_eq(tag, "ceil_scaled_magnitude", static_cast<unsigned long long>(st::ceil_scaled_magnitude(x, e)),
            want);
  if (want < (1ull << 32) && e >= -2044 && e <= 2044) {  // the scan's form: q < 2^32
    expect_eq(tag, "ceil_scaled_by",
              static_cast<unsigned long long>(st::ceil_scaled_by(std::fabs(x), st::scale_factors(e))), want);
  }
  return true;
}

// coarse <hex x> <E> <coarse magnitude>              reference.coarse_magnitudes
// Also the scan's form: coarse_from_scan of the scan's q = ceil_scaled_by(|x|, 2^(qb - E))
// (0 for NaN and Inf, as the kernel makes it) at every qb from kCoarseBits to
// kFastBoundBits.
bool check_coarse(Fields& f, const std::string& tag) {
  const double x = f.hex();
  const int e = static_cast<int>(f.i()), want = static_cast<int>(f.i());
  if (!f.ok()) return false;
  count(tag);
  expect_eq(tag, "coarse_value", static_cast<int>(st::coarse_value(x, e)), want);
  const double m = std::isfinite(x) ? std::fabs(x) : 0.0;
  for (int qb = ozaki::kCoarseBits; qb <= ozaki::kFastBoundBits; ++qb) {
    const uint32_t q = st::ceil_scaled_by(m, st::scale_factors(qb - e));
    if (!expect_eq(tag, ("coarse_from_scan qb=" + std::to_string(qb)).c_str(),
                   static_cast<int>(st::coarse_from_scan(q, qb)), want)) {
      break;
    }
  }
  return true;
}

// scale <hex x> <shift> <count> <r_0> ... : symmetric residues of
// reference.scale_to_integers(x, shift) modulo the first `count` moduli of the table,
// through the double path (scale_to_integer + decompose_integer) and the fastmod path
// (scaled_integer + float pieces): the old and the new residue path of the kernels.
bool check_scale(Fields& f, const std::string& tag) {
  const double x = f.hex();
  const int shift = static_cast<int>(f.i()), n = static_cast<int>(f.i());
  std::vector<int> want(n > 0 ? n : 0);
  for (auto& v : want) v = static_cast<int>(f.i());
  if (!f.ok() || n > ozaki::kMaxModuli) return false;
  count(tag);
  const uint32_t* const table = kModuliTable;  // rendered by the test from MODULI_TABLE
  const double xi = std::isfinite(x) ? scale_to_integer(x, shift) : 0.0;
  const st::ScaledInteger sv = st::scaled_integer(x, shift);
  for (int g = 0; g < n; ++g) {
    const std::string what = "double path m=" + std::to_string(table[g]);
    if (!expect_eq(tag, what.c_str(), old_residue(xi, table[g]), want[g])) break;
    if (!check_fastmod_residue(tag, sv, table[g], want[g])) break;
  }
  return true;
}

// sres_moduli <m...> (handled in main) names the moduli of the sres lines after it.
// sres <hex a> <shift> <s_0> ...: symmetric residues of trunc(2^shift a) computed with
// exact Python integers (NaN/Inf -> 0; an ldexp overflow to +-Inf -> +-2^1024), for
// every modulus of sres_moduli, over shifts far outside what the reference produces.
// The fastmod path (scaled_integer) must match, and so must the double path.
bool check_sres(Fields& f, const std::string& tag) {
  const double a = f.hex();
  const int32_t shift = static_cast<int32_t>(f.i());
  std::vector<int> want(g_sres_moduli.size());
  for (auto& v : want) v = static_cast<int>(f.i());
  if (!f.ok() || g_sres_moduli.empty()) return false;
  count(tag);
  const st::ScaledInteger sv = st::scaled_integer(a, shift);
  const IntegerDouble d = decompose_integer(std::isfinite(a) ? scale_to_integer(a, shift) : 0.0);
  for (size_t g = 0; g < want.size(); ++g) {
    const uint32_t m = g_sres_moduli[g];
    const std::string what = "double path m=" + std::to_string(m);
    if (!expect_eq(tag, what.c_str(), static_cast<int>(symmetric_residue(residue_of(d, m), m)),
                   want[g]))
      break;
    if (!check_fastmod_residue(tag, sv, m, want[g])) break;
  }
  return true;
}

// route <hex a> <shift>: the residue kernel's two-step decomposition against scaled_integer
// (itself checked against Python integers by the sres lines). The kernel keeps t alone
// between its steps: entry_bits_at(a, t) gives entry_bits(a, shift) again, and
// scaled_integer(a, entry_shift(a, t)) is scaled_integer(a, shift) (the table route).
// entry_exp gives the same exp wherever either is below kPow2Table and both are at least
// kPow2Table otherwise (the warp's route is the same); where its exp is at most
// kWideMaxExp, scaled_small gives its value and exp (and sign, for a nonzero value),
// wide_integer its V in two words, and both the same pieces bit for bit.
bool check_route(Fields& f, const std::string& tag) {
  const double a = f.hex();
  const int32_t shift = static_cast<int32_t>(f.i());
  if (!f.ok()) return false;
  count(tag);
  const st::ScaledInteger sv = st::scaled_integer(a, shift);
  const st::EntryBits first = st::entry_bits(a, shift);
  const st::EntryBits b = st::entry_bits_at(a, first.t);
  if (b.mant != first.mant || b.t != first.t || b.live != first.live || b.sign != first.sign) {
    mismatch(tag, "entry_bits_at(a, t) differs from entry_bits(a, shift)");
    return true;
  }
  const st::ScaledInteger st_again = st::scaled_integer(a, st::entry_shift(a, b.t));
  if (st_again.value != sv.value || st_again.exp != sv.exp || st_again.negative != sv.negative) {
    mismatch(tag, "scaled_integer(a, entry_shift(a, t)) differs from scaled_integer(a, shift)");
    return true;
  }
  const int e = st::entry_exp(b);
  if ((e < st::kPow2Table || sv.exp < st::kPow2Table) && e != sv.exp) {
    mismatch(tag, "entry_exp=" + std::to_string(e) + ", scaled_integer exp=" + std::to_string(sv.exp));
    return true;
  }
  if (sv.exp > st::kWideMaxExp) return true;
  const st::ScaledInteger ss = st::scaled_small(b);
  if (ss.value != sv.value || ss.exp != sv.exp || (sv.value != 0 && ss.negative != sv.negative)) {
    mismatch(tag, "scaled_small value/exp/sign differ from scaled_integer's");
    return true;
  }
  auto same = [](float x, float y) { return st::float_to_bits(x) == st::float_to_bits(y); };
  if (sv.exp == 0) {
    const st::Pieces p = st::residue_pieces(ss, true), pv = st::residue_pieces(sv, true);
    if (!same(p.p0, pv.p0) || !same(p.p1, pv.p1) || !same(p.p2, pv.p2) || !same(p.p3, pv.p3)) {
      mismatch(tag, "residue_pieces(scaled_small) differ from scaled_integer's");
      return true;
    }
  }
  const st::WideInteger wi = st::wide_integer(b), wv = wide_words(sv);
  if (wi.lo != wv.lo || wi.hi != wv.hi || (sv.value != 0 && wi.sign != wv.sign)) {
    mismatch(tag, "wide_integer differs from scaled_integer's V");
    return true;
  }
  const st::WidePieces w = st::wide_pieces(wi), wp = st::wide_pieces(wv);
  if (!same(w.w0, wp.w0) || !same(w.w1, wp.w1) || !same(w.w2, wp.w2) || !same(w.w3, wp.w3) ||
      !same(w.w4, wp.w4)) {
    mismatch(tag, "wide_pieces(wide_integer) differ from scaled_integer's");
  }
  return true;
}

// acc <m> <n> <pb> <G (m*n)> <E_a (m)> <E_b (n)> <mu_fast> <nu_fast> <mu> <nu>
// reference.accurate_shifts as the two kernels do it: the row pass, then the column pass.
bool check_acc(Fields& f, const std::string& tag) {
  const long long m = f.i(), n = f.i();
  const int pb = static_cast<int>(f.i());
  if (!f.ok() || m < 0 || n < 0 || m * n > 1000000) return false;
  std::vector<long long> g(m * n);
  std::vector<int> ea(m), eb(n), muf(m), nuf(n), mue(m), nue(n);
  for (auto& v : g) v = f.i();
  for (auto* vec : {&ea, &eb, &muf, &nuf, &mue, &nue})
    for (auto& v : *vec) v = static_cast<int>(f.i());
  if (!f.ok()) return false;
  count(tag);
  std::vector<int64_t> d(m);
  for (long long i = 0; i < m; ++i) {
    int64_t row_min = ozaki::kNoConstraint;
    for (long long j = 0; j < n; ++j) {
      const int64_t s = st::coarse_slack(g[i * n + j], ea[i], eb[j], muf[i], nuf[j], pb);
      row_min = s < row_min ? s : row_min;
    }
    d[i] = st::row_gain(row_min, ea[i], muf[i], pb);
    if (!expect_eq<int64_t>(tag, "mu", muf[i] + d[i], mue[i])) return true;
  }
  for (long long j = 0; j < n; ++j) {
    int64_t col_min = ozaki::kNoConstraint;
    for (long long i = 0; i < m; ++i) {
      const int64_t s = st::coarse_slack(g[i * n + j], ea[i], eb[j], muf[i], nuf[j], pb) - d[i];
      col_min = s < col_min ? s : col_min;
    }
    const int64_t nu = nuf[j] + st::column_gain(col_min, eb[j], nuf[j], pb);
    if (!expect_eq<int64_t>(tag, "nu", nu, nue[j])) return true;
  }
  // The kernels' form: int32 keys, minima from kNoSlack (stage_shifts.cuh).
  std::vector<int32_t> key(m);
  for (long long i = 0; i < m; ++i) {
    int32_t best = st::kNoSlack;
    for (long long j = 0; j < n; ++j) {
      const long long gv = g[i * n + j];
      const int32_t s = st::slack_column_key(eb[j], nuf[j]) - st::ceil_log2_bound(static_cast<int64_t>(gv));
      if (gv > 0 && s < best) best = s;
      if (gv > 0 && gv < (1ll << 31)) {
        expect_eq(tag, "ceil_log2_bound (int32)", st::ceil_log2_bound(static_cast<int32_t>(gv)),
                  st::ceil_log2_bound(static_cast<int64_t>(gv)));
      }
    }
    const int32_t rk = st::slack_row_key(ea[i], muf[i], pb);
    const int64_t d = st::row_gain(st::slack_total(rk, best), ea[i], muf[i], pb);
    if (!expect_eq<int64_t>(tag, "mu (keys)", muf[i] + d, mue[i])) return true;
    key[i] = static_cast<int32_t>(rk - d);
  }
  for (long long j = 0; j < n; ++j) {
    int32_t best = st::kNoSlack;
    for (long long i = 0; i < m; ++i) {
      const long long gv = g[i * n + j];
      const int32_t s = key[i] - st::ceil_log2_bound(static_cast<int64_t>(gv));
      if (gv > 0 && s < best) best = s;
    }
    const int64_t col_min = st::slack_total(st::slack_column_key(eb[j], nuf[j]), best);
    const int64_t nu = nuf[j] + st::column_gain(col_min, eb[j], nuf[j], pb);
    if (!expect_eq<int64_t>(tag, "nu (keys)", nu, nue[j])) return true;
  }
  // The one-read kernel's form (int32 bounds only): absent entries at kAbsentLog2, the keys
  // less one, one min per entry, present_or_none, row_gain_keys.
  const int32_t edges[] = {INT32_MIN, INT32_MIN + 1, -123456, -2, -1, 0, 1, 2, 3, 4, 5, 7, 8, 9,
                           (1 << 29) + 1, 1 << 30, (1 << 30) + 1, INT32_MAX - 1, INT32_MAX};
  for (const int32_t gv : edges) {
    const int32_t want = gv > 0 ? st::ceil_log2_bound(gv) - 1 : st::kAbsentLog2;
    if (!expect_eq(tag, "bound_log2_less_one (edges)", st::bound_log2_less_one(gv), want)) return true;
  }
  for (const long long gv : g) {
    if (gv < INT32_MIN || gv > INT32_MAX) return true;
  }
  std::vector<int32_t> one_read_key(m);
  for (long long i = 0; i < m; ++i) {
    int32_t best = st::kNoSlack;
    for (long long j = 0; j < n; ++j) {
      const int32_t gv = static_cast<int32_t>(g[i * n + j]);
      const int32_t lg = st::bound_log2_less_one(gv);
      if (!expect_eq(tag, "bound_log2_less_one", lg, gv > 0 ? st::ceil_log2_bound(gv) - 1 : st::kAbsentLog2)) {
        return true;
      }
      const int32_t s = st::slack_column_key(eb[j], nuf[j]) - 1 - lg;
      best = s < best ? s : best;
    }
    const int32_t rk = st::slack_row_key(ea[i], muf[i], pb);
    const int32_t d = st::row_gain_keys(rk, st::present_or_none(best), ea[i], muf[i], pb);
    if (!expect_eq<int64_t>(tag, "mu (one read)", muf[i] + d, mue[i])) return true;
    one_read_key[i] = rk - d - 1;
  }
  for (long long j = 0; j < n; ++j) {
    int32_t best = st::kNoSlack;
    for (long long i = 0; i < m; ++i) {
      const int32_t s = one_read_key[i] - st::bound_log2_less_one(static_cast<int32_t>(g[i * n + j]));
      best = s < best ? s : best;
    }
    const int64_t col_min = st::slack_total(st::slack_column_key(eb[j], nuf[j]), st::present_or_none(best));
    const int64_t nu = nuf[j] + st::column_gain(col_min, eb[j], nuf[j], pb);
    if (!expect_eq<int64_t>(tag, "nu (one read)", nu, nue[j])) return true;
  }
  return true;
}

// crt_const <count> <limbs> <moduli (kMaxModuli, zero padded)> <hex weight_limbs [kMaxModuli][kMaxLimbs]>
//           <hex product_limbs, limb_scales, quotient_factors [kMaxLimbs] each>
// numerics.crt_constants(count) laid out as ozaki::CrtConstants (not a check).
bool read_crt_const(Fields& f, const std::string&) {
  ozaki::CrtConstants c{};
  c.count = static_cast<int32_t>(f.i());
  c.limbs = static_cast<int32_t>(f.i());
  for (int g = 0; g < ozaki::kMaxModuli; ++g) c.moduli[g] = static_cast<int32_t>(f.i());
  for (int g = 0; g < ozaki::kMaxModuli; ++g)
    for (int j = 0; j < ozaki::kMaxLimbs; ++j) c.weight_limbs[g][j] = f.hex();
  for (int j = 0; j < ozaki::kMaxLimbs; ++j) c.product_limbs[j] = f.hex();
  for (int j = 0; j < ozaki::kMaxLimbs; ++j) c.limb_scales[j] = f.hex();
  for (int j = 0; j < ozaki::kMaxLimbs; ++j) c.quotient_factors[j] = f.hex();
  if (!f.ok() || c.count < 2 || c.count > ozaki::kMaxModuli || c.limbs < 1 || c.limbs > ozaki::kMaxLimbs) {
    return false;
  }
  g_crt_constants[c.count] = c;
  return true;
}

// crt <count> <r_0..r_{count-1}> <shift_sum> <hex alpha> <hex beta> <hex c> <hex pattern>
//     <hex X> <hex Y>
// What crt_unscale_kernel does for one (i, j): residue r_g in [0, m_g) arrives as three
// raw int32 chunk sums congruent to r_g (reduced by positive_mod and by mod_i32), the
// limb sums, crt_finish (must be reference.crt_reconstruct's X bit for bit), then
// crt_output with the NaN/Inf pattern entry (reference.gemm's substitution, then
// reference.unscale: Y); with pattern == 0 also crt_finish + unscale_value.
bool check_crt(Fields& f, const std::string& tag) {
  const int n = static_cast<int>(f.i());
  auto it = g_crt_constants.find(n);
  if (!f.ok() || it == g_crt_constants.end()) return false;
  const ozaki::CrtConstants& c = it->second;
  std::vector<int32_t> r(n);
  for (auto& v : r) v = static_cast<int32_t>(f.i());
  const int32_t shift = static_cast<int32_t>(f.i());
  const double alpha = f.hex(), beta = f.hex(), cval = f.hex(), pattern = f.hex();
  const double want_x = f.hex(), want_y = f.hex();
  if (!f.ok()) return false;
  count(tag);
  double sums_a[ozaki::kMaxLimbs] = {0, 0, 0, 0};
  double sums_b[ozaki::kMaxLimbs] = {0, 0, 0, 0};
  for (int g = 0; g < n; ++g) {
    const int32_t mod = c.moduli[g];
    const int32_t chunks[3] = {r[g] - 7 * mod + 5, -5 - 3 * mod, 2000000000 / mod * mod};
    int64_t sum_a = 0, sum_b = 0;
    const uint32_t um = static_cast<uint32_t>(mod);
    for (int32_t v : chunks) {
      sum_a += positive_mod(v, mod);
      sum_b += ozaki::mod_i32(v, um, ozaki::barrett_magic(um), ozaki::signed_offset(um));
    }
    st::crt_add_residue(c, g, static_cast<int32_t>(sum_a % mod), sums_a);
    st::crt_add_residue(c, g, static_cast<int32_t>(sum_b % mod), sums_b);
  }
  // The same limb sums from byte products (the tensor-core combine, stage_crt.cuh): the
  // weights' bytes, each byte's sum of products, limb_from_byte_sums.
  for (int j = 0; j < c.limbs; ++j) {
    uint32_t t[st::kLimbBytes] = {};
    for (int g = 0; g < n; ++g) {
      for (int b = 0; b < st::kLimbBytes; ++b) t[b] += st::crt_weight_byte(c, g, j, b) * static_cast<uint32_t>(r[g]);
    }
    if (!same_double(st::limb_from_byte_sums(t), sums_a[j])) {
      mismatch(tag, "limb_from_byte_sums: limb " + std::to_string(j) + " got " +
               hex_of(st::limb_from_byte_sums(t)) + ", want " + hex_of(sums_a[j]));
      return true;
    }
  }
  // ... and the 4 x 4 byte transpose that lays the residue bytes out for the MMA
  uint32_t words[4] = {0, 0, 0, 0};
  auto element = [&](int p, int e) { return static_cast<uint32_t>(r[(4 * p + e) % n]) & 0xffu; };
  for (int p = 0; p < 4; ++p)
    for (int e = 0; e < 4; ++e) words[p] |= element(p, e) << (8 * e);
  st::transpose_bytes_4x4(words);
  for (int p = 0; p < 4; ++p) {
    for (int e = 0; e < 4; ++e) {
      if (((words[e] >> (8 * p)) & 0xffu) != element(p, e)) {
        mismatch(tag, "transpose_bytes_4x4: byte (" + std::to_string(p) + ", " + std::to_string(e) + ")");
        return true;
      }
    }
  }
  const double x = st::crt_finish(c, sums_a);
  if (!same_double(x, want_x)) {
    mismatch(tag, "crt_finish: got " + hex_of(x) + ", want " + hex_of(want_x));
    return true;
  }
  const double y = st::crt_output(c, sums_b, pattern, shift, alpha, beta, beta != 0 ? cval : 0.0);
  if (!same_double(y, want_y)) {
    mismatch(tag, "crt_output: got " + hex_of(y) + ", want " + hex_of(want_y));
    return true;
  }
  if (pattern == 0.0) {
    const double y2 = st::unscale_value(x, shift, alpha, beta, beta != 0 ? cval : 0.0);
    if (!same_double(y2, want_y))
      mismatch(tag, "unscale_value: got " + hex_of(y2) + ", want " + hex_of(want_y));
    const double y3 = st::unscale_normal(x, shift, alpha);  // where 2^-shift is normal, beta 0
    if (beta == 0.0 && st::normal_power_of_two(-shift) && !same_double(y3, want_y))
      mismatch(tag, "unscale_normal: got " + hex_of(y3) + ", want " + hex_of(want_y));
  }
  return true;
}

// pat <k> <hex a_0..a_{k-1}> <hex b_0..b_{k-1}> <hex pattern>    reference.split_nonfinite
bool check_pat(Fields& f, const std::string& tag) {
  const int k = static_cast<int>(f.i());
  if (!f.ok() || k < 0) return false;
  std::vector<double> a(k), b(k);
  for (auto& v : a) v = f.hex();
  for (auto& v : b) v = f.hex();
  const double want = f.hex();
  if (!f.ok()) return false;
  count(tag);
  unsigned flags = 0;
  for (int l = 0; l < k; ++l) flags |= st::classify_term(a[l], b[l]);
  const double got = st::pattern_value(flags);
  if (!same_double(got, want)) mismatch(tag, "pattern_value: got " + hex_of(got) + ", want " + hex_of(want));
  return true;
}

// ldx <hex x> <e> <hex ldexp(x, e)>: scale_by_power_of_two (the CRT stages' unscaling)
// against NumPy's ldexp, one multiplication where 2^e is normal, ldexp itself elsewhere.
bool check_ldx(Fields& f, const std::string& tag) {
  const double x = f.hex();
  const long long e = f.i();
  const double want = f.hex();
  if (!f.ok() || e < -100000 || e > 100000) return false;
  const double got = st::scale_by_power_of_two(x, static_cast<int>(e));
  count(tag);
  if (!same_double(got, want)) {
    mismatch(tag, "scale_by_power_of_two(" + hex_of(x) + ", " + std::to_string(e) + "): got " + hex_of(got) +
                      ", want " + hex_of(want));
  }
  return true;
}

// p2 <m> <e> <2^e mod m>: pow2_mod, and pow2_factor as its centered representative, also
// from the base pow2_mod(e - e % 16) (pow2_factor_from_base, the residues kernel's table);
// at e = 0 the constants built from the bases as the kernel builds them.
bool check_p2(Fields& f, const std::string& tag) {
  const uint32_t m = static_cast<uint32_t>(f.u());
  const int e = static_cast<int>(f.i());
  const uint32_t want = static_cast<uint32_t>(f.u());
  if (!f.ok()) return false;
  count(tag);
  if (!expect_eq(tag, "pow2_mod", st::pow2_mod(e, m), want)) return true;
  const int centered = 2 * want > m ? static_cast<int>(want) - static_cast<int>(m) : static_cast<int>(want);
  expect_eq(tag, "pow2_factor", static_cast<int>(st::pow2_factor(e, m)), centered);
  const uint32_t base = st::pow2_mod(e - e % 16, m);
  expect_eq(tag, "pow2_factor_from_base", static_cast<int>(st::pow2_factor_from_base(base, e, m)), centered);
  if (e == 0) {  // once per m: the kernel's constants, from the bases, are pow2_factor's
    const auto from_bases = [m](int x) { return st::pow2_factor_from_base(st::pow2_mod(x - x % 16, m), x, m); };
    const st::FloatModulus k = st::float_modulus(m), kb = st::float_modulus(m, from_bases);
    const st::WideModulus w = st::wide_modulus(m), wb = st::wide_modulus(m, from_bases);
    expect_eq(tag, "float_modulus from the bases", memcmp(&k, &kb, sizeof(k)) == 0, true);
    expect_eq(tag, "wide_modulus from the bases", memcmp(&w, &wb, sizeof(w)) == 0, true);
  }
  return true;
}

// bmod <u32> <m> <u % m>       barrett_reduce on 32-bit words
bool check_bmod(Fields& f, const std::string& tag) {
  const uint32_t u = static_cast<uint32_t>(f.u()), m = static_cast<uint32_t>(f.u());
  const uint32_t want = static_cast<uint32_t>(f.u());
  if (!f.ok()) return false;
  count(tag);
  expect_eq(tag, "barrett_reduce", ozaki::barrett_reduce(u, m, ozaki::barrett_magic(m)), want);
  return true;
}

// imod <i32> <m> <c % m>       mod_i32, and ozaki::residue (the fused fold) for m <= 256
bool check_imod(Fields& f, const std::string& tag) {
  const int32_t c = static_cast<int32_t>(f.i());
  const uint32_t m = static_cast<uint32_t>(f.u()), want = static_cast<uint32_t>(f.u());
  if (!f.ok()) return false;
  count(tag);
  if (expect_eq(tag, "mod_i32", ozaki::mod_i32(c, m, ozaki::barrett_magic(m), ozaki::signed_offset(m)), want) &&
      m >= 2 && m <= 256)
    expect_eq(tag, "group_arith residue", ozaki::residue(c, ozaki::ModulusFold::make(m)), want);
  return true;
}

// grp <count> <#groups> <sizes...> <r_0..r_{count-1}> <partials...>: with X mod M_gr
// (M_gr the product of a group of consecutive table moduli) every r_g = X mod m_g
// follows through barrett_reduce (P_combine_unscale's reduction of the partial CRT values).
bool check_grp(Fields& f, const std::string& tag) {
  const int n = static_cast<int>(f.i()), ngroups = static_cast<int>(f.i());
  if (!f.ok() || n < 1 || n > ozaki::kMaxModuli || ngroups < 1 || ngroups > ozaki::kMaxModuli) return false;
  std::vector<int> sizes(ngroups), r(n);
  std::vector<uint32_t> parts(ngroups);
  for (auto& v : sizes) v = static_cast<int>(f.i());
  for (auto& v : r) v = static_cast<int>(f.i());
  for (auto& v : parts) v = static_cast<uint32_t>(f.u());
  if (!f.ok()) return false;
  count(tag);
  const uint32_t* const table = kModuliTable;  // rendered by the test from MODULI_TABLE
  int g = 0;
  for (int gr = 0; gr < ngroups; ++gr) {
    for (int t = 0; t < sizes[gr]; ++t, ++g) {
      if (g >= n) return false;
      const std::string what = "barrett_reduce of partial " + std::to_string(gr) + " m=" + std::to_string(table[g]);
      if (!expect_eq(tag, what.c_str(), ozaki::barrett_reduce(parts[gr], table[g], ozaki::barrett_magic(table[g])),
                     static_cast<uint32_t>(r[g])))
        return true;
    }
  }
  return g == n;
}

// pack <s_0> <s_1> <s_2> <s_3> <word>: pack_bytes of four residue words (s_i in the low
// byte, other bits above it, as residue_word leaves them).
bool check_pack(Fields& f, const std::string& tag) {
  int s[4];
  for (int& v : s) v = static_cast<int>(f.i());
  const uint32_t want = static_cast<uint32_t>(f.u());
  if (!f.ok()) return false;
  count(tag);
  uint32_t w[4];
  for (int i = 0; i < 4; ++i) w[i] = (static_cast<uint32_t>(s[i]) & 0xffu) | (0x9e3779b9u * (i + 1) << 8);
  expect_eq(tag, "pack_bytes", st::pack_bytes(w[0], w[1], w[2], w[3]), want);
  return true;
}

// gfold <m> <x (int32)> <x % m>: ozaki::residue, the fused mainloop fold.
bool check_gfold(Fields& f, const std::string& tag) {
  const uint32_t m = static_cast<uint32_t>(f.u());
  const int32_t x = static_cast<int32_t>(f.i());
  const uint32_t want = static_cast<uint32_t>(f.u());
  if (!f.ok() || m < 2 || m > 256) return false;
  count(tag);
  expect_eq(tag, "residue(int32, ModulusFold)", ozaki::residue(x, ozaki::ModulusFold::make(m)), want);
  return true;
}

// gconst <G> <m_0..m_{G-1}> <c_0..c_{G-1}> <M> <barrett>: make_group_constants accepts
// the group and derives the CRT weights, the product and floor((2^64 - 1) / M).
bool check_gconst(Fields& f, const std::string& tag) {
  const int n = static_cast<int>(f.i());
  if (!f.ok() || n < 1 || n > ozaki::kMaxGroupSize) return false;
  uint32_t m[ozaki::kMaxGroupSize] = {}, c[ozaki::kMaxGroupSize] = {};
  for (int g = 0; g < n; ++g) m[g] = static_cast<uint32_t>(f.u());
  for (int g = 0; g < n; ++g) c[g] = static_cast<uint32_t>(f.u());
  const uint32_t product = static_cast<uint32_t>(f.u());
  const uint64_t barrett = f.u();
  if (!f.ok()) return false;
  count(tag);
  ozaki::GroupConstants k;
  int bad = 0;
  const char* why = ozaki::make_group_constants(m, n, k, bad);
  if (why != nullptr) {
    mismatch(tag, std::string("refused: ") + why);
    return true;
  }
  for (int g = 0; g < n; ++g)
    if (!expect_eq(tag, "weight", k.crt.weight[g], c[g]) ||
        !expect_eq(tag, "fold modulus", k.fold[g].modulus, m[g]))
      return true;
  expect_eq(tag, "product", k.crt.product, product) &&
      expect_eq<uint64_t>(tag, "barrett", k.crt.barrett, barrett);
  return true;
}

// gbad <G> <m...> <bad index> <message...>: make_group_constants refuses the group.
bool check_gbad(Fields& f, const std::string& tag) {
  const int n = static_cast<int>(f.i());
  if (!f.ok() || n < 0 || n > 8) return false;
  uint32_t m[8] = {};
  for (int g = 0; g < n; ++g) m[g] = static_cast<uint32_t>(f.u());
  const int want_index = static_cast<int>(f.i());
  const std::string want = f.rest();
  if (!f.ok() || want.empty()) return false;
  count(tag);
  ozaki::GroupConstants k;
  int bad = 0;
  const char* why = ozaki::make_group_constants(m, n, k, bad);
  if (why == nullptr) mismatch(tag, "accepted, want refusal: " + want);
  else if (want != why) mismatch(tag, std::string("message: got '") + why + "', want '" + want + "'");
  else expect_eq(tag, "bad_index", bad, want_index);
  return true;
}

// gcrt <G> <m_0..m_{G-1}> <r_0..r_{G-1}> <x>: crt_finish<G> of the packed residue bytes
// is the x in [0, M) with x = r_g (mod m_g) (Python's exact CRT).
bool check_gcrt(Fields& f, const std::string& tag) {
  const int n = static_cast<int>(f.i());
  if (!f.ok() || n < 1 || n > ozaki::kMaxGroupSize) return false;
  uint32_t m[ozaki::kMaxGroupSize] = {};
  uint32_t packed = 0;
  for (int g = 0; g < n; ++g) m[g] = static_cast<uint32_t>(f.u());
  for (int g = 0; g < n; ++g) packed |= (static_cast<uint32_t>(f.u()) & 0xffu) << (8 * g);
  const uint32_t want = static_cast<uint32_t>(f.u());
  if (!f.ok()) return false;
  count(tag);
  ozaki::GroupConstants k;
  int bad = 0;
  const char* why = ozaki::make_group_constants(m, n, k, bad);
  if (why != nullptr) {
    mismatch(tag, std::string("refused: ") + why);
    return true;
  }
  expect_eq(tag, "crt_finish<G>", group_crt_finish(n, packed, k.crt), want);
  return true;
}

// gbytes <G> <bytes>: a stored group partial of G moduli takes `bytes` bytes
// (ozaki_cutlass.numerics.partial_bytes), in partial_bytes() and in PartialElement<G>.
bool check_gbytes(Fields& f, const std::string& tag) {
  const int g = static_cast<int>(f.i());
  const long long want = f.i();
  if (!f.ok() || g < 1 || g > ozaki::kMaxGroupSize) return false;
  count(tag);
  const long long sizes[] = {0, sizeof(ozaki::PartialElement<1>), sizeof(ozaki::PartialElement<2>),
                             sizeof(ozaki::PartialElement<3>), sizeof(ozaki::PartialElement<4>)};
  expect_eq(tag, "partial_bytes", static_cast<long long>(ozaki::partial_bytes(g)), want);
  expect_eq(tag, "sizeof(PartialElement<G>)", sizes[g], want);
  return true;
}

// --- sweeps: many values, ground truth = 64-bit integer arithmetic --------------------

// sweep_y <m> <lo> <hi> <stride>: every integer y = lo, lo + stride, ... <= hi
// (|y| < 2^22, residue_word's domain; the wide pieces reach 4193279, combine_pieces
// 3161727): residue_word(y + 1/4) has y mods m in its low byte, for FloatModulus and
// WideModulus alike, and reduce_near(y) is an integer r with |r| <= m/2 and r = y (mod m).
bool sweep_y(Fields& f, const std::string& tag) {
  const uint32_t m = static_cast<uint32_t>(f.u());
  const long long lo = f.i(), hi = f.i(), stride = f.i();
  if (!f.ok() || m < 2 || m > 256 || stride < 1 || lo < -4194303 || hi > 4194303) return false;
  const st::FloatModulus k = st::float_modulus(m);
  const st::WideModulus kw = st::wide_modulus(m);
  long long n = 0, bad = 0, first_bad = 0;
  for (long long y = lo; y <= hi; y += stride, ++n) {
    const float yf = static_cast<float>(y);
    const int want = sym_mod(y, m);
    const float yq = st::add_rn_f(yf, 0.25f);
    const float r = st::reduce_near(yf, k);
    const int64_t ri = static_cast<int64_t>(r);
    const bool ok = st::residue_byte(st::residue_word(yq, k)) == static_cast<int8_t>(want) &&
                    st::residue_byte(st::residue_word(yq, kw)) == static_cast<int8_t>(want) &&
                    static_cast<float>(ri) == r && 2 * std::llabs(ri) <= m && sym_mod(ri, m) == want;
    if (!ok && bad++ == 0) first_bad = y;
  }
  count(tag, n);
  if (bad) mismatch(tag, std::to_string(bad) + " values, first y=" + std::to_string(first_bad), bad);
  return true;
}

// sweep_rf <m>: the e > 0 step for every r, f in [-m/2, m/2]:
// residue_word(r f + 1/4) holds (r f) mods m.
bool sweep_rf(Fields& f, const std::string& tag) {
  const uint32_t m = static_cast<uint32_t>(f.u());
  if (!f.ok() || m < 2 || m > 256) return false;
  const st::FloatModulus k = st::float_modulus(m);
  const int h = static_cast<int>(m) / 2;
  long long n = 0, bad = 0;
  std::string first;
  for (int r = -h; r <= h; ++r) {
    for (int fa = -h; fa <= h; ++fa, ++n) {
      const uint32_t b = st::residue_word(
          st::fma_rn_f(static_cast<float>(r), static_cast<float>(fa), 0.25f), k);
      if (st::residue_byte(b) != static_cast<int8_t>(sym_mod(int64_t(r) * fa, m)) && bad++ == 0)
        first = "r=" + std::to_string(r) + " f=" + std::to_string(fa);
    }
  }
  count(tag, n);
  if (bad) mismatch(tag, std::to_string(bad) + " values, first " + first, bad);
  return true;
}

// sweep_u32 <m> <lo> <hi> <stride>: every u = lo, lo + stride, ... < hi (0 <= u < 2^32):
// barrett_reduce(u) = u % m, and for c = int32(u): mod_i32(c) = c % m (Python's %) and, for
// m <= 256, the fused fold ozaki::residue(c) = c % m.
bool sweep_u32(Fields& f, const std::string& tag) {
  const uint32_t m = static_cast<uint32_t>(f.u());
  const unsigned long long lo = f.u(), hi = f.u(), stride = f.u();
  if (!f.ok() || m < 2 || m > 65536 || stride < 1 || hi > (1ull << 32) || lo > hi) return false;
  const uint32_t magic = ozaki::barrett_magic(m), offset = ozaki::signed_offset(m);
  const bool fold_ok = m <= 256;
  const ozaki::ModulusFold fold = ozaki::ModulusFold::make(fold_ok ? m : 2);
  long long n = 0, bad = 0;
  std::string first;
  for (unsigned long long u = lo; u < hi; u += stride, ++n) {
    const uint32_t u32 = static_cast<uint32_t>(u);
    const int32_t c = static_cast<int32_t>(u32);
    const uint32_t want_c = static_cast<uint32_t>(py_mod(c, m));
    const char* what = nullptr;
    if (ozaki::barrett_reduce(u32, m, magic) != u % m) what = "barrett_reduce";
    else if (ozaki::mod_i32(c, m, magic, offset) != want_c) what = "mod_i32";
    else if (fold_ok && ozaki::residue(c, fold) != want_c) what = "group_arith residue";
    else if (c >= 0 && !same_double(st::small_int_to_double(c), static_cast<double>(c)))
      what = "small_int_to_double";  // the CRT kernels' conversion of residues
    if (what && bad++ == 0) first = std::string(what) + " u=" + std::to_string(u);
  }
  count(tag, n);
  if (bad) mismatch(tag, std::to_string(bad) + " values, first " + first, bad);
  return true;
}

// Checks barrett_reduce(u) for u = every end of every period [q m, q m + m) of m that meets
// [lo, hi): the quotient estimate mulhi(u, magic) is non-decreasing in u, so it is right
// (floor(u / m) or one less, then corrected) for all u of a period when it is at both
// ends: exhaustive over [lo, hi). The want values need no division (u - q m at the ends).
template <class U>
bool sweep_barrett(const std::string& tag, U m, unsigned __int128 lo, unsigned __int128 hi) {
  const U magic = ozaki::barrett_magic(m);
  long long n = 0, bad = 0;
  std::string first;
  auto check = [&](U u, U want) {
    ++n;
    if (ozaki::barrett_reduce(u, m, magic) != want && bad++ == 0) {
      first = "u=" + std::to_string(static_cast<unsigned long long>(u));
    }
  };
  for (unsigned __int128 base = lo - lo % m; base < hi; base += m) {
    const unsigned __int128 first_u = base < lo ? lo : base;
    const unsigned __int128 last_u = base + m - 1 < hi - 1 ? base + m - 1 : hi - 1;
    check(static_cast<U>(first_u), static_cast<U>(first_u - base));
    check(static_cast<U>(last_u), static_cast<U>(last_u - base));
  }
  count(tag, n);
  if (bad) mismatch(tag, std::to_string(bad) + " values, first " + first, bad);
  return true;
}

// sweep_barrett32 <m> <lo> <hi>: barrett_reduce on 32-bit words, exhaustive over
// [lo, hi) (0 <= lo < hi <= 2^32; see sweep_barrett).
bool sweep_barrett32(Fields& f, const std::string& tag) {
  const unsigned long long m = f.u(), lo = f.u(), hi = f.u();
  if (!f.ok() || m < 2 || m > (1ull << 31) || lo >= hi || hi > (1ull << 32)) return false;
  return sweep_barrett<uint32_t>(tag, static_cast<uint32_t>(m), lo, hi);
}

// sweep_barrett64 <M> <hi>: barrett_reduce on 64-bit words, exhaustive over [0, hi)
// (hi <= 2^64 - 1; see sweep_barrett): the partial CRT sums of crt_finish<G>.
bool sweep_barrett64(Fields& f, const std::string& tag) {
  const unsigned long long m = f.u(), hi = f.u();
  if (!f.ok() || m < 2 || m > (1ull << 63) || hi < 1) return false;
  return sweep_barrett<uint64_t>(tag, m, 0, hi);
}

// kres <p1> <p2> <p3> <m> <re> <im>: karatsuba_residues of three int32 products against
// Python's (p1 - p2) % m and (p3 - p1 - p2) % m.
bool check_kres(Fields& f, const std::string& tag) {
  const int32_t p1 = static_cast<int32_t>(f.i()), p2 = static_cast<int32_t>(f.i()),
                p3 = static_cast<int32_t>(f.i());
  const uint32_t m = static_cast<uint32_t>(f.u()), want_re = static_cast<uint32_t>(f.u()),
                 want_im = static_cast<uint32_t>(f.u());
  if (!f.ok() || m < 2 || m > 256) return false;
  count(tag);
  uint32_t re = 0, im = 0;
  ozaki::karatsuba_residues(p1, p2, p3, m, ozaki::barrett_magic(m), ozaki::signed_offset(m), re, im);
  expect_eq(tag, "karatsuba Re", re, want_re);
  expect_eq(tag, "karatsuba Im", im, want_im);
  return true;
}

// kresn <p1> <p2> <p3> <m> <re> <im>: karatsuba_residues_narrow, for products within its
// bound (|p| <= kKaratsubaNarrowTerms * 128 * 128), against Python's % as kres.
bool check_kresn(Fields& f, const std::string& tag) {
  const int64_t p1 = f.i(), p2 = f.i(), p3 = f.i();
  const uint32_t m = static_cast<uint32_t>(f.u()), want_re = static_cast<uint32_t>(f.u()),
                 want_im = static_cast<uint32_t>(f.u());
  const int64_t bound = ozaki::kKaratsubaNarrowTerms * 128 * 128;
  if (!f.ok() || m < 2 || m > 256 || llabs(p1) > bound || llabs(p2) > bound || llabs(p3) > bound) return false;
  count(tag);
  uint32_t re = 0, im = 0;
  ozaki::karatsuba_residues_narrow(static_cast<int32_t>(p1), static_cast<int32_t>(p2), static_cast<int32_t>(p3),
                                   m, ozaki::barrett_magic(m), ozaki::signed_offset(m), re, im);
  expect_eq(tag, "narrow Re", re, want_re);
  expect_eq(tag, "narrow Im", im, want_im);
  return true;
}

// sweep_karatsuba <m>: exhaustive over every pair of symmetric residues r, s of m
// (symmetric_sum: r + s mod m, in the symmetric range) and every a, b in [0, m) (add_mod,
// sub_mod against 64-bit integer arithmetic).
bool sweep_karatsuba(Fields& f, const std::string& tag) {
  const long long m = f.i();
  if (!f.ok() || m < 2 || m > 256) return false;
  const int h = static_cast<int>((m + 1) / 2);
  long long n = 0, bad = 0;
  std::string first;
  auto note = [&](bool good, const std::string& what) {
    ++n;
    if (!good && bad++ == 0) first = what;
  };
  for (int r = h - static_cast<int>(m); r <= h - 1; ++r) {
    for (int s = h - static_cast<int>(m); s <= h - 1; ++s) {
      const int t = ozaki::symmetric_sum(r, s, static_cast<int>(m));
      note(t >= h - m && t <= h - 1 && (((t - r - s) % m) + m) % m == 0,
           "symmetric_sum(" + std::to_string(r) + ", " + std::to_string(s) + ")");
    }
  }
  const uint32_t mu = static_cast<uint32_t>(m);
  for (uint32_t a = 0; a < mu; ++a) {
    for (uint32_t b = 0; b < mu; ++b) {
      note(ozaki::add_mod(a, b, mu) == (a + b) % mu && ozaki::sub_mod(a, b, mu) == (a + mu - b) % mu,
           "add_mod/sub_mod(" + std::to_string(a) + ", " + std::to_string(b) + ")");
    }
  }
  count(tag, n);
  if (bad) mismatch(tag, "m=" + std::to_string(m) + ": " + std::to_string(bad) + " values, first " + first, bad);
  return true;
}

// inner <n> <E> <hex sum> <nonfinite> <hex x_0 .. x_n-1>: one column of n entries, as the
// inner pass reads it: runs of kInnerChunk entries, each an InnerRun (the kernel's own
// per-entry arithmetic, its normal entries by exponent fields), then the runs combined in
// order (inner_combine_add); E, sum: numerics.contract.inner_stats of the column. Each
// entry's returned exponent is checked against frexp_exponent (what the kernel's warp
// maximum reads), and the NaN/Inf count against the column's.
bool check_inner(Fields& f, const std::string& tag) {
  const long long n = f.i();
  const int want_top = static_cast<int>(f.i());
  const double want_sum = f.hex();
  const long long want_bad = f.i();
  std::vector<double> x(n > 0 ? n : 0);
  for (auto& v : x) v = f.hex();
  if (!f.ok()) return false;
  count(tag);
  std::vector<st::InnerRun> runs;
  int32_t bad = 0;
  bool exps_ok = true;
  for (long long i = 0; i < n; ++i) {
    if (i % ozaki::kInnerChunk == 0) runs.emplace_back();
    st::InnerRun& r = runs.back();
    r.add(x[i], &bad);
    const int want_e = std::isfinite(x[i]) && x[i] != 0.0 ? st::frexp_exponent(x[i]) : ozaki::kNoExponent;
    if (exps_ok && r.e != want_e) {
      mismatch(tag, "entry " + std::to_string(i) + " (" + hex_of(x[i]) + "): exponent " + std::to_string(r.e) +
                        ", want " + std::to_string(want_e));
      exps_ok = false;
    }
  }
  int32_t top = ozaki::kNoExponent;
  for (const auto& r : runs) top = r.top > top ? r.top : top;
  double sum = 0.0;
  for (const auto& r : runs) sum = st::inner_combine_add(sum, r.sum, r.top, top);
  if (exps_ok && expect_eq(tag, "top exponent", top, want_top) &&
      expect_eq(tag, "non-finite count", static_cast<long long>(bad), want_bad) && !same_double(sum, want_sum)) {
    mismatch(tag, "sum " + hex_of(sum) + ", want " + hex_of(want_sum));
  }
  return true;
}

using Check = bool (*)(Fields&, const std::string&);

const std::map<std::string, Check>& checks() {
  static const std::map<std::string, Check> table = {
      {"clog2", check_clog2},     {"fdiv", check_fdiv},        {"fbb", check_fbb},
      {"frexp", check_frexp},     {"res", check_res},          {"pmod", check_pmod},
      {"scan", check_scan},       {"coarse", check_coarse},    {"csm", check_csm},    {"scale", check_scale},
      {"sres", check_sres},       {"route", check_route},      {"acc", check_acc},          {"crt_const", read_crt_const},
      {"crt", check_crt},         {"pat", check_pat},          {"p2", check_p2},
      {"ldx", check_ldx},
      {"bmod", check_bmod},       {"imod", check_imod},        {"grp", check_grp},
      {"pack", check_pack},       {"gfold", check_gfold},      {"gconst", check_gconst},
      {"gbad", check_gbad},       {"gcrt", check_gcrt},        {"gbytes", check_gbytes},
      {"sweep_y", sweep_y},
      {"sweep_rf", sweep_rf},     {"sweep_u32", sweep_u32},
      {"sweep_barrett32", sweep_barrett32},                    {"sweep_barrett64", sweep_barrett64},
      {"kres", check_kres},       {"kresn", check_kresn},     {"sweep_karatsuba", sweep_karatsuba},
      {"inner", check_inner},
  };
  return table;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CASES_FILE|-\n", argv[0]);
    return 2;
  }
  std::ifstream file;
  std::istream* in = &std::cin;
  if (std::strcmp(argv[1], "-") != 0) {
    file.open(argv[1]);
    if (!file) {
      std::fprintf(stderr, "cannot open %s\n", argv[1]);
      return 2;
    }
    in = &file;
  }
  while (std::getline(*in, g_line)) {
    ++g_lineno;
    Fields f(g_line);
    const std::string tag = f.get<std::string>();
    if (tag.empty() || tag[0] == '#') continue;
    if (tag == "sres_moduli") {  // header of the sres lines: the moduli
      g_sres_moduli.clear();
      unsigned long long m;
      std::istringstream s(g_line.substr(tag.size()));
      while (s >> m) g_sres_moduli.push_back(static_cast<uint32_t>(m));
      continue;
    }
    const auto it = checks().find(tag);
    if (it == checks().end()) {
      std::printf("ERROR line %lld: unknown tag '%s'\n", g_lineno, tag.c_str());
      return 2;
    }
    if (!it->second(f, tag) || !f.at_end()) {  // too few, unreadable or extra fields
      std::printf("ERROR line %lld: malformed %s line: %.240s\n", g_lineno, tag.c_str(), g_line.c_str());
      return 2;
    }
  }
  long long cases = 0, bad = 0;
  for (const auto& [tag, t] : g_tally) {
    std::printf("COUNT %s %lld %lld\n", tag.c_str(), t.cases, t.bad);
    cases += t.cases;
    bad += t.bad;
  }
  std::printf("TOTAL %lld %lld\n", cases, bad);
  return bad ? 1 : 0;
}
