// Copyright (c) ozaki-cutlass authors. BSD-3-Clause.
//
// The text behind every generated library's `P_last_error` (the GEMM entry points of
// int8_gemm_entry.h and the stage kernels' stage_launch.cuh). One per thread and per library
// (the template owns the `thread_local` instance); fixed size, so setting it never
// allocates or throws. Plain C++: no CUDA, no CUTLASS.

#pragma once

#include <cstdarg>
#include <cstdio>

namespace ozaki {

class ErrorMessage {
 public:
  void clear() noexcept { text_[0] = '\0'; }
  const char* c_str() const noexcept { return text_; }

  // Formats the message and returns `status` (whatever status type the caller uses).
  template <class Status>
  __attribute__((format(printf, 3, 4)))
  Status set(Status status, const char* format, ...) noexcept {
    va_list args;
    va_start(args, format);
    std::vsnprintf(text_, sizeof(text_), format, args);
    va_end(args);
    return status;
  }

 private:
  char text_[512] = {};
};

}  // namespace ozaki
