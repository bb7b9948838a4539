// The process-wide settings the kernels run under, set from Python (kernels/__init__.py) through
// ctypes: how many threads they use, and how the CPU treats denormal numbers.
#include "helper.h"   // and xmmintrin.h on x86

// How many threads the kernels split their work over (1 or 2; see helper.h).
extern "C" void set_kernel_threads(int threads) { helper::set_threads(threads); }

// Denormal inputs read as zero and denormal results written as zero (MXCSR's DAZ and FTZ) on the
// calling thread and the threads it starts from now on (Linux threads inherit the mode). MindSpore's
// kernel threads run so (its ThreadPool sets both), but the threads that launch a compiled graph or a
// PyNative op do not, and which thread computes what depends on the launch (a graph's first launch
// runs elsewhere than its later ones): set on the main thread before MindSpore starts those, every
// thread computes alike, and a step gives the same bits whichever thread runs it.
extern "C" void flush_denormals() {
#if defined(__SSE__)
  _mm_setcsr(_mm_getcsr() | 0x8040);    // FTZ (bit 15) | DAZ (bit 6)
#endif
}
