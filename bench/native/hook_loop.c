/* Calls a MuJoCo callback (mjcb_control's signature) n times in a tight loop and returns the
 * nanoseconds per call: the cost of mjfast's trampoline for one (model, data) pair, without the
 * ctypes or mj_forward around it. Built by bench/hooks_foreign.py with the system C compiler; it
 * needs no MuJoCo header (the pointers are opaque here). */
#include <stdint.h>
#include <time.h>

typedef void (*callback)(const void* m, void* d);

void empty_callback(const void* m, void* d) {
  (void)m;
  (void)d;
  __asm__ volatile("" ::: "memory");
}

double ns_per_call(callback fn, const void* m, void* d, int64_t n) {
  struct timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (int64_t i = 0; i < n; ++i) fn(m, d);
  clock_gettime(CLOCK_MONOTONIC, &end);
  double ns = (double)(end.tv_sec - start.tv_sec) * 1e9 + (double)(end.tv_nsec - start.tv_nsec);
  return ns / (double)n;
}
