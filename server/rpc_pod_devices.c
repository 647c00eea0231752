/* A pod's part of Status per GPU, and its processes' context memory
 * (docs/devices.md, "Per-device view" and "Context memory").
 *
 * Per GPU: what the pod's processes hold there in the ledger, whether it
 * holds that GPU's token and its share of that GPU's time over the
 * window. A GPU is listed when the pod's devices= names it or the pod
 * holds memory, the token or time there.
 *
 * Context memory: NVML's count for each process (procmem.c, read at most
 * every GMT_PROCMEM_EVERY_MS) less what gmt holds charged for it on the
 * GPU. Shown, never charged: a quota that counted it would depend on the
 * driver's version and on how many processes a job runs, and the hook's
 * cuMemGetInfo answers from the quota alone. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devices.h"
#include "gmt_error.h"
#include "gmt_log.h"
#include "gmt_procstat.h"
#include "ledger.h"
#include "procmem.h"
#include "schd.h"

/* Devices the token state may name (rpc_token.c takes 0..255). */
#define MAX_TOKEN_DEVS 256

typedef struct {
  int device;
  bool holds;
  double share;
} tok_t;

typedef struct {
  tok_t t[MAX_TOKEN_DEVS];
  size_t n;
} toks_t;

static void on_token_dev(void *arg, int device, bool holds, double share)
{
  toks_t *k = arg;
  if (k->n < MAX_TOKEN_DEVS)
    k->t[k->n++] = (tok_t){device, holds, share};
}

static const tok_t *tok_of(const toks_t *k, int device)
{
  for (size_t i = 0; i < k->n; i++)
    if (k->t[i].device == device)
      return &k->t[i];
  return NULL;
}

/* The pod's GPUs to list, ascending, into out (room for every index up to
 * GMT_CONFIG_DEVICE_MAX); how many. */
static size_t pod_gpus(gmt_schd_t *s, const gmt_pod_t *pod, const toks_t *k, int *out)
{
  bool want[GMT_CONFIG_DEVICE_MAX + 1] = {false};
  for (size_t i = 0; i < pod->cfg.ndevices; i++)
    want[pod->cfg.devices[i]] = true;
  for (int d = 0; s->ledger && d < GMT_LEDGER_DEVICES; d++)
    if (gmt_ledger_pod_device_total(s->ledger, pod->cfg.name, d) > 0)
      want[d] = true;
  for (size_t i = 0; i < k->n; i++)
    if (k->t[i].device >= 0 && k->t[i].device <= GMT_CONFIG_DEVICE_MAX &&
        (k->t[i].holds || k->t[i].share > 0))
      want[k->t[i].device] = true;
  size_t n = 0;
  for (int d = 0; d <= GMT_CONFIG_DEVICE_MAX; d++)
    if (want[d])
      out[n++] = d;
  return n;
}

static int fill_devices(gmt_schd_t *s, const gmt_pod_t *pod, Gmt__PodStatus *ps)
{
  toks_t k = {.n = 0};
  int gpus[GMT_CONFIG_DEVICE_MAX + 1];
  gmt__tokens_pod_devices(s, pod->cfg.name, on_token_dev, &k);
  size_t n = pod_gpus(s, pod, &k, gpus);
  if (n == 0)
    return 0;
  /* One allocation: the pointers, then what they point at. */
  Gmt__PodDeviceStatus **pp =
      malloc(n * (sizeof(Gmt__PodDeviceStatus *) + sizeof(Gmt__PodDeviceStatus)));
  if (!pp)
    return -ENOMEM;
  Gmt__PodDeviceStatus *e = (Gmt__PodDeviceStatus *)(pp + n);
  for (size_t i = 0; i < n; i++) {
    gmt__pod_device_status__init(&e[i]);
    e[i].device = gpus[i];
    e[i].memory_used =
        s->ledger ? gmt_ledger_pod_device_total(s->ledger, pod->cfg.name, gpus[i]) : 0;
    const tok_t *t = tok_of(&k, gpus[i]);
    e[i].holds_token = t && t->holds;
    e[i].gpu_time_share = t ? t->share : 0;
    gmt__turns_pod_status(s, pod->cfg.name, &e[i]);
    pp[i] = &e[i];
  }
  ps->devices = pp;
  ps->n_devices = n;
  return 0;
}

/* NVML's per-process numbers, read again when the last reading is old. */
static const gmt_procmem_t *procmem(gmt_schd_t *s)
{
  const gmt_devices_t *d = s->devices;
  if (!d || !d->have_nvml || !d->topo || !d->nvml.DeviceGetComputeRunningProcesses_v3)
    return NULL;
  if (!s->procmem && !(s->procmem = calloc(1, sizeof *s->procmem)))
    return NULL;
  uint64_t now = uv_now(s->loop);
  if (s->procmem->read && now - s->procmem->read_ms < GMT_PROCMEM_EVERY_MS)
    return s->procmem; /* every pod of one Status, and Status in a loop */
  gmt_nvml_device_t gpus[64];
  int n = d->topo->n_gpus < 64 ? d->topo->n_gpus : 64;
  for (int i = 0; i < n; i++)
    gpus[i] = gmt_devices_nvml_handle(d, d->topo->gpus[i].index);
  int rc = gmt_procmem_sample(s->procmem, &d->nvml, gpus, n, now);
  if (rc < 0) {
    gmt_debug("context memory: cannot read NVML's processes: %s", gmt_strerror(rc));
    return NULL;
  }
  return s->procmem;
}

/* Each process's context bytes: what NVML counts for its pid less what the
 * ledger holds for it on the GPU (a swap process's bytes in host memory
 * or spill files are charged but not on the card). 0: not known. */
static void fill_context(gmt_schd_t *s, const gmt_pod_t *pod, Gmt__PodStatus *ps)
{
  const gmt_procmem_t *pm = procmem(s);
  if (!pm)
    return;
  for (size_t i = 0; i < ps->n_processes && i < pod->nprocs; i++) {
    Gmt__ProcessStatus *pr = ps->processes[i];
    const gmt_proc_t *src = &pod->procs[i];
    uint64_t used;
    uint32_t node = gmt_proc_node_pid(src); /* NVML's pids are the node's */
    if (src->pid != pr->pid || !node || !gmt_procmem_used(pm, node, &used))
      continue;
    uint64_t off = gmt_bytes_add(src->c.swap_host, src->c.swap_disk);
    uint64_t reserved = pr->counters->memory_reserved; /* the ledger's, by now */
    uint64_t charged = reserved > off ? reserved - off : 0;
    pr->context_bytes = gmt_procmem_context(used, charged);
    ps->context_bytes = gmt_bytes_add(ps->context_bytes, pr->context_bytes);
  }
}

int gmt__pod_devices_status(gmt_schd_t *s, const gmt_pod_t *pod, Gmt__PodStatus *ps)
{
  fill_context(s, pod, ps);
  return fill_devices(s, pod, ps);
}

void gmt__pod_devices_free(Gmt__PodStatus *ps)
{
  free(ps->devices);
  ps->devices = NULL;
  ps->n_devices = 0;
}

void gmt__pod_devices_close(gmt_schd_t *s)
{
  if (s->procmem) {
    gmt_procmem_close(s->procmem);
    free(s->procmem);
    s->procmem = NULL;
  }
}

/* ---- processes outside gmt ---- */

static bool is_pods_process(const gmt_schd_t *s, uint32_t pid)
{
  for (size_t i = 0; i < s->pods->npods; i++) {
    const gmt_pod_t *pod = &s->pods->pods[i];
    for (size_t j = 0; j < pod->nprocs; j++)
      if (gmt_proc_node_pid(&pod->procs[j]) == pid)
        return true;
  }
  return false;
}

/* pid's parent (field 4 of /proc/PID/stat); 0 when it cannot be read. */
static pid_t parent_of(uint32_t pid)
{
  char buf[512];
  const char *f = gmt_procstat_fields(pid, buf, sizeof buf);
  int ppid = 0;
  char state;
  if (!f || sscanf(f, "%c %d", &state, &ppid) != 2)
    return 0;
  return (pid_t)ppid;
}

/* What pid runs: its exe, else its comm (another user's exe is not
 * readable to a gmt-schd that is not root), else empty. */
static void exe_of(uint32_t pid, char *buf, size_t len)
{
  char path[64];
  snprintf(path, sizeof path, "/proc/%u/exe", pid);
  ssize_t n = readlink(path, buf, len - 1);
  if (n > 0) {
    buf[n] = 0;
    return;
  }
  buf[0] = 0;
  snprintf(path, sizeof path, "/proc/%u/comm", pid);
  FILE *f = fopen(path, "re");
  if (!f)
    return;
  if (fgets(buf, (int)len, f))
    buf[strcspn(buf, "\n")] = 0;
  fclose(f);
}

#define UNMANAGED_EXE_MAX 256

int gmt__unmanaged_status(gmt_schd_t *s, Gmt__StatusReply *st, void **mem)
{
  *mem = NULL;
  st->n_unmanaged = 0;
  st->unmanaged = NULL;
  const gmt_procmem_t *pm = procmem(s);
  if (!pm || pm->n == 0)
    return 0;
  /* One allocation, for at most every process listed: the pointers, then
   * the entries with their exe. */
  struct un {
    Gmt__UnmanagedProcess m;
    char exe[UNMANAGED_EXE_MAX];
  };
  Gmt__UnmanagedProcess **ptrs = malloc(pm->n * (sizeof *ptrs + sizeof(struct un)));
  if (!ptrs)
    return -ENOMEM;
  struct un *items = (struct un *)(ptrs + pm->n);
  size_t k = 0;
  pid_t self = getpid();
  for (size_t i = 0; i < pm->n; i++) {
    const gmt_procmem_entry_t *e = &pm->e[i];
    if (!e->pid || (pid_t)e->pid == self || is_pods_process(s, e->pid) || parent_of(e->pid) == self)
      continue;
    struct un *u = &items[k];
    gmt__unmanaged_process__init(&u->m);
    u->m.pid = e->pid;
    u->m.memory_used = e->unknown ? 0 : e->used;
    exe_of(e->pid, u->exe, sizeof u->exe);
    u->m.exe = u->exe;
    ptrs[k++] = &u->m;
  }
  if (k == 0) {
    free(ptrs);
    return 0;
  }
  st->n_unmanaged = k;
  st->unmanaged = ptrs;
  *mem = ptrs;
  return 0;
}
