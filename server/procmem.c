/* Device memory per process from NVML (procmem.h). A node runs a few
 * hundred CUDA processes at most: a sorted array, merged GPU by GPU. */
#include "procmem.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_bytes.h"

/* Room for this many processes on one GPU at first; more when NVML says
 * its list is longer, at most GMT_PROCMEM_MAX_PROCS. */
#define FIRST_CAP 64u
#define GMT_PROCMEM_MAX_PROCS 65536u

/* Where pid is, or would go, in the array sorted by pid. */
static size_t place_of(const gmt_procmem_t *pm, uint32_t pid)
{
  size_t lo = 0, hi = pm->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (pm->e[mid].pid < pid)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* The entry of pid, made (at its place in pid order) when missing. */
static gmt_procmem_entry_t *entry_get(gmt_procmem_t *pm, uint32_t pid)
{
  size_t lo = place_of(pm, pid);
  if (lo < pm->n && pm->e[lo].pid == pid)
    return &pm->e[lo];
  if (pm->n == pm->cap) {
    size_t cap = pm->cap ? 2 * pm->cap : FIRST_CAP;
    gmt_procmem_entry_t *e = realloc(pm->e, cap * sizeof *e);
    if (!e)
      return NULL;
    pm->e = e;
    pm->cap = cap;
  }
  memmove(&pm->e[lo + 1], &pm->e[lo], (pm->n - lo) * sizeof *pm->e);
  pm->n++;
  pm->e[lo] = (gmt_procmem_entry_t){.pid = pid};
  return &pm->e[lo];
}

/* One GPU's list into pm->buf; its length, or -1 when it cannot be read. */
static int read_gpu(gmt_procmem_t *pm, const gmt_nvml_t *nvml, gmt_nvml_device_t gpu)
{
  /* The list may grow between the call that says its length and the one
   * that reads it: a few tries. */
  for (int tries = 0; tries < 4; tries++) {
    unsigned count = pm->buf_cap;
    int rc = nvml->DeviceGetComputeRunningProcesses_v3(gpu, &count, pm->buf);
    if (rc == GMT_NVML_SUCCESS)
      return count <= pm->buf_cap ? (int)count : -1;
    if (rc != NVML_ERROR_INSUFFICIENT_SIZE || count > GMT_PROCMEM_MAX_PROCS)
      return -1;
    unsigned cap = count + count / 4 + 8;
    gmt_nvml_process_info_t *b = realloc(pm->buf, cap * sizeof *b);
    if (!b)
      return -1;
    pm->buf = b;
    pm->buf_cap = cap;
  }
  return -1;
}

int gmt_procmem_sample(gmt_procmem_t *pm, const gmt_nvml_t *nvml, const gmt_nvml_device_t *gpus,
                       int ngpus, uint64_t now_ms)
{
  if (!nvml || !nvml->DeviceGetComputeRunningProcesses_v3)
    return -ENOSYS;
  if (pm->read && now_ms - pm->read_ms < GMT_PROCMEM_EVERY_MS)
    return 0;
  if (!pm->buf) {
    if (!(pm->buf = calloc(FIRST_CAP, sizeof *pm->buf)))
      return -ENOMEM;
    pm->buf_cap = FIRST_CAP;
  }
  pm->n = 0;
  pm->read = true;
  pm->read_ms = now_ms;
  for (int g = 0; g < ngpus; g++) {
    if (!gpus[g])
      continue;
    int n = read_gpu(pm, nvml, gpus[g]);
    for (int i = 0; i < n; i++) {
      const gmt_nvml_process_info_t *p = &pm->buf[i];
      gmt_procmem_entry_t *e = entry_get(pm, p->pid);
      if (!e) {
        pm->read = false; /* not a reading to keep */
        pm->n = 0;
        return -ENOMEM;
      }
      if (p->usedGpuMemory == (unsigned long long)NVML_VALUE_NOT_AVAILABLE)
        e->unknown = true;
      else
        e->used = gmt_bytes_add(e->used, p->usedGpuMemory);
    }
  }
  return 1;
}

bool gmt_procmem_used(const gmt_procmem_t *pm, uint32_t pid, uint64_t *used)
{
  size_t lo = place_of(pm, pid);
  if (lo == pm->n || pm->e[lo].pid != pid || pm->e[lo].unknown)
    return false;
  *used = pm->e[lo].used;
  return true;
}

void gmt_procmem_close(gmt_procmem_t *pm)
{
  free(pm->e);
  free(pm->buf);
  memset(pm, 0, sizeof *pm);
}
