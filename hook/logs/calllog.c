/* Alnair's per-call logs (see calllog.h): each thread's counters and ring
 * of finished calls, the writer thread that drains them into the files,
 * the files themselves, and what exit and fork do to them.
 *
 * Each thread that makes a timed call gets a log of its own (mmap'ed, so
 * that heap.c never sees it): per entry point a count and a sum of
 * nanoseconds, and a single-producer ring of (start, entry point,
 * duration). Only the thread writes its counters and the ring's head; only
 * the writer moves the tail. A log whose thread ended is taken over by the
 * next new thread, counts and all, so the sums stay whole and threads that
 * come and go use no more memory than the most that lived at once.
 *
 * The writer wakes every FLUSH_MS, appends the rings' lines to the
 * timeline (rotating it when the next line would pass GMT_LOG_MAX_BYTES)
 * and every METRICS_MS writes metrics.log afresh into a temporary file
 * renamed over it, so a reader never sees half of one. Its lock, g_mu, is
 * held only by it and by the exit handler, across file writes; it takes
 * nothing else (fork.h's CALLLOG rank).
 *
 * The folder may be one other users write too (a shared /tmp-like one):
 * it is opened once and every file made in it by name from there; no link
 * is followed, a file is written only when it is a regular file of ours
 * with no other name, the temporary file's name cannot be foreseen, and a
 * folder others can rearrange (writable by them, no sticky bit) is
 * refused. Files are 0600 and a folder the hook makes 0700 unless
 * GMT_LOG_MODE widens them. */
#include "calllog.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "callfmt.h"
#include "driver.h"
#include "gmt_bytes.h"
#include "fork.h"
#include "log.h"
#include "thread.h"

/* Lines a thread may have waiting for the writer, 16 bytes each: the
 * writer's FLUSH_MS of a thread making 800,000 calls a second (a launch
 * loop on an H200 makes 320,000). */
#define RING 16384
#define FLUSH_MS 20
#define METRICS_MS 1000
/* A ring entry keeps the duration in the low bits and the entry point's
 * id above them: 2^48 ns is 3 days. */
#define DUR_BITS 48
#define DUR_MASK ((1ull << DUR_BITS) - 1)

/* The ids of the lines: the entry points', then the pseudo-API of the
 * token gate's holds (tokenWait, gmt__calllog_held). */
#define HELD_ID GMT_SYM_COUNT
#define NIDS (GMT_SYM_COUNT + 1)

_Static_assert(NIDS <= (1 << (64 - DUR_BITS)), "line ids fit above the duration");

typedef struct {
  uint64_t t0;   /* CLOCK_MONOTONIC, ns */
  uint64_t meta; /* id << DUR_BITS | duration in ns */
} entry_t;

typedef struct tlog {
  struct tlog *next;     /* every log there is; pushed, never removed */
  _Atomic int owned;     /* a live thread writes here */
  _Atomic uint64_t head; /* the owner's */
  _Atomic uint64_t tail; /* the writer's */
  _Atomic uint64_t dropped;
  _Atomic uint64_t count[NIDS];
  _Atomic uint64_t burst_ns[NIDS];
  entry_t ring[RING];
} tlog_t;

_Atomic int gmt__calllog_on;

static _Atomic(tlog_t *) g_logs;
/* The hook is preloaded: its thread-locals can be static TLS (as
 * token.c's and heap.c's on their hot paths), read without a call. */
#define TLS_IE __attribute__((tls_model("initial-exec")))
static __thread tlog_t *t_log TLS_IE;
static __thread unsigned t_nest TLS_IE;
/* The token gate's holds of this thread inside its outermost timed call:
 * their sum is taken out of that call's burst when it ends, and their
 * lines follow the call's, so that a ring stays in the order the lines
 * began (the call began before the holds inside it). */
#define HOLDS 4
static __thread uint64_t t_held_ns TLS_IE;
static __thread unsigned t_nholds TLS_IE;
static __thread uint64_t t_holds[HOLDS][2] TLS_IE; /* start, ns */
static pthread_key_t g_key;
/* The writer was started (or a call is starting it): a process that never
 * made a timed call writes nothing, not even at exit. */
static _Atomic int g_started;
/* Calls not counted at all: no memory for their thread's log. */
static _Atomic uint64_t g_lost;
/* CLOCK_REALTIME - CLOCK_MONOTONIC at load: a start is written as time
 * since the epoch without a second clock read per call. */
static uint64_t g_epoch_offset;

enum { FILES_NONE, FILES_OPEN, FILES_FAILED };

/* The writer's place in one thread's ring while it merges them. */
typedef struct {
  tlog_t *l;
  uint64_t t, h;
} cursor_t;
#define MAX_CURSORS 1024

/* The writer's side, under g_mu. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
  const char *var; /* the variable that named the folder */
  char dir[PATH_MAX];
  uint64_t max;
  int state;
  int plain;     /* this process holds the folder's lock: Alnair's names */
  unsigned mode; /* of the files (GMT_LOG_MODE) */
  /* GMT_LOG_FORMAT=seed (the default): Alnair's first format, each entry
   * point under its seed name (seed_of: an index, -1 not logged). */
  int seed;
  signed char seed_of[GMT_SYM_COUNT];
  int pid;
  int dir_fd, lock_fd, tl_fd;
  uint64_t tl_size;
  uint64_t lost_lines; /* lines a failed write lost */
  int said_write;
  int closed; /* the exit handler wrote the last lines */
  uint64_t last_metrics_ms;
  gmt_callpaths_t paths;
  size_t buflen;
  char buf[64 << 10];
  char mbuf[(NIDS + 2) * 128];
  cursor_t cur[MAX_CURSORS];
} g; /* zeroed: its fds are set to -1 at load */

static uint64_t clock_ns(clockid_t c)
{
  struct timespec ts;
  clock_gettime(c, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the calling thread ---- */

uint64_t gmt__calllog_enter(void)
{
  if (t_nest++)
    return GMT_CALLLOG_NESTED; /* a driver calling its own entry points: counted once */
  return clock_ns(CLOCK_MONOTONIC);
}

static void thread_gone(void *p)
{
  tlog_t *l = p;
  if (t_log == l)
    t_log = NULL;
  atomic_store_explicit(&l->owned, 0, memory_order_release);
}

/* This thread's log: one a finished thread left, or a new one. */
static tlog_t *claim(void)
{
  tlog_t *l = atomic_load_explicit(&g_logs, memory_order_acquire);
  for (; l; l = l->next) {
    int free_ = 0;
    if (!atomic_load_explicit(&l->owned, memory_order_relaxed) &&
        atomic_compare_exchange_strong_explicit(&l->owned, &free_, 1, memory_order_acquire,
                                                memory_order_relaxed))
      break;
  }
  if (!l) {
    void *m =
        mmap(NULL, sizeof(tlog_t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
      return NULL;
    l = m; /* zeroed */
    atomic_store_explicit(&l->owned, 1, memory_order_relaxed);
    l->next = atomic_load_explicit(&g_logs, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&g_logs, &l->next, l, memory_order_release,
                                                  memory_order_relaxed))
      ;
  }
  t_log = l;
  pthread_setspecific(g_key, l); /* gives it back when the thread ends */
  return l;
}

static inline void bump(_Atomic uint64_t *c, uint64_t by)
{
  /* Only the owner writes: a load and a store, no locked instruction. */
  atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + by,
                        memory_order_relaxed);
}

static void *writer_main(void *arg);

static void start_writer(void)
{
  int no = 0;
  if (!atomic_compare_exchange_strong(&g_started, &no, 1))
    return;
  int rc = gmt__thread_start("gmt-calllog", writer_main);
  if (rc < 0)
    gmt__say("%s: cannot start the per-call log writer (%s); the logs are written at exit only",
             g.var, strerror(-rc));
}

/* One line of id for this thread: counted, and put in its ring. */
static void record(int id, uint64_t t0, uint64_t d)
{
  tlog_t *l = t_log ? t_log : claim();
  if (!l) {
    atomic_fetch_add_explicit(&g_lost, 1, memory_order_relaxed);
    return;
  }
  bump(&l->count[id], 1);
  bump(&l->burst_ns[id], d);
  uint64_t h = atomic_load_explicit(&l->head, memory_order_relaxed);
  if (h - atomic_load_explicit(&l->tail, memory_order_acquire) >= RING) {
    bump(&l->dropped, 1);
  } else {
    l->ring[h % RING] = (entry_t){t0, (uint64_t)id << DUR_BITS | (d < DUR_MASK ? d : DUR_MASK)};
    atomic_store_explicit(&l->head, h + 1, memory_order_release);
  }
  if (!atomic_load_explicit(&g_started, memory_order_relaxed))
    start_writer();
}

void gmt__calllog_leave(const gmt_calltimer_t *t)
{
  uint64_t end = clock_ns(CLOCK_MONOTONIC);
  t_nest--;
  if (t->t0 == GMT_CALLLOG_NESTED)
    return;
  /* The outermost call: what the gate held of it is tokenWait's. */
  uint64_t held = t_held_ns;
  t_held_ns = 0;
  if (t->id >= 0 && t->id < GMT_SYM_COUNT)
    record(t->id, t->t0, gmt__callfmt_own_ns(end - t->t0, held));
  for (unsigned i = 0; i < t_nholds; i++)
    record(HELD_ID, t_holds[i][0], t_holds[i][1]);
  t_nholds = 0;
}

void gmt__calllog_held(uint64_t t0, uint64_t ns)
{
  /* Inside a timed call (the gate always is, in a launch's wrapper) it is
   * taken from the call and written after it; a hold outside one, or past
   * HOLDS in one call, is written now. */
  if (t_nest)
    t_held_ns += ns;
  if (t_nest && t_nholds < HOLDS) {
    t_holds[t_nholds][0] = t0;
    t_holds[t_nholds][1] = ns;
    t_nholds++;
    return;
  }
  record(HELD_ID, t0, ns);
}

/* ---- the files (under g_mu) ---- */

static int write_all(int fd, const char *p, size_t n)
{
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return w < 0 ? -errno : -EIO;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* The folder, made if missing and opened: every file is then made in it
 * by name (openat), so a folder moved or replaced later changes nothing.
 * A link at the folder's own name is followed only when we or root made
 * it: another user's link would choose the folder for us. 0, or -errno
 * with why filled in. */
static int open_dir(char *why, size_t len)
{
  unsigned dmode = gmt__callfmt_dir_mode(g.mode);
  bool made = mkdir(g.dir, dmode) == 0;
  if (!made && errno != EEXIST) {
    int err = errno;
    snprintf(why, len, "cannot make the folder (%s)", strerror(err));
    return -err;
  }
  int fd = open(g.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    snprintf(why, len, "cannot open the folder (%s)", strerror(err));
    return -err;
  }
  struct stat st, name;
  const char *who;
  int rc = 0;
  if (fstat(fd, &st) < 0 || lstat(g.dir, &name) < 0) {
    rc = -errno;
    snprintf(why, len, "cannot look at the folder (%s)", strerror(-rc));
  } else if (S_ISLNK(name.st_mode) && name.st_uid != 0 && name.st_uid != geteuid()) {
    rc = -ELOOP;
    snprintf(why, len, "the folder's name is a symbolic link of uid %u, not followed",
             (unsigned)name.st_uid);
  } else if (S_ISLNK(name.st_mode) && stat(g.dir, &name) < 0) {
    rc = -errno;
    snprintf(why, len, "cannot look at the folder (%s)", strerror(-rc));
  } else if (name.st_dev != st.st_dev || name.st_ino != st.st_ino) {
    rc = -EAGAIN;
    snprintf(why, len, "the folder was replaced while it was opened");
  } else if ((who = gmt__callfmt_dir_open_to(st.st_mode)) != NULL) {
    rc = -EPERM;
    snprintf(why, len,
             "the folder is writable by %s without the sticky bit, so they could swap the logs "
             "for links (chmod +t the folder, or take their write away)",
             who);
  }
  if (rc < 0) {
    close(fd);
    return rc;
  }
  /* Exactly the mode asked for, whatever the umask. */
  if (made && st.st_uid == geteuid() && (st.st_mode & 07777) != dmode && fchmod(fd, dmode) < 0)
    GMT_HOOK_DEBUG("cannot set %s to %o (%s)", g.dir, dmode, strerror(errno));
  g.dir_fd = fd;
  return 0;
}

/* name in the folder, made if missing, for writing: never through a link
 * (nor a FIFO's wait for a reader), and only when it is a regular file of
 * ours with no other name, so that nothing another user planted is
 * written. Never truncated here: a truncation before those checks could
 * cut a file of theirs. Its mode is made g.mode. An fd, or -errno with why
 * filled in. */
static int open_ours(const char *name, int flags, char *why, size_t len)
{
  int fd = openat(g.dir_fd, name, flags | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, g.mode);
  struct stat st;
  if (fd < 0) {
    int err = errno;
    if (err == ELOOP)
      snprintf(why, len, "is a symbolic link, not followed");
    else if (fstatat(g.dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode))
      snprintf(why, len, "is not a regular file");
    else
      snprintf(why, len, "cannot be opened (%s)", strerror(err));
    return -err;
  }
  if (fstat(fd, &st) < 0) {
    int err = errno;
    snprintf(why, len, "cannot be looked at (%s)", strerror(err));
    close(fd);
    return -err;
  }
  if (!gmt__callfmt_file_ours(st.st_mode, st.st_uid, (unsigned long)st.st_nlink, geteuid(), why,
                              len)) {
    close(fd);
    return -EPERM;
  }
  fcntl(fd, F_SETFL, flags & O_APPEND);
  /* Made by the umask, or by an older gmt (0644): g.mode exactly. */
  if ((st.st_mode & 07777) != g.mode && fchmod(fd, g.mode) < 0)
    GMT_HOOK_DEBUG("cannot set %s/%s to %o (%s)", g.dir, name, g.mode, strerror(errno));
  return fd;
}

/* Whether name in the folder, if there, is ours to replace (metrics.log,
 * written by a rename over it): else 0 with why filled in. */
static int name_ours(const char *name, char *why, size_t len)
{
  struct stat st;
  if (fstatat(g.dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
    snprintf(why, len, "cannot be looked at (%s)", strerror(errno));
    return errno == ENOENT;
  }
  if (S_ISLNK(st.st_mode)) {
    snprintf(why, len, "is a symbolic link, not followed");
    return 0;
  }
  return gmt__callfmt_file_ours(st.st_mode, st.st_uid, (unsigned long)st.st_nlink, geteuid(), why,
                                len);
}

/* Once per process: the folder checked and opened, which names are ours,
 * and the timeline opened. A folder that cannot be used turns the logs
 * off, said once; Alnair's names that are not ours to write (a link,
 * another user's file) are said once, and this process's own names are
 * used instead. */
static void open_files(void)
{
  char why[256];
  const char *name = NULL; /* the file why speaks of; NULL: the folder */
  g.pid = (int)getpid();
  const char *mx = getenv("GMT_LOG_MAX_BYTES");
  uint64_t max = 0;
  g.max = GMT_CALLLOG_DEFAULT_MAX_BYTES;
  if (mx && *mx && (gmt_parse_bytes(mx, &max) < 0 || max == 0))
    gmt__say("GMT_LOG_MAX_BYTES=%s is not a byte count of at least 1 (digits and an optional "
             "K, M, G, T, Ki, Mi, Gi or Ti); timeline.log is kept under %llu",
             mx, (unsigned long long)g.max);
  else if (mx && *mx)
    g.max = max;
  const char *fmt = getenv("GMT_LOG_FORMAT");
  g.seed = !(fmt && !strcmp(fmt, "entry"));
  if (fmt && *fmt && strcmp(fmt, "entry") && strcmp(fmt, "seed"))
    gmt__say("GMT_LOG_FORMAT=%s is neither seed nor entry; the seed's format is written", fmt);
  for (int id = 0; id < GMT_SYM_COUNT; id++)
    g.seed_of[id] = (signed char)gmt__callfmt_seed_name(gmt__sym_name(id));
  const char *mode = getenv("GMT_LOG_MODE");
  g.mode = GMT_CALLLOG_DEFAULT_MODE;
  if (mode && *mode && gmt__callfmt_mode(mode, &g.mode) < 0)
    gmt__say("GMT_LOG_MODE=%s is not an octal file mode from 0600 to 0666 (as 0640 or 0644); "
             "the logs are kept private (0600)",
             mode);
  /* Only the folder itself is made: a missing parent is the operator's to
   * fix, and is said like any other folder that cannot be written. */
  int rc = open_dir(why, sizeof why);
  if (rc == 0) {
    /* The first process of the folder keeps Alnair's names for as long as
     * it lives; the others, and its forked children, carry their pid. The
     * lock goes with the process (and with an exec: O_CLOEXEC). A lock
     * that cannot be had (another user's) means this process's names. */
    char lwhy[128];
    g.lock_fd = open_ours(".gmt-calllog.lock", O_RDWR, lwhy, sizeof lwhy);
    g.plain = g.lock_fd >= 0 && flock(g.lock_fd, LOCK_EX | LOCK_NB) == 0;
    if (g.lock_fd < 0)
      GMT_HOOK_DEBUG("%s/.gmt-calllog.lock %s; this process's own names", g.dir, lwhy);
    gmt__callfmt_paths(&g.paths, g.pid, g.plain);
    const char *refused = NULL;
    if (g.plain && !name_ours(g.paths.metrics, why, sizeof why))
      refused = g.paths.metrics;
    else if ((g.tl_fd = open_ours(g.paths.timeline, O_WRONLY | O_APPEND, why, sizeof why)) < 0)
      refused = g.paths.timeline;
    if (g.plain && refused) {
      char was[sizeof why], rname[sizeof g.paths.metrics];
      memcpy(was, why, sizeof why);
      snprintf(rname, sizeof rname, "%s", refused);
      g.plain = 0;
      gmt__callfmt_paths(&g.paths, g.pid, 0);
      g.tl_fd = open_ours(g.paths.timeline, O_WRONLY | O_APPEND, why, sizeof why);
      if (g.tl_fd >= 0)
        gmt__say("%s=%s: %s %s; this process writes %s and %s instead", g.var, g.dir, rname, was,
                 g.paths.timeline, g.paths.metrics);
    }
    if (!g.plain && g.lock_fd >= 0) {
      close(g.lock_fd);
      g.lock_fd = -1;
    }
    if (g.tl_fd < 0) {
      name = g.paths.timeline;
      rc = -EPERM;
    }
  }
  struct stat st;
  if (rc == 0 && fstat(g.tl_fd, &st) == 0)
    g.tl_size = (uint64_t)st.st_size;
  if (rc < 0) {
    gmt__say("%s=%s: %s%s%s; no per-call logs", g.var, g.dir, name ? name : "", name ? " " : "",
             why);
    if (g.dir_fd >= 0)
      close(g.dir_fd);
    g.dir_fd = -1;
    g.state = FILES_FAILED;
    atomic_store_explicit(&gmt__calllog_on, 0, memory_order_relaxed);
    return;
  }
  g.state = FILES_OPEN;
}

static void write_failed(const char *name, const char *why)
{
  if (g.said_write)
    return;
  g.said_write = 1;
  gmt__say("%s: cannot write %s/%s (%s); its lines are dropped and counted", g.var, g.dir, name,
           why);
}

static void flush_buf(void)
{
  if (!g.buflen)
    return;
  int rc = g.tl_fd >= 0 ? write_all(g.tl_fd, g.buf, g.buflen) : -EBADF;
  if (rc == 0) {
    g.tl_size += g.buflen;
  } else {
    for (size_t i = 0; i < g.buflen; i++)
      g.lost_lines += g.buf[i] == '\n';
    write_failed(g.paths.timeline, strerror(-rc));
  }
  g.buflen = 0;
}

/* timeline.log becomes timeline.log.1 (replacing whatever had that name:
 * a rename replaces a link, it does not follow it) and a new timeline.log
 * starts: the two never hold more than twice the bound. */
static void rotate(void)
{
  if (g.tl_fd >= 0)
    close(g.tl_fd);
  if (renameat(g.dir_fd, g.paths.timeline, g.dir_fd, g.paths.rotated) < 0)
    GMT_HOOK_DEBUG("cannot rename %s/%s (%s); it is cut instead", g.dir, g.paths.timeline,
                   strerror(errno));
  char why[128];
  g.tl_fd = open_ours(g.paths.timeline, O_WRONLY | O_APPEND, why, sizeof why);
  if (g.tl_fd >= 0 && ftruncate(g.tl_fd, 0) < 0)
    GMT_HOOK_DEBUG("cannot cut %s/%s (%s)", g.dir, g.paths.timeline, strerror(errno));
  if (g.tl_fd < 0)
    write_failed(g.paths.timeline, why);
  g.tl_size = 0;
}

static void put_line(const char *line, size_t n)
{
  if (gmt__callfmt_must_rotate(g.tl_size + g.buflen, n, g.max)) {
    flush_buf();
    rotate();
  }
  if (g.buflen + n > sizeof(g.buf))
    flush_buf();
  memcpy(g.buf + g.buflen, line, n);
  g.buflen += n;
}

/* The name a line of id is written under (the entry point's own). */
static const char *id_name(int id)
{
  return id == HELD_ID ? GMT_CALLFMT_WAIT_NAME : gmt__sym_name(id);
}

static void put_entry(const entry_t *e)
{
  char line[256];
  int id = (int)(e->meta >> DUR_BITS);
  size_t n;
  if (!g.seed)
    n = gmt__callfmt_timeline(line, sizeof(line), id_name(id), e->t0 + g_epoch_offset,
                              e->meta & DUR_MASK);
  else if (id == HELD_ID)
    n = gmt__callfmt_seed_timeline(line, sizeof(line), GMT_CALLFMT_WAIT_NAME,
                                   e->t0 + g_epoch_offset, e->meta & DUR_MASK);
  else if (g.seed_of[id] >= 0)
    n = gmt__callfmt_seed_timeline(line, sizeof(line), gmt__callfmt_seed_names[g.seed_of[id]],
                                   e->t0 + g_epoch_offset, e->meta & DUR_MASK);
  else
    n = 0; /* not one of the seed's */
  if (n)
    put_line(line, n);
}

static uint64_t cur_t0(const cursor_t *c)
{
  return c->l->ring[c->t % RING].t0;
}

static void sift_down(cursor_t *h, size_t n, size_t i)
{
  for (;;) {
    size_t m = i, a = 2 * i + 1, b = a + 1;
    if (a < n && cur_t0(&h[a]) < cur_t0(&h[m]))
      m = a;
    if (b < n && cur_t0(&h[b]) < cur_t0(&h[m]))
      m = b;
    if (m == i)
      return;
    cursor_t x = h[i];
    h[i] = h[m];
    h[m] = x;
    i = m;
  }
}

/* Every thread's waiting lines, merged in the order the calls began. A
 * thread's calls follow one another, so each ring is in that order
 * already; a call that ends after a flush began before some written in
 * it, so across flushes the order can be off by as long as a call takes. */
static void drain(void)
{
  size_t n = 0;
  for (tlog_t *l = atomic_load_explicit(&g_logs, memory_order_acquire); l; l = l->next) {
    cursor_t c = {l, atomic_load_explicit(&l->tail, memory_order_relaxed),
                  atomic_load_explicit(&l->head, memory_order_acquire)};
    if (c.t == c.h)
      continue;
    if (n < MAX_CURSORS) {
      g.cur[n++] = c;
      continue;
    }
    /* More threads with lines than cursors: these go unmerged. */
    for (; c.t != c.h; c.t++)
      put_entry(&l->ring[c.t % RING]);
    atomic_store_explicit(&l->tail, c.h, memory_order_release);
  }
  for (size_t i = n / 2; i-- > 0;)
    sift_down(g.cur, n, i);
  while (n) {
    cursor_t *c = &g.cur[0];
    put_entry(&c->l->ring[c->t % RING]);
    if (++c->t == c->h) {
      atomic_store_explicit(&c->l->tail, c->h, memory_order_release);
      g.cur[0] = g.cur[--n];
    }
    sift_down(g.cur, n, 0);
  }
  flush_buf();
}

/* metrics.log afresh: every entry point called so far, in the hook's
 * order (the seed's: its seven names), then tokenWait and the lines
 * dropped, if any. */
static void write_metrics(void)
{
  size_t len = 0;
  uint64_t dropped = g.lost_lines + atomic_load_explicit(&g_lost, memory_order_relaxed);
  for (tlog_t *l = atomic_load_explicit(&g_logs, memory_order_acquire); l; l = l->next)
    dropped += atomic_load_explicit(&l->dropped, memory_order_relaxed);
  uint64_t seed_count[GMT_CALLFMT_SEED_NAMES] = {0}, seed_ns[GMT_CALLFMT_SEED_NAMES] = {0};
  uint64_t held = 0, held_ns = 0;
  for (int id = 0; id < NIDS; id++) {
    uint64_t count = 0, ns = 0;
    for (tlog_t *l = atomic_load_explicit(&g_logs, memory_order_acquire); l; l = l->next) {
      count += atomic_load_explicit(&l->count[id], memory_order_relaxed);
      ns += atomic_load_explicit(&l->burst_ns[id], memory_order_relaxed);
    }
    if (id == HELD_ID) {
      held = count;
      held_ns = ns;
    } else if (g.seed && g.seed_of[id] >= 0) {
      seed_count[g.seed_of[id]] += count;
      seed_ns[g.seed_of[id]] += ns;
    } else if (!g.seed && count) {
      len += gmt__callfmt_metric(g.mbuf + len, sizeof(g.mbuf) - len, gmt__sym_name(id), count, ns);
    }
  }
  /* The seed writes each of its names, called or not. */
  for (int i = 0; g.seed && i < GMT_CALLFMT_SEED_NAMES; i++)
    len += gmt__callfmt_seed_metric(g.mbuf + len, sizeof(g.mbuf) - len, gmt__callfmt_seed_names[i],
                                    seed_count[i], seed_ns[i]);
  if (held)
    len += g.seed ? gmt__callfmt_seed_metric(g.mbuf + len, sizeof(g.mbuf) - len,
                                             GMT_CALLFMT_WAIT_NAME, held, held_ns)
                  : gmt__callfmt_metric(g.mbuf + len, sizeof(g.mbuf) - len, GMT_CALLFMT_WAIT_NAME,
                                        held, held_ns);
  if (dropped)
    len += g.seed ? gmt__callfmt_seed_dropped(g.mbuf + len, sizeof(g.mbuf) - len, dropped)
                  : gmt__callfmt_dropped(g.mbuf + len, sizeof(g.mbuf) - len, dropped);
  /* A fresh name each time, made only if nothing has it (O_EXCL: not
   * through a link either). */
  char tmp[64];
  int fd = -1;
  for (int i = 0; i < 8 && fd < 0; i++) {
    uint64_t rnd;
    if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
      rnd = clock_ns(CLOCK_MONOTONIC) ^ ((uint64_t)i << 56);
    gmt__callfmt_tmp_name(tmp, sizeof tmp, g.pid, rnd);
    fd = openat(g.dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, g.mode);
    if (fd < 0 && errno != EEXIST)
      break;
  }
  int rc = fd < 0 ? -errno : 0;
  if (rc == 0 && fchmod(fd, g.mode) < 0) /* the umask's cut undone */
    rc = -errno;
  if (rc == 0)
    rc = write_all(fd, g.mbuf, len);
  if (rc == 0 && renameat(g.dir_fd, tmp, g.dir_fd, g.paths.metrics) < 0)
    rc = -errno;
  if (fd >= 0)
    close(fd);
  if (rc < 0) {
    if (fd >= 0)
      unlinkat(g.dir_fd, tmp, 0);
    write_failed(g.paths.metrics, strerror(-rc));
  }
}

/* The lines waiting, and metrics.log when it is due (always when final).
 * 0 when there is nothing more to write, ever. */
static int flush_locked(int final)
{
  if (g.closed)
    return 0;
  if (g.state == FILES_NONE)
    open_files();
  if (g.state != FILES_OPEN)
    return 0;
  drain();
  uint64_t now = clock_ns(CLOCK_MONOTONIC) / 1000000;
  if (final || now - g.last_metrics_ms >= METRICS_MS) {
    write_metrics();
    g.last_metrics_ms = now;
  }
  return 1;
}

static void *writer_main(void *arg)
{
  (void)arg;
  const struct timespec nap = {0, FLUSH_MS * 1000000L};
  for (;;) {
    nanosleep(&nap, NULL);
    pthread_mutex_lock(&g_mu);
    int more = flush_locked(0);
    pthread_mutex_unlock(&g_mu);
    if (!more)
      return NULL;
  }
}

/* ---- exit and fork ---- */

/* The last lines and counts. A writer stuck in a write for a second is
 * not waited for: exit must not hang on a log. */
__attribute__((destructor)) static void calllog_exit(void)
{
  if (!atomic_load(&g_started))
    return;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 1;
  if (pthread_mutex_timedlock(&g_mu, &until) != 0)
    return;
  flush_locked(1);
  g.closed = 1;
  pthread_mutex_unlock(&g_mu);
}

static void calllog_prepare(void)
{
  pthread_mutex_lock(&g_mu);
}

static void calllog_parent(void)
{
  pthread_mutex_unlock(&g_mu);
}

/* The child writes files of its own, from its own calls: the parent's
 * lines and counts stay the parent's, its lock and files too. The forking
 * thread keeps its log (emptied); the others' threads are not in the
 * child, so their logs are free for the child's threads. */
static void calllog_child(void)
{
  pthread_mutex_init(&g_mu, NULL);
  if (g.lock_fd >= 0)
    close(g.lock_fd); /* only our copy: the parent keeps its lock */
  if (g.tl_fd >= 0)
    close(g.tl_fd);
  if (g.dir_fd >= 0)
    close(g.dir_fd);
  g.dir_fd = g.lock_fd = g.tl_fd = -1;
  if (g.state == FILES_OPEN)
    g.state = FILES_NONE;
  g.plain = 0;
  g.tl_size = g.lost_lines = g.last_metrics_ms = 0;
  g.buflen = 0;
  g.said_write = g.closed = 0;
  atomic_store(&g_started, 0);
  atomic_store(&g_lost, 0);
  for (tlog_t *l = atomic_load(&g_logs); l; l = l->next) {
    atomic_store(&l->owned, l == t_log);
    atomic_store(&l->tail, atomic_load(&l->head));
    atomic_store(&l->dropped, 0);
    for (int id = 0; id < NIDS; id++) {
      atomic_store(&l->count[id], 0);
      atomic_store(&l->burst_ns[id], 0);
    }
  }
}

static const gmt_fork_ops_t g_fork_ops = {calllog_prepare, calllog_parent, calllog_child};

/* Reads the environment only: nothing is created before the first timed
 * call, so a process that never calls CUDA leaves no file. */
__attribute__((constructor)) static void calllog_init(void)
{
  g.dir_fd = g.lock_fd = g.tl_fd = -1;
  gmt__fork_register(GMT_LOCK_CALLLOG, &g_fork_ops);
  g.var = "GMT_LOG_DIR";
  const char *dir = getenv(g.var);
  if (!dir || !*dir) {
    g.var = "PFLOG"; /* Alnair's name */
    dir = getenv(g.var);
  }
  if (!dir || !*dir)
    return;
  /* A relative folder is the one of the directory we started in, for the
   * process and its children alike. */
  char cwd[PATH_MAX];
  int n = dir[0] == '/' || !getcwd(cwd, sizeof(cwd))
              ? snprintf(g.dir, sizeof(g.dir), "%s", dir)
              : snprintf(g.dir, sizeof(g.dir), "%s/%s", cwd, dir);
  if (n <= 0 || (size_t)n >= sizeof(g.dir) - 64) {
    gmt__say("%s: the folder's name is too long; no per-call logs", g.var);
    return;
  }
  while (n > 1 && g.dir[n - 1] == '/')
    g.dir[--n] = '\0';
  if (pthread_key_create(&g_key, thread_gone) != 0) {
    gmt__say("%s: no thread key left; no per-call logs", g.var);
    return;
  }
  g_epoch_offset = clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_MONOTONIC);
  atomic_store(&gmt__calllog_on, 1);
}
