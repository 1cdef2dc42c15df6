// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The host side of the stage kernels' entry points: status codes and messages, argument
// checks (status kBadArgument, before any CUDA call), grid sizes, and the check of each
// launch (status kCudaError). The exported functions of templates/stages.cu.j2 forward to
// the launchers of each stage's header, which are built from these.

#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include <cuda_runtime.h>

#include "ozaki/abi.h"
#include "ozaki/error_message.h"
#include "ozaki/stage_common.cuh"

namespace ozaki {
namespace stages {

enum Status : int {
  kOk = kStatusOk,
  kBadArgument = kStatusUnsupported,
  kCudaError = kStatusCudaError,
};

// The text behind P_last_error (ozaki/error_message.h).
using Message = ErrorMessage;

inline int64_t blocks_for(int64_t work_items, int64_t items_per_block) {
  const int64_t blocks = (work_items + items_per_block - 1) / items_per_block;
  return blocks < kMaxBlocks ? blocks : kMaxBlocks;
}

inline int check_launch(Message& err, const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    return err.set(kCudaError, "%s: kernel launch failed: %s (%s)", what, cudaGetErrorName(e),
                   cudaGetErrorString(e));
  }
  return kOk;
}

// a * b * c fits int64 (all >= 0).
inline bool product_fits(int64_t a, int64_t b, int64_t c = 1) {
  const int64_t limit = INT64_MAX;
  if (a == 0 || b == 0 || c == 0) return true;
  if (a > limit / b) return false;
  return a * b <= limit / c;
}

inline int check_vector_set(const char* what, const double* x, int64_t nvec, int64_t k,
                            Message& err) {
  if (nvec < 0 || k < 0) {
    return err.set(kBadArgument, "%s: nvec and k must be >= 0, got nvec=%lld k=%lld", what,
                   static_cast<long long>(nvec), static_cast<long long>(k));
  }
  if (x == nullptr && nvec > 0 && k > 0) return err.set(kBadArgument, "%s: x is null", what);
  return kOk;
}

inline int check_padding(const char* what, int64_t nvec, int64_t k, int64_t rows_pad,
                         int64_t k_pad, int64_t planes, Message& err) {
  if (rows_pad < nvec || k_pad < k || k_pad % kKAlignment != 0) {
    return err.set(kBadArgument,
                   "%s: need rows_pad >= nvec and k_pad >= k, k_pad a multiple of %lld; got "
                   "nvec=%lld rows_pad=%lld k=%lld k_pad=%lld",
                   what, static_cast<long long>(kKAlignment), static_cast<long long>(nvec),
                   static_cast<long long>(rows_pad), static_cast<long long>(k),
                   static_cast<long long>(k_pad));
  }
  if (!product_fits(rows_pad, k_pad, planes)) {
    return err.set(kBadArgument, "%s: output size rows_pad*k_pad*planes overflows int64", what);
  }
  return kOk;
}

inline bool lanes_along_k(int64_t vs, int64_t es) {
  const int64_t avs = vs < 0 ? -vs : vs;
  const int64_t aes = es < 0 ? -es : es;
  return aes <= avs;
}

inline ChunkGrid chunk_grid(const VectorSet& xs, int64_t rows_pad, int64_t k_pad) {
  ChunkGrid g;
  g.rows_pad = rows_pad;
  g.chunks_k = k_pad / kChunk;
  g.lanes_along_k = lanes_along_k(xs.vs, xs.es);
  g.slots = g.lanes_along_k ? rows_pad * g.chunks_k
                            : (rows_pad + kWarp - 1) / kWarp * kWarp * g.chunks_k;
  g.vector_loads = g.lanes_along_k && xs.es == 1 && xs.vs % 2 == 0 &&
                   reinterpret_cast<uintptr_t>(xs.x) % 16 == 0;
  return g;
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The blocks of `kernel` resident at once on the current device (SMs x blocks per SM, with
// `threads` per block and `dynamic_smem` bytes of dynamic shared memory each): queried once
// per kernel, block shape and device, then kept (no occupancy query on the launch path).
// kFallbackBlocks where a query fails.
inline constexpr int64_t kFallbackBlocks = 1024;

inline int64_t resident_capacity(const void* kernel, int threads, size_t dynamic_smem) {
  struct Known {
    const void* kernel;
    int threads;
    size_t smem;
    int device;
    int64_t capacity;
  };
  static std::mutex mutex;
  static std::vector<Known> known;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky; the launch itself is checked
    return kFallbackBlocks;
  }
  {
    const std::lock_guard<std::mutex> lock(mutex);
    for (const Known& k : known) {
      if (k.kernel == kernel && k.threads == threads && k.smem == dynamic_smem && k.device == device) {
        return k.capacity;
      }
    }
  }
  int sms = 0, per_sm = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, dynamic_smem) != cudaSuccess ||
      sms <= 0 || per_sm <= 0) {
    (void)cudaGetLastError();
    return kFallbackBlocks;
  }
  const int64_t capacity = static_cast<int64_t>(sms) * per_sm;
  const std::lock_guard<std::mutex> lock(mutex);
  known.push_back({kernel, threads, dynamic_smem, device, capacity});
  return capacity;
}

// Blocks for a grid-stride kernel: enough to fill every SM (resident_capacity), never
// more than the work needs.
template <class Kernel>
inline int64_t resident_blocks(Kernel kernel, int threads, int64_t work_items,
                               int64_t items_per_block, size_t dynamic_smem = 0) {
  const int64_t needed = (work_items + items_per_block - 1) / items_per_block;
  const int64_t limit = resident_capacity(reinterpret_cast<const void*>(kernel), threads, dynamic_smem);
  return needed < limit ? (needed > 0 ? needed : 1) : limit;
}

}  // namespace stages
}  // namespace ozaki
