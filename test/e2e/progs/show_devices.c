/* show_devices: what a program is shown of the GPUs, for test_run.py.
 *
 *   show_devices [--hold BYTES] [--wait] [--exit CODE]
 *
 * Prints
 *   ENV cvd=<CUDA_VISIBLE_DEVICES, or "-" when unset> pid=<its pid>
 *   DEVICES n=N uuid0=GPU-... bus0=0000:01:00.0 uuid1=... bus1=...
 * after cuInit (each by CUDA ordinal). --hold allocates BYTES on device 0
 * (printing HELD bytes=B) and keeps them until a line comes on stdin;
 * --wait waits for a line before exiting. Exits with CODE (default 0).
 * A failed call prints FAIL what=... rc=... and exits 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>

#include "../../common/cudaprog.h"

int main(int argc, char **argv)
{
  unsigned long long hold = 0;
  int wait = 0, code = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--hold") && i + 1 < argc) {
      hold = strtoull(argv[++i], NULL, 10);
    } else if (!strcmp(argv[i], "--exit") && i + 1 < argc) {
      code = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--wait")) {
      wait = 1;
    } else {
      fprintf(stderr, "usage: show_devices [--hold BYTES] [--wait] [--exit CODE]\n");
      return 2;
    }
  }
  const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
  printf("ENV cvd=%s pid=%d\n", cvd ? (*cvd ? cvd : "(empty)") : "-", (int)getpid());
  fflush(stdout);

  int n = 0;
  if (!gmt_prog_ok(cuInit(0), "cuInit") || !gmt_prog_ok(cuDeviceGetCount(&n), "count"))
    return 1;
  printf("DEVICES n=%d", n);
  for (int i = 0; i < n; i++) {
    CUdevice dev;
    CUuuid u;
    char bus[32];
    if (!gmt_prog_ok(cuDeviceGet(&dev, i), "cuDeviceGet") ||
        !gmt_prog_ok(cuDeviceGetUuid(&u, dev), "uuid") ||
        !gmt_prog_ok(cuDeviceGetPCIBusId(bus, (int)sizeof bus, dev), "bus"))
      return 1;
    const unsigned char *b = (const unsigned char *)u.bytes;
    printf(
        " uuid%d=GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x bus%d=%s",
        i, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
        b[14], b[15], i, bus);
  }
  printf("\n");
  fflush(stdout);

  if (hold) {
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr p;
    if (!gmt_prog_ok(cuDeviceGet(&dev, 0), "cuDeviceGet") ||
        !gmt_prog_ok(cuDevicePrimaryCtxRetain(&ctx, dev), "retain") ||
        !gmt_prog_ok(cuCtxSetCurrent(ctx), "current") ||
        !gmt_prog_ok(cuMemAlloc(&p, (size_t)hold), "cuMemAlloc"))
      return 1;
    printf("HELD bytes=%llu\n", hold);
    fflush(stdout);
    gmt_prog_wait_line();
    cuMemFree(p);
  }
  if (wait)
    gmt_prog_wait_line();
  return code;
}
