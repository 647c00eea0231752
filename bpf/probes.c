/* ProbeManager: open / configure / load / attach / poll / destroy of the
 * cudatrace skeleton (bpf/cudatrace.bpf.c). This file owns which driver
 * entry points (and which function of gmt's hook) are probed and how each
 * one's arguments are read (the cookie tables below); the BPF side only
 * follows the cookie. */
#include "probes.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cudatrace.skel.h"
#include "gmt_log.h"
#include "procmaps.h"
#include "prologue.h"
#include "symbols.h"

/* The driver entry points, and the cookie that tells the BPF side how to
 * read each one's arguments. Only the forms a current runtime calls: the
 * _v2 names (the unversioned ones take 32-bit sizes and pointers and are
 * only reached by binaries built before CUDA 3.2), and the per-thread
 * default stream forms (_ptds, _ptsz) that cuGetProcAddress hands out with
 * flag 2. GMT_TCOOKIE_ENTRY_ONLY (copies, prefetches): no return probe is
 * attached, the entry probe sends the event (rc 0, dur_ns 0). */
#define EO GMT_TCOOKIE_ENTRY_ONLY
static const struct entry_point {
  const char *name;
  uint32_t cookie;
} entry_points[] = {
    {"cuMemAlloc_v2", GMT_TFN_MEM_ALLOC},
    {"cuMemAllocPitch_v2", GMT_TFN_MEM_ALLOC_PITCH},
    {"cuMemAllocManaged", GMT_TFN_MEM_ALLOC_MANAGED},
    {"cuMemAllocAsync", GMT_TFN_MEM_ALLOC_ASYNC | GMT_TCOOKIE_ASYNC},
    {"cuMemAllocAsync_ptsz", GMT_TFN_MEM_ALLOC_ASYNC | GMT_TCOOKIE_ASYNC},
    {"cuMemAllocFromPoolAsync", GMT_TFN_MEM_ALLOC_POOL_ASYNC | GMT_TCOOKIE_ASYNC},
    {"cuMemAllocFromPoolAsync_ptsz", GMT_TFN_MEM_ALLOC_POOL_ASYNC | GMT_TCOOKIE_ASYNC},
    {"cuMemFree_v2", GMT_TFN_MEM_FREE},
    {"cuMemMap", GMT_TFN_MEM_MAP},
    {"cuMemUnmap", GMT_TFN_MEM_UNMAP},
    {"cuMemFreeAsync", GMT_TFN_MEM_FREE_ASYNC | GMT_TCOOKIE_ASYNC},
    {"cuMemFreeAsync_ptsz", GMT_TFN_MEM_FREE_ASYNC | GMT_TCOOKIE_ASYNC},
    {"cuMemAllocHost_v2", GMT_TFN_HOST_ALLOC},
    {"cuMemHostAlloc", GMT_TFN_HOST_ALLOC_FLAGS},
    {"cuMemFreeHost", GMT_TFN_HOST_FREE},
    {"cuMemHostRegister_v2", GMT_TFN_HOST_REGISTER},
    {"cuMemHostUnregister", GMT_TFN_HOST_UNREGISTER},
    {"cuMemcpyHtoD_v2", GMT_TFN_MEMCPY_HTOD | EO},
    {"cuMemcpyHtoD_v2_ptds", GMT_TFN_MEMCPY_HTOD | EO},
    {"cuMemcpyHtoDAsync_v2", GMT_TFN_MEMCPY_HTOD | GMT_TCOOKIE_ASYNC | EO},
    {"cuMemcpyHtoDAsync_v2_ptsz", GMT_TFN_MEMCPY_HTOD | GMT_TCOOKIE_ASYNC | EO},
    {"cuMemcpyDtoH_v2", GMT_TFN_MEMCPY_DTOH | EO},
    {"cuMemcpyDtoH_v2_ptds", GMT_TFN_MEMCPY_DTOH | EO},
    {"cuMemcpyDtoHAsync_v2", GMT_TFN_MEMCPY_DTOH | GMT_TCOOKIE_ASYNC | EO},
    {"cuMemcpyDtoHAsync_v2_ptsz", GMT_TFN_MEMCPY_DTOH | GMT_TCOOKIE_ASYNC | EO},
    {"cuMemcpy", GMT_TFN_MEMCPY | EO},
    {"cuMemcpy_ptds", GMT_TFN_MEMCPY | EO},
    {"cuMemcpyAsync", GMT_TFN_MEMCPY | GMT_TCOOKIE_ASYNC | EO},
    {"cuMemcpyAsync_ptsz", GMT_TFN_MEMCPY | GMT_TCOOKIE_ASYNC | EO},
    {"cuMemPrefetchAsync", GMT_TFN_PREFETCH | GMT_TCOOKIE_ASYNC | EO},
    {"cuMemPrefetchAsync_ptsz", GMT_TFN_PREFETCH | GMT_TCOOKIE_ASYNC | EO},
    {"cuMemPrefetchAsync_v2", GMT_TFN_PREFETCH_V2 | GMT_TCOOKIE_ASYNC | EO},
    {"cuMemPrefetchAsync_v2_ptsz", GMT_TFN_PREFETCH_V2 | GMT_TCOOKIE_ASYNC | EO},
    {"cuMemcpy2D_v2", GMT_TFN_MEMCPY_2D | EO},
    {"cuMemcpy2D_v2_ptds", GMT_TFN_MEMCPY_2D | EO},
    {"cuMemcpy2DUnaligned_v2", GMT_TFN_MEMCPY_2D | EO},
    {"cuMemcpy2DUnaligned_v2_ptds", GMT_TFN_MEMCPY_2D | EO},
    {"cuMemcpy2DAsync_v2", GMT_TFN_MEMCPY_2D | GMT_TCOOKIE_ASYNC | EO},
    {"cuMemcpy2DAsync_v2_ptsz", GMT_TFN_MEMCPY_2D | GMT_TCOOKIE_ASYNC | EO},
    {"cuMemcpy3D_v2", GMT_TFN_MEMCPY_3D | EO},
    {"cuMemcpy3D_v2_ptds", GMT_TFN_MEMCPY_3D | EO},
    {"cuMemcpy3DAsync_v2", GMT_TFN_MEMCPY_3D | GMT_TCOOKIE_ASYNC | EO},
    {"cuMemcpy3DAsync_v2_ptsz", GMT_TFN_MEMCPY_3D | GMT_TCOOKIE_ASYNC | EO},
};
/* gmt's own markers in libgmthook.so: exported no-ops that the hook
 * calls right after each registration and unregistration it makes
 * (hook/pin/pin.c), so that the trace tells gmt's pins from the program's
 * own, and after each allocation it moved off the GPU or back
 * (hook/swap/swap.c), with the bytes and how long the move took. */
static const struct entry_point hook_points[] = {
    {"gmt_trace_pinned", GMT_TFN_GMT_PINNED | EO},
    {"gmt_trace_moved", GMT_TFN_GMT_MOVED | EO},
};
#undef EO
#define N_ENTRY_POINTS (sizeof entry_points / sizeof entry_points[0])
#define N_HOOK_POINTS (sizeof hook_points / sizeof hook_points[0])
_Static_assert(N_HOOK_POINTS <= N_ENTRY_POINTS, "attach_file's arrays hold either table");

struct gmt_probes {
  struct cudatrace_bpf *skel;
  struct ring_buffer *rb;
  struct bpf_link **links;
  size_t nlinks, caplinks;
  struct stat *files; /* libcudas and hooks already probed (one file, many paths) */
  size_t nfiles;
  bool uprobe_multi; /* one link for all entry points (see attach_multi) */
  int *multi_fds;
  size_t nmulti;
  gmt_probes_opts_t opts;
  gmt_probes_info_t info;
  int stats_fd; /* keeps the kernel's BPF run statistics on; -1: off */
};

static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
  if (level == LIBBPF_DEBUG || gmt_log_level() < GMT_LOG_DEBUG)
    return 0;
  char buf[1024];
  vsnprintf(buf, sizeof buf, fmt, ap);
  buf[strcspn(buf, "\n")] = 0;
  gmt_debug("%s", buf); /* libbpf says "libbpf: " itself */
  return 0;
}

static int errf(char *err, size_t len, int rc, const char *fmt, ...)
{
  if (err && len) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err, len, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < len)
      snprintf(err + n, len - (size_t)n, ": %s", strerror(-rc));
  }
  return rc;
}

static void note(char *buf, size_t len, const char *what)
{
  size_t n = strlen(buf);
  snprintf(buf + n, len - n, "%s%s", n ? ", " : "", what);
}

static int add_link(gmt_probes_t *pm, struct bpf_link *l)
{
  if (pm->nlinks == pm->caplinks) {
    size_t ncap = pm->caplinks ? pm->caplinks * 2 : 32;
    struct bpf_link **n = realloc(pm->links, ncap * sizeof *n);
    if (!n) {
      bpf_link__destroy(l);
      return -ENOMEM;
    }
    pm->links = n;
    pm->caplinks = ncap;
  }
  pm->links[pm->nlinks++] = l;
  return 0;
}

static int on_event(void *ctx, void *data, size_t size)
{
  gmt_probes_t *pm = ctx;
  if (size < sizeof(struct gmt_trace_event))
    return 0;
  if (pm->opts.cb)
    pm->opts.cb(pm->opts.arg, data);
  return 0;
}

/* From linux/bpf.h of Linux 6.6, newer than the headers we build with. */
#define GMT_BPF_TRACE_UPROBE_MULTI 48
#define GMT_BPF_F_UPROBE_MULTI_RETURN 1u

struct link_create_uprobe_multi { /* union bpf_attr's link_create */
  uint32_t prog_fd, target_fd, attach_type, flags;
  uint64_t path, offsets, ref_ctr_offsets, cookies;
  uint32_t cnt, multi_flags, pid, pad;
};

static int attach_multi(gmt_probes_t *pm, struct bpf_program *prog, const char *path,
                        const uint64_t *offs, const uint64_t *cookies, uint32_t n, bool ret,
                        pid_t pid)
{
  struct link_create_uprobe_multi a;
  memset(&a, 0, sizeof a);
  a.prog_fd = (uint32_t)bpf_program__fd(prog);
  a.attach_type = GMT_BPF_TRACE_UPROBE_MULTI;
  a.path = (uintptr_t)path;
  a.offsets = (uintptr_t)offs;
  a.cookies = (uintptr_t)cookies;
  a.cnt = n;
  a.multi_flags = ret ? GMT_BPF_F_UPROBE_MULTI_RETURN : 0;
  a.pid = pid > 0 ? (uint32_t)pid : 0;
  int fd = (int)syscall(__NR_bpf, BPF_LINK_CREATE, &a, sizeof a);
  if (fd < 0)
    return -errno;
  int *nf = realloc(pm->multi_fds, (pm->nmulti + 1) * sizeof *nf);
  if (!nf) {
    close(fd);
    return -ENOMEM;
  }
  pm->multi_fds = nf;
  pm->multi_fds[pm->nmulti++] = fd;
  return 0;
}

/* A tp_btf program whose tracepoint this kernel lacks would fail the load
 * of the whole object: it is switched off before, and said so. */
static void drop_missing_tracepoints(gmt_probes_t *pm)
{
  struct btf *vmlinux = btf__load_vmlinux_btf();
  struct {
    struct bpf_program *prog;
    const char *tp;
  } optional[] = {
      {pm->skel->progs.page_fault_user, "page_fault_user"},
      {pm->skel->progs.reclaim_begin, "mm_vmscan_direct_reclaim_begin"},
      {pm->skel->progs.reclaim_end, "mm_vmscan_direct_reclaim_end"},
      {pm->skel->progs.compact_begin, "mm_compaction_begin"},
      {pm->skel->progs.compact_end, "mm_compaction_end"},
      {pm->skel->progs.filemap_fault, "mm_filemap_fault"},
  };
  for (size_t i = 0; i < sizeof optional / sizeof optional[0]; i++) {
    char name[96];
    snprintf(name, sizeof name, "btf_trace_%s", optional[i].tp);
    if (vmlinux && btf__find_by_name_kind(vmlinux, name, BTF_KIND_TYPEDEF) >= 0)
      continue;
    bpf_program__set_autoload(optional[i].prog, false);
    char what[128];
    snprintf(what, sizeof what, "%s (not in this kernel)", optional[i].tp);
    note(pm->info.kernel_skipped, sizeof pm->info.kernel_skipped, what);
  }
  /* uprobe_multi links (Linux 6.6) attach every entry point at once and,
   * above all, detach at once: one perf-event uprobe costs a ~100 ms grace
   * period to detach, taken one after another under a kernel mutex (60
   * uprobes: 6 s at exit). Our libbpf (1.1) predates them, so the programs
   * are told their attach type here and the link is made by hand. */
  pm->uprobe_multi = vmlinux && !getenv("GMT_TRACE_NO_UPROBE_MULTI") &&
                     btf__find_by_name_kind(vmlinux, "bpf_uprobe_multi_link", BTF_KIND_STRUCT) >= 0;
  if (pm->uprobe_multi) {
    bpf_program__set_expected_attach_type(pm->skel->progs.cuda_enter, GMT_BPF_TRACE_UPROBE_MULTI);
    bpf_program__set_expected_attach_type(pm->skel->progs.cuda_exit, GMT_BPF_TRACE_UPROBE_MULTI);
  }
  btf__free(vmlinux);
}

/* GMT_TRACE_SKIP=prog,prog: kernel-side programs left out, to see what
 * each costs (the uprobe programs cannot be: the driver's calls are the
 * trace). */
static void skip_asked(gmt_probes_t *pm)
{
  const char *skip = getenv("GMT_TRACE_SKIP");
  char *list = skip && *skip ? strdup(skip) : NULL, *save = NULL;
  for (char *name = list ? strtok_r(list, ",", &save) : NULL; name;
       name = strtok_r(NULL, ",", &save)) {
    struct bpf_program *prog = bpf_object__find_program_by_name(pm->skel->obj, name);
    if (!prog || prog == pm->skel->progs.cuda_enter || prog == pm->skel->progs.cuda_exit) {
      gmt_warn("trace: GMT_TRACE_SKIP: '%s' is not a kernel-side program", name);
      continue;
    }
    bpf_program__set_autoload(prog, false);
    char what[96];
    snprintf(what, sizeof what, "%s (GMT_TRACE_SKIP)", name);
    note(pm->info.kernel_skipped, sizeof pm->info.kernel_skipped, what);
  }
  free(list);
}

int gmt_probes_open(gmt_probes_t **out, const gmt_probes_opts_t *o, char *err, size_t errlen)
{
  int rc = 0;
  gmt_probes_t *pm = calloc(1, sizeof *pm);
  if (!pm)
    return errf(err, errlen, -ENOMEM, "tracer state");
  pm->opts = *o;
  pm->stats_fd = -1;
  libbpf_set_print(libbpf_log);

  pm->skel = cudatrace_bpf__open();
  if (!pm->skel) {
    rc = errf(err, errlen, -errno ? -errno : -EINVAL, "opening the BPF object cudatrace");
    goto cleanup;
  }
  pm->skel->rodata->targ_tgid = o->pid > 0 ? (uint32_t)o->pid : 0;
  pm->skel->rodata->follow_forks = o->follow_forks;
  pm->skel->rodata->min_mmap_bytes =
      o->min_mmap_bytes ? o->min_mmap_bytes : GMT_TRACE_MIN_MMAP_BYTES;
  pm->skel->rodata->fault_sample_ns =
      o->fault_sample_ns < 0 ? 1000000 : (uint64_t)o->fault_sample_ns;
  drop_missing_tracepoints(pm);
  skip_asked(pm);

  if (o->bpf_stats && (pm->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME)) < 0)
    gmt_warn("trace: the kernel keeps no BPF run statistics: %s", strerror(errno));
  rc = cudatrace_bpf__load(pm->skel);
  if (rc != 0) {
    errf(err, errlen, rc,
         rc == -EPERM || rc == -EACCES
             ? "loading the BPF programs (cudatrace)"
             : "loading the BPF programs (cudatrace; -v shows the verifier's log)");
    goto cleanup;
  }

  struct {
    struct bpf_program *prog;
    const char *what;
    bool required;
  } kprogs[] = {
      {pm->skel->progs.sched_fork, "tp_btf/sched_process_fork", true},
      {pm->skel->progs.sched_exit, "tp_btf/sched_process_exit", true},
      {pm->skel->progs.sys_enter, "tp_btf/sys_enter", true},
      {pm->skel->progs.sys_exit, "tp_btf/sys_exit", true},
      {pm->skel->progs.page_fault_user, "tp_btf/page_fault_user", false},
      {pm->skel->progs.reclaim_begin, "tp_btf/mm_vmscan_direct_reclaim_begin", false},
      {pm->skel->progs.reclaim_end, "tp_btf/mm_vmscan_direct_reclaim_end", false},
      {pm->skel->progs.compact_begin, "tp_btf/mm_compaction_begin", false},
      {pm->skel->progs.compact_end, "tp_btf/mm_compaction_end", false},
      {pm->skel->progs.filemap_fault, "tp_btf/mm_filemap_fault", false},
  };
  for (size_t i = 0; i < sizeof kprogs / sizeof kprogs[0]; i++) {
    if (!bpf_program__autoload(kprogs[i].prog))
      continue;
    struct bpf_link *l = bpf_program__attach(kprogs[i].prog);
    if (!l) {
      rc = -errno;
      if (kprogs[i].required) {
        errf(err, errlen, rc, "attaching %s", kprogs[i].what);
        goto cleanup;
      }
      note(pm->info.kernel_skipped, sizeof pm->info.kernel_skipped, kprogs[i].what);
      rc = 0;
      continue;
    }
    if ((rc = add_link(pm, l)) != 0)
      goto cleanup;
    pm->info.kernel_attached++;
  }
  /* Only the NVIDIA driver defines it; a machine without one has none. */
  struct bpf_link *xid =
      bpf_program__attach_raw_tracepoint(pm->skel->progs.nvidia_xid, "nvidia_dev_xid");
  if (xid) {
    if ((rc = add_link(pm, xid)) != 0)
      goto cleanup;
    pm->info.kernel_attached++;
  } else {
    note(pm->info.kernel_skipped, sizeof pm->info.kernel_skipped,
         "nvidia:nvidia_dev_xid (no NVIDIA driver loaded)");
  }

  pm->rb = ring_buffer__new(bpf_map__fd(pm->skel->maps.events), on_event, pm, NULL);
  if (!pm->rb) {
    rc = errf(err, errlen, -errno ? -errno : -ENOMEM, "opening the ring buffer 'events'");
    goto cleanup;
  }
  *out = pm;
  return 0;

cleanup:
  gmt_probes_free(pm);
  return rc;
}

/* Probes the entry points eps in the file at path, once per file whatever
 * path reaches it. driver: they are libcuda's, whose absent entry points
 * and slow prologues info reports; else they are the hook's markers, whose
 * absence (a hook from before them) is only noted in the debug log, and
 * which run too seldom for their prologues to matter. */
static int attach_file(gmt_probes_t *pm, const char *path, const struct entry_point *eps,
                       size_t neps, bool driver, char *err, size_t errlen)
{
  struct stat st;
  if (stat(path, &st) != 0)
    return errf(err, errlen, -errno, "attaching to %s", path);
  for (size_t i = 0; i < pm->nfiles; i++)
    if (pm->files[i].st_dev == st.st_dev && pm->files[i].st_ino == st.st_ino)
      return 0;

  gmt_elf_t *elf = NULL;
  int rc = gmt_elf_open(path, &elf);
  if (rc != 0)
    return errf(err, errlen, rc, "reading the symbols of %s", path);
  int fd = open(path, O_RDONLY | O_CLOEXEC); /* for the entry points' first bytes */
  if (fd < 0) {
    rc = errf(err, errlen, -errno, "reading %s", path);
    goto cleanup;
  }
  struct stat *nl = realloc(pm->files, (pm->nfiles + 1) * sizeof *nl);
  if (!nl) {
    rc = errf(err, errlen, -ENOMEM, "attaching to %s", path);
    goto cleanup;
  }
  pm->files = nl;
  pm->files[pm->nfiles++] = st;

  /* With forks followed the uprobes fire for every process that maps this
   * file and the BPF side keeps the traced ones: a pid-bound uprobe would
   * not fire in a child. */
  int slow_before = pm->info.slow;
  pid_t pid = pm->opts.follow_forks || pm->opts.pid <= 0 ? -1 : pm->opts.pid;
  uint64_t offs[N_ENTRY_POINTS], cookies[N_ENTRY_POINTS];
  uint64_t roffs[N_ENTRY_POINTS], rcookies[N_ENTRY_POINTS]; /* return probes */
  uint32_t n = 0, nret = 0;
  for (size_t i = 0; i < neps; i++) {
    const struct entry_point *ep = &eps[i];
    if (gmt_elf_func_offset(elf, ep->name, &offs[n]) != 0) {
      if (driver) {
        pm->info.missing++;
        note(pm->info.missing_names, sizeof pm->info.missing_names, ep->name);
      }
      gmt_debug("trace: %s has no %s, not probed", path, ep->name);
      continue;
    }
    uint8_t code[16];
    ssize_t got = pread(fd, code, sizeof code, (off_t)offs[n]);
    gmt_probe_site_t site = gmt_probe_site(code, got > 0 ? (size_t)got : 0);
    uint64_t off = offs[n] += site.skip;
    if (!site.fast && driver) {
      pm->info.slow++;
      note(pm->info.slow_names, sizeof pm->info.slow_names, ep->name);
    }
    bool entry_only = ep->cookie & GMT_TCOOKIE_ENTRY_ONLY;
    if (!entry_only) {
      roffs[nret] = off;
      rcookies[nret++] = ep->cookie;
    }
    cookies[n++] = ep->cookie;
    if (pm->uprobe_multi)
      continue;
    for (int ret = 0; ret <= (entry_only ? 0 : 1); ret++) {
      LIBBPF_OPTS(bpf_uprobe_opts, uo, .retprobe = ret, .bpf_cookie = ep->cookie);
      struct bpf_program *prog = ret ? pm->skel->progs.cuda_exit : pm->skel->progs.cuda_enter;
      struct bpf_link *l = bpf_program__attach_uprobe_opts(prog, pid, path, off, &uo);
      if (!l) {
        rc = errf(err, errlen, -errno, "attaching %s to %s in %s", ret ? "uretprobe" : "uprobe",
                  ep->name, path);
        goto cleanup;
      }
      if ((rc = add_link(pm, l)) != 0) {
        errf(err, errlen, rc, "attaching to %s in %s", ep->name, path);
        goto cleanup;
      }
    }
  }
  if (pm->uprobe_multi && n > 0) {
    for (int ret = 0; ret <= 1; ret++) {
      struct bpf_program *prog = ret ? pm->skel->progs.cuda_exit : pm->skel->progs.cuda_enter;
      uint32_t cnt = ret ? nret : n;
      if (cnt == 0)
        continue;
      if ((rc = attach_multi(pm, prog, path, ret ? roffs : offs, ret ? rcookies : cookies, cnt, ret,
                             pid)) != 0) {
        errf(err, errlen, rc, "attaching uprobe.multi%s (%u entry points) to %s",
             ret ? " return probes" : "", cnt, path);
        goto cleanup;
      }
    }
  }
  if (!driver) {
    pm->info.hooks += n > 0;
    if (n > 0)
      gmt_debug("trace: %s: %u of gmt's markers probed (its own pins, its moves)", path, n);
    goto cleanup;
  }
  pm->info.uprobes += (int)n;
  pm->info.retprobes += (int)nret;
  if (pm->info.slow > slow_before)
    gmt_warn("trace: %d entry points of %s begin with an instruction the kernel single-steps, "
             "so each call there costs about 10x a plain probe hit: %s",
             pm->info.slow - slow_before, path, pm->info.slow_names);
cleanup:
  if (fd >= 0)
    close(fd);
  gmt_elf_close(elf);
  return rc;
}

int gmt_probes_attach_libcuda(gmt_probes_t *pm, const char *path, char *err, size_t errlen)
{
  return attach_file(pm, path, entry_points, N_ENTRY_POINTS, true, err, errlen);
}

int gmt_probes_attach_hook(gmt_probes_t *pm, const char *path, char *err, size_t errlen)
{
  return attach_file(pm, path, hook_points, N_HOOK_POINTS, false, err, errlen);
}

int gmt_probes_add_pid(gmt_probes_t *pm, uint32_t pid)
{
  uint32_t parent = 0;
  if (bpf_map_update_elem(bpf_map__fd(pm->skel->maps.traced_tgids), &pid, &parent, BPF_ANY) != 0)
    return -errno;
  return 0;
}

int gmt_probes_remove_pid(gmt_probes_t *pm, uint32_t pid)
{
  if (bpf_map_delete_elem(bpf_map__fd(pm->skel->maps.traced_tgids), &pid) != 0)
    return -errno;
  return 0;
}

int gmt_probes_poll(gmt_probes_t *pm, int timeout_ms)
{
  int n = ring_buffer__poll(pm->rb, timeout_ms);
  if (n == -EINTR)
    n = 0;
  if (n < 0)
    return n;
  /* The BPF side wakes us only for a batch: read what waits anyway. */
  int more = ring_buffer__consume(pm->rb);
  return more < 0 ? more : n + more;
}

int gmt_probes_fd(gmt_probes_t *pm)
{
  return ring_buffer__epoll_fd(pm->rb);
}

/* Page-cache faults counted in BPF but not yet sent (all pids, or one). */
static void flush_pcfaults(gmt_probes_t *pm, uint32_t pid, bool forget)
{
  int fd = bpf_map__fd(pm->skel->maps.pc_faults);
  uint32_t key, next;
  void *prev = NULL;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    key = next;
    prev = &key;
    struct gmt_trace_pcfault_val v;
    if ((pid && key != pid) || bpf_map_lookup_elem(fd, &key, &v) != 0 || !v.pending)
      continue;
    struct gmt_trace_event ev = {.type = GMT_TEV_PCFAULT,
                                 .pid = key,
                                 .tid = key,
                                 .ts_ns = gmt_now_ns(),
                                 .addr = v.last_off,
                                 .size = v.pending};
    v.pending = 0; /* racing BPF increments in between are lost: counts only */
    bpf_map_update_elem(fd, &key, &v, BPF_EXIST);
    if (pm->opts.cb)
      pm->opts.cb(pm->opts.arg, &ev);
  }
  if (forget && pid)
    bpf_map_delete_elem(fd, &pid);
}

void gmt_probes_flush_faults(gmt_probes_t *pm, uint32_t pid, bool forget)
{
  int cfd = bpf_map__fd(pm->skel->maps.host_chunks);
  struct gmt_trace_chunk_key key, next, *dead = NULL;
  size_t ndead = 0, capdead = 0;
  void *prev = NULL;
  while (bpf_map_get_next_key(cfd, prev, &next) == 0) {
    key = next;
    prev = &key;
    if (pid && key.tgid != pid)
      continue;
    struct gmt_trace_chunk_val v;
    if (bpf_map_lookup_elem(cfd, &key, &v) != 0)
      continue;
    if (v.pending) {
      struct gmt_trace_event ev = {.type = GMT_TEV_FAULT,
                                   .pid = key.tgid,
                                   .tid = key.tgid,
                                   .ts_ns = gmt_now_ns(),
                                   .addr = v.last_addr,
                                   .size = v.pending};
      v.pending = 0;
      bpf_map_update_elem(cfd, &key, &v, BPF_EXIST);
      if (pm->opts.cb)
        pm->opts.cb(pm->opts.arg, &ev);
    }
    if (forget && pid) {
      if (ndead == capdead) {
        capdead = capdead ? capdead * 2 : 64;
        struct gmt_trace_chunk_key *nd = realloc(dead, capdead * sizeof *nd);
        if (!nd)
          break;
        dead = nd;
      }
      dead[ndead++] = key;
    }
  }
  for (size_t i = 0; i < ndead; i++)
    bpf_map_delete_elem(cfd, &dead[i]);
  free(dead);
  flush_pcfaults(pm, pid, forget);
  if (!forget || !pid)
    return;

  int hfd = bpf_map__fd(pm->skel->maps.host_ranges);
  struct gmt_trace_host_key hk, hnext, *hdead = NULL;
  size_t nh = 0, caph = 0;
  prev = NULL;
  while (bpf_map_get_next_key(hfd, prev, &hnext) == 0) {
    hk = hnext;
    prev = &hk;
    if (hk.tgid != pid)
      continue;
    if (nh == caph) {
      caph = caph ? caph * 2 : 64;
      struct gmt_trace_host_key *nd = realloc(hdead, caph * sizeof *nd);
      if (!nd)
        break;
      hdead = nd;
    }
    hdead[nh++] = hk;
  }
  for (size_t i = 0; i < nh; i++)
    bpf_map_delete_elem(hfd, &hdead[i]);
  free(hdead);
}

void gmt_probes_counters(gmt_probes_t *pm, uint64_t out[GMT_TCNT_MAX])
{
  int ncpu = libbpf_num_possible_cpus();
  memset(out, 0, GMT_TCNT_MAX * sizeof *out);
  if (ncpu <= 0)
    return;
  uint64_t *vals = calloc((size_t)ncpu, sizeof *vals);
  if (!vals)
    return;
  int fd = bpf_map__fd(pm->skel->maps.counters);
  for (uint32_t k = 0; k < GMT_TCNT_MAX; k++) {
    if (bpf_map_lookup_elem(fd, &k, vals) != 0)
      continue;
    for (int c = 0; c < ncpu; c++)
      out[k] += vals[c];
  }
  free(vals);
}

uint64_t gmt_probes_dropped(gmt_probes_t *pm)
{
  uint64_t c[GMT_TCNT_MAX];
  gmt_probes_counters(pm, c);
  return c[GMT_TCNT_RINGBUF_FULL] + c[GMT_TCNT_INFLIGHT_FULL];
}

int gmt_probes_prog_stats(gmt_probes_t *pm, gmt_probes_prog_stat_t *out, size_t max)
{
  if (pm->stats_fd < 0)
    return -ENOTSUP;
  struct bpf_program *prog;
  int n = 0;
  bpf_object__for_each_program(prog, pm->skel->obj)
  {
    int fd = bpf_program__fd(prog);
    if (fd < 0)
      continue; /* not loaded (a tracepoint this kernel lacks) */
    struct bpf_prog_info info;
    uint32_t len = sizeof info;
    memset(&info, 0, sizeof info);
    if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0)
      continue;
    if ((size_t)n < max) {
      snprintf(out[n].name, sizeof out[n].name, "%s", bpf_program__name(prog));
      out[n].runs = info.run_cnt;
      out[n].run_ns = info.run_time_ns;
    }
    n++;
  }
  return n;
}

const gmt_probes_info_t *gmt_probes_info(const gmt_probes_t *pm)
{
  return &pm->info;
}

void gmt_probes_free(gmt_probes_t *pm)
{
  if (!pm)
    return;
  ring_buffer__free(pm->rb);
  for (size_t i = 0; i < pm->nmulti; i++)
    close(pm->multi_fds[i]);
  free(pm->multi_fds);
  for (size_t i = pm->nlinks; i-- > 0;)
    bpf_link__destroy(pm->links[i]);
  free(pm->links);
  free(pm->files);
  if (pm->stats_fd >= 0)
    close(pm->stats_fd);
  cudatrace_bpf__destroy(pm->skel);
  free(pm);
}

/* Where pid mapped a file whose name begins with prefix. */
static int find_mapped(int pid, const char *prefix, char *path, size_t len)
{
  gmt_procmap_list_t l;
  int rc = gmt_procmaps_read((uint32_t)pid, &l);
  if (rc != 0)
    return rc;
  rc = -ENOENT;
  for (size_t i = 0; i < l.n && rc != 0; i++) {
    const char *p = l.maps[i].path, *base = strrchr(p, '/');
    if (l.maps[i].type != GMT_PMAP_FILE || l.maps[i].deleted || !base ||
        strncmp(base + 1, prefix, strlen(prefix)) != 0)
      continue;
    /* The path as the process sees it, reached through its root: the
     * same file for a process on the host, the container's for one in a
     * container. */
    snprintf(path, len, "/proc/%d/root%s", pid, p);
    struct stat st;
    if (stat(path, &st) != 0)
      snprintf(path, len, "%s", p);
    rc = 0;
  }
  gmt_procmaps_list_free(&l);
  return rc;
}

int gmt_probes_find_libcuda(int pid, char *path, size_t len)
{
  return find_mapped(pid, "libcuda.so", path, len);
}

int gmt_probes_find_hook(int pid, char *path, size_t len)
{
  return find_mapped(pid, "libgmthook.so", path, len);
}
