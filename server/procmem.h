/* Device memory each process uses as NVML counts it, summed over the
 * node's GPUs: what a card really gives a process, its CUDA context(s)
 * and the driver's own buffers included, which no allocation call shows.
 * gmt-schd reads it for Status and reports, beside what each process
 * allocated through gmt, the rest as its context memory (docs/devices.md,
 * "Context memory"); nothing is charged from it.
 *
 * NVML names processes by the pids of its own (the host's) PID namespace.
 *
 * Pure of the loop and of the daemon: the caller passes NVML's table, the
 * GPUs' handles and the time. Unit tested with a stub table
 * (test/unit/test_procmem.c). */
#ifndef GMT_SERVER_PROCMEM_H
#define GMT_SERVER_PROCMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmt_nvml.h"

/* A reading younger than this is used again: every GPU's process list is
 * a driver call, and `gmt status` in a loop must not make it many times. */
#define GMT_PROCMEM_EVERY_MS 500

typedef struct gmt_procmem_entry {
  uint32_t pid;
  bool unknown;  /* NVML listed it without a number on some GPU */
  uint64_t used; /* bytes, over every GPU that listed it */
} gmt_procmem_entry_t;

typedef struct gmt_procmem {
  bool read;        /* a reading was made */
  uint64_t read_ms; /* when */
  size_t n, cap;
  gmt_procmem_entry_t *e;       /* sorted by pid */
  gmt_nvml_process_info_t *buf; /* one GPU's list, reused */
  unsigned buf_cap;
} gmt_procmem_t;

/* Reads every GPU's compute processes (nvmlDeviceGetComputeRunningProcesses_v3)
 * unless the last reading is younger than GMT_PROCMEM_EVERY_MS. Returns 1
 * when it read, 0 when it kept the last reading, -ENOSYS when the table
 * has no such function (older drivers), -ENOMEM. A GPU whose list cannot
 * be read is left out of the reading. */
int gmt_procmem_sample(gmt_procmem_t *pm, const gmt_nvml_t *nvml, const gmt_nvml_device_t *gpus,
                       int ngpus, uint64_t now_ms);

/* What NVML counted for pid on every GPU; false when the last reading did
 * not list it, or listed it without a number. */
bool gmt_procmem_used(const gmt_procmem_t *pm, uint32_t pid, uint64_t *used);

/* A process's context memory: NVML's count less what gmt holds charged
 * for it on the GPU, never below 0 (a charge NVML does not see yet). */
static inline uint64_t gmt_procmem_context(uint64_t nvml_used, uint64_t charged)
{
  return nvml_used > charged ? nvml_used - charged : 0;
}

void gmt_procmem_close(gmt_procmem_t *pm);

#endif
