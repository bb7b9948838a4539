// The second core for the kernels: one helper thread, asleep between calls.
//
// OpenBLAS's own second thread measured slower in the train step: after each call its
// worker spins, waiting for the next, on the core MindSpore's matmuls use. The helper
// here sleeps on a condition variable instead, and the work is split so that each
// output element is computed by exactly one thread in the same order as on one thread:
// results are bit for bit those of one thread, whatever the thread count.
#pragma once

#include <unistd.h>
#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

namespace helper {

constexpr int64_t kMinWork = int64_t(1) << 21;       // multiply-adds below which waking the helper costs more
constexpr int64_t kMinElements = int64_t(1) << 16;   // elements, for the one-pass kernels

class Worker {
 public:
  // first() on the helper thread, second() on the caller's; returns when both are done.
  // Runs both on the caller's thread when the helper is taken (MindSpore may launch two
  // kernels at once) or this is a forked child (which has no helper thread).
  void run_pair(const std::function<void()> &first, const std::function<void()> &second) {
    if (getpid() != pid_ || !busy_.try_lock()) {
      first();
      second();
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      task_ = &first;
      done_ = false;
#if defined(__SSE__)
      csr_ = _mm_getcsr();              // the caller's rounding and denormal modes, for the same bits
#endif
    }
    wake_.notify_all();
    second();
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return done_; });
    }
    busy_.unlock();
  }

  static Worker &instance() {           // never destroyed: a joinable std::thread at exit would abort
    static Worker *worker = new Worker();
    return *worker;
  }

 private:
  Worker() : pid_(getpid()) { std::thread([this] { loop(); }).detach(); }

  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return task_ != nullptr; });
      const std::function<void()> *task = task_;
#if defined(__SSE__)
      _mm_setcsr(csr_);
#endif
      lock.unlock();
      (*task)();
      lock.lock();
      task_ = nullptr;
      done_ = true;
      wake_.notify_all();
    }
  }

  const pid_t pid_;
  std::mutex busy_;                     // held by the one caller using the helper
  std::mutex mutex_;                    // guards task_ and done_
  std::condition_variable wake_;
  const std::function<void()> *task_ = nullptr;
  bool done_ = false;
  unsigned csr_ = 0;                    // the caller's MXCSR (x86), set on the helper for each task
};

// product of all but the last dimension: the rows of a (..., C) tensor seen as (rows, C)
inline int64_t leading_rows(int ndim, const int64_t *shape) {
  int64_t rows = 1;
  for (int i = 0; i < ndim - 1; ++i) rows *= shape[i];
  return rows;
}

inline int &threads() {
  static int count = 1;
  return count;
}

inline void set_threads(int count) { threads() = count < 2 ? 1 : 2; }

// first() and second(), on two cores when there are two and the work is worth it.
template <typename First, typename Second>
void run_pair(bool worth_it, First first, Second second) {
  if (threads() < 2 || !worth_it) {
    first();
    second();
    return;
  }
  Worker::instance().run_pair(std::function<void()>(first), std::function<void()>(second));
}

// body(begin, end) over [0, count), in two halves on two cores when worth it.
template <typename Body>
void split_range(int64_t count, bool worth_it, Body body) {
  const int64_t half = count / 2;
  run_pair(worth_it && half > 0, [&] { body(0, half); }, [&] { body(half, count); });
}

// out[c] = sum over the rows of a (rows, cols) matrix's column c, for c in [begin, end): row by row, so each
// column's sum is added in the same order whichever range computes it (a Dense gradient's db, its
// columns in two halves, one after each core's gemm).
inline void column_sums(const float *a, int64_t rows, int64_t cols, int64_t begin, int64_t end, float *out) {
  for (int64_t c = begin; c < end; ++c) out[c] = 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = a + r * cols;
    for (int64_t c = begin; c < end; ++c) out[c] += row[c];
  }
}

}  // namespace helper
