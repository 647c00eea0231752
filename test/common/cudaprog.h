/* What the driver-API test and benchmark programs share: a CHECK that
 * names the failed call and its CUresult and exits, a monotonic clock,
 * and the "spin" kernel as real PTX (it spins on %globaltimer for its
 * first parameter in microseconds; the fake driver runs "spin" by name). */
#ifndef GMT_TEST_CUDAPROG_H
#define GMT_TEST_CUDAPROG_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cuda.h>

#define GMT_CU_CHECK(prog, call)                                                                   \
  do {                                                                                             \
    CUresult rc_ = (call);                                                                         \
    if (rc_ != CUDA_SUCCESS) {                                                                     \
      const char *name_ = NULL;                                                                    \
      cuGetErrorName(rc_, &name_);                                                                 \
      fprintf(stderr, "%s: %s failed: %s (%d)\n", prog, #call, name_ ? name_ : "?", (int)rc_);     \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

/* For a program that a test drives line by line: a failed call prints
 * "FAIL what=... rc=..." on stdout, where the test reads it, and gives 0. */
static inline int gmt_prog_ok(CUresult r, const char *what)
{
  if (r == CUDA_SUCCESS)
    return 1;
  printf("FAIL what=%s rc=%d\n", what, (int)r);
  fflush(stdout);
  return 0;
}

/* Waits for the test's next line; exits when it closes stdin. */
static inline void gmt_prog_wait_line(void)
{
  char buf[64];
  if (!fgets(buf, sizeof buf, stdin))
    exit(0);
}

static inline double gmt_prog_now_s(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char gmt_spin_ptx[] = ".version 7.0\n"
                                   ".target sm_75\n"
                                   ".address_size 64\n"
                                   ".visible .entry spin(.param .u32 us)\n"
                                   "{\n"
                                   "  .reg .pred %p;\n"
                                   "  .reg .b32 %r;\n"
                                   "  .reg .b64 %d<6>;\n"
                                   "  ld.param.u32 %r, [us];\n"
                                   "  cvt.u64.u32 %d1, %r;\n"
                                   "  mul.lo.u64 %d2, %d1, 1000;\n"
                                   "  mov.u64 %d3, %globaltimer;\n"
                                   "LOOP:\n"
                                   "  mov.u64 %d4, %globaltimer;\n"
                                   "  sub.u64 %d5, %d4, %d3;\n"
                                   "  setp.lt.u64 %p, %d5, %d2;\n"
                                   "  @%p bra LOOP;\n"
                                   "  ret;\n"
                                   "}\n";

#endif
