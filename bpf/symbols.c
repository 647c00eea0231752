/* Call sites: /proc/PID/maps and ELF symbol tables (see symbols.h). */
#include "symbols.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
  uint64_t addr, size;
  union {
    size_t off;       /* into names, while names may still move */
    const char *name; /* once it no longer does */
  };
} elf_sym_t;

typedef struct {
  uint64_t off, filesz, vaddr;
} elf_seg_t;

struct gmt_elf {
  /* syms, nsyms and names are read only once this is set (a symbolizer's
   * loader thread may still be filling them). */
  atomic_bool syms_ready;
  elf_sym_t *syms; /* functions by address */
  size_t nsyms;
  char *names;
  size_t namelen, namecap;
  elf_seg_t segs[16];
  size_t nsegs;
};

static int sym_cmp(const void *a, const void *b)
{
  const elf_sym_t *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Copies name into the pool; its offset there, or -ENOMEM. */
static int name_add(gmt_elf_t *e, const char *name, size_t *off)
{
  size_t n = strlen(name) + 1;
  if (e->namelen + n > e->namecap) {
    size_t ncap = e->namecap ? e->namecap * 2 : 65536;
    while (ncap < e->namelen + n)
      ncap *= 2;
    char *nn = realloc(e->names, ncap);
    if (!nn)
      return -ENOMEM;
    e->names = nn;
    e->namecap = ncap;
  }
  memcpy(e->names + e->namelen, name, n);
  *off = e->namelen;
  e->namelen += n;
  return 0;
}

static int read_symtab(gmt_elf_t *e, Elf *elf, Elf_Scn *scn, GElf_Shdr *sh)
{
  Elf_Data *data = elf_getdata(scn, NULL);
  if (!data || !sh->sh_entsize)
    return 0;
  size_t n = sh->sh_size / sh->sh_entsize;
  elf_sym_t *ns = realloc(e->syms, (e->nsyms + n) * sizeof *ns);
  if (!ns)
    return -ENOMEM;
  e->syms = ns;
  for (size_t i = 0; i < n; i++) {
    GElf_Sym sym;
    if (!gelf_getsym(data, (int)i, &sym))
      continue;
    if (GELF_ST_TYPE(sym.st_info) != STT_FUNC && GELF_ST_TYPE(sym.st_info) != STT_GNU_IFUNC)
      continue;
    if (sym.st_shndx == SHN_UNDEF || !sym.st_value)
      continue;
    const char *name = elf_strptr(elf, sh->sh_link, sym.st_name);
    if (!name || !name[0])
      continue;
    size_t off;
    if (name_add(e, name, &off) != 0)
      return -ENOMEM;
    e->syms[e->nsyms++] = (elf_sym_t){.addr = sym.st_value, .size = sym.st_size, .off = off};
  }
  return 0;
}

static void read_segments(gmt_elf_t *e, Elf *elf)
{
  size_t nph = 0;
  if (elf_getphdrnum(elf, &nph) == 0) {
    for (size_t i = 0; i < nph && e->nsegs < 16; i++) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD)
        e->segs[e->nsegs++] = (elf_seg_t){ph.p_offset, ph.p_filesz, ph.p_vaddr};
    }
  }
}

static int read_symbols(gmt_elf_t *e, Elf *elf)
{
  for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh))
      continue;
    if (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM)
      continue;
    int rc = read_symtab(e, elf, scn, &sh);
    if (rc != 0)
      return rc;
  }
  for (size_t i = 0; i < e->nsyms; i++)
    e->syms[i].name = e->names + e->syms[i].off;
  qsort(e->syms, e->nsyms, sizeof *e->syms, sym_cmp);
  return 0;
}

/* Reads fd's segments (segs) and symbols (syms) into e. */
static int read_elf(gmt_elf_t *e, int fd, bool segs, bool syms)
{
  if (elf_version(EV_CURRENT) == EV_NONE)
    return -EINVAL;
  Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
  int rc = 0;
  if (!elf || elf_kind(elf) != ELF_K_ELF)
    rc = -ENOEXEC;
  if (rc == 0 && segs)
    read_segments(e, elf);
  if (rc == 0 && syms && (rc = read_symbols(e, elf)) == 0)
    atomic_store_explicit(&e->syms_ready, true, memory_order_release);
  if (elf)
    elf_end(elf);
  return rc;
}

int gmt_elf_open_some(const char *path, uint64_t syms_max, gmt_elf_t **out, int *later_fd)
{
  *later_fd = -1;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  struct stat st;
  bool later = fstat(fd, &st) == 0 && (uint64_t)st.st_size > syms_max;
  gmt_elf_t *e = calloc(1, sizeof *e);
  int rc = e ? read_elf(e, fd, true, !later) : -ENOMEM;
  if (rc == 0) {
    *out = e;
    if (later)
      *later_fd = fd;
    else
      close(fd);
    return 0;
  }
  close(fd);
  gmt_elf_close(e);
  return rc;
}

int gmt_elf_open(const char *path, gmt_elf_t **out)
{
  int fd;
  return gmt_elf_open_some(path, UINT64_MAX, out, &fd);
}

void gmt_elf_load_symbols(gmt_elf_t *e, int fd)
{
  if (read_elf(e, fd, false, true) != 0) {
    /* Unreadable now: no names, and no more tries. */
    free(e->syms);
    e->syms = NULL;
    e->nsyms = 0;
    atomic_store_explicit(&e->syms_ready, true, memory_order_release);
  }
  close(fd);
}

void gmt_elf_close(gmt_elf_t *e)
{
  if (!e)
    return;
  free(e->syms);
  free(e->names);
  free(e);
}

int gmt_elf_func_offset(const gmt_elf_t *e, const char *name, uint64_t *off)
{
  if (!atomic_load_explicit(&e->syms_ready, memory_order_acquire))
    return -EAGAIN;
  for (size_t i = 0; i < e->nsyms; i++) {
    if (strcmp(e->syms[i].name, name) != 0)
      continue;
    uint64_t va = e->syms[i].addr;
    for (size_t j = 0; j < e->nsegs; j++) {
      const elf_seg_t *sg = &e->segs[j];
      if (va >= sg->vaddr && va < sg->vaddr + sg->filesz) {
        *off = va - sg->vaddr + sg->off;
        return 0;
      }
    }
  }
  return -ENOENT;
}

int gmt_elf_off_to_vaddr(const gmt_elf_t *e, uint64_t off, uint64_t *vaddr)
{
  for (size_t i = 0; i < e->nsegs; i++) {
    const elf_seg_t *s = &e->segs[i];
    if (off >= s->off && off < s->off + s->filesz) {
      *vaddr = off - s->off + s->vaddr;
      return 0;
    }
  }
  return -ENOENT;
}

bool gmt_elf_symbolize(const gmt_elf_t *e, uint64_t vaddr, char *buf, size_t len)
{
  if (!atomic_load_explicit(&e->syms_ready, memory_order_acquire))
    return false;
  size_t lo = 0, hi = e->nsyms;
  while (lo < hi) { /* first symbol above vaddr */
    size_t mid = lo + (hi - lo) / 2;
    if (e->syms[mid].addr <= vaddr)
      lo = mid + 1;
    else
      hi = mid;
  }
  /* Symbols of size 0 (hand-written assembly) hold up to the next one. */
  for (size_t i = lo; i-- > 0;) {
    const elf_sym_t *s = &e->syms[i];
    if (s->size && vaddr >= s->addr + s->size) {
      if (i + 1 < lo && e->syms[i + 1].addr == s->addr)
        continue;
      return false;
    }
    snprintf(buf, len, "%s+0x%llx", s->name, (unsigned long long)(vaddr - s->addr));
    return true;
  }
  return false;
}

/* ---- processes ---- */

/* Symbol tables larger than this are read on the loader thread: a
 * framework's library (libtorch_cuda.so is about 1 GB) takes 50-200 ms,
 * which the caller's loop (gmt-schd's) must not wait. Its call sites have
 * their module and offset at once, and function names once it is read. */
#define SYMS_NOW_MAX (16ull << 20)

typedef struct elf_cache {
  char *path;
  gmt_elf_t *elf; /* NULL: could not be read, do not try again */
  struct elf_cache *next;
} elf_cache_t;

/* A symbol table for the loader thread to read. */
typedef struct pending {
  gmt_elf_t *elf;
  int fd;
  struct pending *next;
} pending_t;

struct gmt_symbolizer {
  gmt_procmaps_t *maps;
  elf_cache_t *elfs;
  /* The loader thread: reads the symbol tables queued in todo. */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pending_t *todo; /* under mu */
  bool stop;       /* under mu */
  int loader;      /* 1 started, -1 could not be: read at once */
  pthread_t thread;
};

int gmt_symbolizer_new(gmt_symbolizer_t **out, gmt_procmaps_t *maps)
{
  *out = calloc(1, sizeof **out);
  if (!*out)
    return -ENOMEM;
  (*out)->maps = maps;
  pthread_mutex_init(&(*out)->mu, NULL);
  pthread_cond_init(&(*out)->cv, NULL);
  return 0;
}

void gmt_symbolizer_free(gmt_symbolizer_t *s)
{
  if (!s)
    return;
  if (s->loader > 0) {
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL); /* after the table it reads, if any */
  }
  for (pending_t *p = s->todo, *n; p; p = n) {
    n = p->next;
    close(p->fd);
    free(p);
  }
  for (elf_cache_t *c = s->elfs, *n; c; c = n) {
    n = c->next;
    gmt_elf_close(c->elf);
    free(c->path);
    free(c);
  }
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s);
}

static void *loader_main(void *arg)
{
  gmt_symbolizer_t *s = arg;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!s->todo && !s->stop)
      pthread_cond_wait(&s->cv, &s->mu);
    if (s->stop)
      break;
    pending_t *p = s->todo;
    s->todo = p->next;
    pthread_mutex_unlock(&s->mu);
    gmt_elf_load_symbols(p->elf, p->fd);
    free(p);
    pthread_mutex_lock(&s->mu);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

/* e's symbol table, from fd, is read on the loader thread (or now, when
 * there is none). */
static void load_later(gmt_symbolizer_t *s, gmt_elf_t *e, int fd)
{
  pending_t *p = malloc(sizeof *p);
  if (!s->loader)
    s->loader = pthread_create(&s->thread, NULL, loader_main, s) == 0 ? 1 : -1;
  if (!p || s->loader < 0) {
    free(p);
    gmt_elf_load_symbols(e, fd);
    return;
  }
  *p = (pending_t){e, fd, NULL};
  pthread_mutex_lock(&s->mu);
  pending_t **t = &s->todo;
  while (*t)
    t = &(*t)->next;
  *t = p;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

/* Return addresses are in code: a file's executable mapping. */
static const gmt_procmap_t *map_of(gmt_symbolizer_t *s, uint32_t pid, uint64_t pc)
{
  const gmt_procmap_t *m = gmt_procmaps_find(s->maps, pid, pc);
  return m && m->exec && m->path[0] == '/' ? m : NULL;
}

static gmt_elf_t *elf_of(gmt_symbolizer_t *s, uint32_t pid, const char *path)
{
  for (elf_cache_t *c = s->elfs; c; c = c->next)
    if (!strcmp(c->path, path))
      return c->elf;
  elf_cache_t *c = calloc(1, sizeof *c);
  if (!c || !(c->path = strdup(path))) {
    free(c);
    return NULL;
  }
  /* Through the process's root first: the path is the one it sees, which
   * in a container is not ours. */
  char buf[PATH_MAX + 32];
  snprintf(buf, sizeof buf, "/proc/%u/root%s", pid, path);
  int fd = -1;
  if (gmt_elf_open_some(buf, SYMS_NOW_MAX, &c->elf, &fd) != 0)
    gmt_elf_open_some(path, SYMS_NOW_MAX, &c->elf, &fd);
  if (fd >= 0)
    load_later(s, c->elf, fd);
  c->next = s->elfs;
  s->elfs = c;
  return c->elf;
}

int gmt_symbolizer_resolve(gmt_symbolizer_t *s, uint32_t pid, uint64_t pc, gmt_alloc_site_t *site)
{
  memset(site, 0, sizeof *site);
  site->pc = pc;
  const gmt_procmap_t *m = map_of(s, pid, pc);
  if (!m)
    return -ENOENT;
  snprintf(site->module, sizeof site->module, "%s", m->path);
  uint64_t fileoff = pc - m->start + m->offset, vaddr = fileoff;
  gmt_elf_t *e = elf_of(s, pid, m->path);
  if (e && gmt_elf_off_to_vaddr(e, fileoff, &vaddr) == 0) {
    /* A return address points after the call: look up the call itself. */
    if (!gmt_elf_symbolize(e, vaddr - 1, site->function, sizeof site->function))
      site->function[0] = 0;
    else {
      /* keep the offset of the return address itself in the name */
      char *plus = strrchr(site->function, '+');
      if (plus) {
        unsigned long long o = strtoull(plus + 1, NULL, 16) + 1;
        snprintf(plus, sizeof site->function - (size_t)(plus - site->function), "+0x%llx", o);
      }
    }
  }
  site->offset = vaddr;
  return 0;
}

static bool skipped_module(const char *path)
{
  static const char *const skip[] = {"libcuda.so", "libcudart", "libgmthook",
                                     "libc.so",    "libc-",     "libpthread"};
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
    if (!strncmp(base, skip[i], strlen(skip[i])))
      return true;
  return false;
}

void gmt_symbolizer_site(gmt_symbolizer_t *s, uint32_t pid, const uint64_t *stack, size_t n,
                         gmt_alloc_site_t *site)
{
  memset(site, 0, sizeof *site);
  for (size_t i = 0; i < n; i++) {
    const gmt_procmap_t *m = map_of(s, pid, stack[i]);
    if (m && !skipped_module(m->path)) {
      gmt_symbolizer_resolve(s, pid, stack[i], site);
      return;
    }
  }
  if (n)
    gmt_symbolizer_resolve(s, pid, stack[0], site);
}
