/* Watching resource-config.txt: changes are reloaded within about a second,
 * without SIGHUP, through the same gmt__config_reload() as SIGHUP.
 *
 * Editors and `mv` replace the file rather than write into it, so the
 * watch (uv_fs_event, inotify on Linux) is on the file's folder, and only
 * events naming the file (or Kubernetes' `..data` swap of a mounted
 * ConfigMap) count. They are debounced: the check runs DEBOUNCE_MS after
 * the last one. Where fs events are not to be had (some container file
 * systems, a folder that was itself replaced) a timer stats the file
 * every POLL_MS.
 *
 * A check reloads only when the file is not what was last loaded: its
 * stat (device, inode, size, mtime, ctime) is compared first, and where
 * that differs its content's hash, so that `touch` reloads nothing and
 * logs nothing. A file that fails to load is remembered too: it is
 * reported once, not every second. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gmt_log.h"
#include "schd.h"

#define DEBOUNCE_MS 100
#define POLL_MS 1000

typedef struct {
  int err; /* 0, or the errno that stat or read gave */
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime, ctime;
  uint64_t hash; /* FNV-1a of the content; set by sig_read() */
} file_sig_t;

struct gmt_config_watch {
  gmt_schd_t *s;
  char *dir;        /* the watched folder */
  const char *base; /* the file's name in it (points into base_buf) */
  char *base_buf;
  uv_fs_event_t event;
  uv_timer_t debounce, poll;
  int open_handles; /* freed when the last one is closed */
  file_sig_t last;  /* the file as last loaded (or tried) */
};

static void sig_stat(const char *path, file_sig_t *g)
{
  struct stat st;
  memset(g, 0, sizeof *g);
  if (stat(path, &st) < 0) {
    g->err = errno ? errno : EIO;
    return;
  }
  g->dev = st.st_dev;
  g->ino = st.st_ino;
  g->size = st.st_size;
  g->mtime = st.st_mtim;
  g->ctime = st.st_ctim;
}

static bool sig_same_stat(const file_sig_t *a, const file_sig_t *b)
{
  if (a->err || b->err)
    return a->err == b->err;
  return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
         a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
         a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

/* The stat and the content's hash. */
static void sig_read(const char *path, file_sig_t *g)
{
  sig_stat(path, g);
  if (g->err)
    return;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    g->err = errno ? errno : EIO;
    return;
  }
  uint64_t h = 1469598103934665603ULL;
  unsigned char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      g->err = errno ? errno : EIO;
      break;
    }
    if (n == 0)
      break;
    for (ssize_t i = 0; i < n; i++) {
      h ^= buf[i];
      h *= 1099511628211ULL;
    }
  }
  close(fd);
  g->hash = h;
}

static bool sig_same(const file_sig_t *a, const file_sig_t *b)
{
  if (a->err || b->err)
    return a->err == b->err;
  return a->size == b->size && a->hash == b->hash;
}

void gmt__config_watch_note(gmt_schd_t *s)
{
  if (s->cwatch)
    sig_read(s->config_path, &s->cwatch->last);
}

/* Reloads where the content is not the one last loaded. full: hash even
 * where the stat is the same (an fs event said something was written,
 * maybe within one mtime tick). */
static void check(struct gmt_config_watch *w, bool full)
{
  gmt_schd_t *s = w->s;
  if (s->stopping)
    return;
  file_sig_t now;
  sig_stat(s->config_path, &now);
  if (!full && sig_same_stat(&now, &w->last))
    return;
  sig_read(s->config_path, &now);
  if (sig_same(&now, &w->last)) {
    w->last = now; /* touched, or replaced by the same bytes: nothing to do */
    return;
  }
  gmt__config_reload(s, "changed on disk"); /* notes the new signature */
}

static void on_debounce(uv_timer_t *h)
{
  check(h->data, true);
}

static void on_poll(uv_timer_t *h)
{
  struct gmt_config_watch *w = h->data;
  /* Events are in flight: the debounced check will see the file whole. */
  if (uv_is_active((uv_handle_t *)&w->debounce))
    return;
  check(w, false);
}

static void on_event(uv_fs_event_t *h, const char *filename, int events, int status)
{
  struct gmt_config_watch *w = h->data;
  (void)events;
  if (status < 0) {
    gmt_warn("watching %s: %s; checking it every %d ms instead", w->dir, uv_strerror(status),
             POLL_MS);
    uv_fs_event_stop(h);
    return;
  }
  /* filename may be missing on some platforms: then any event counts.
   * `..data`: Kubernetes swaps a mounted ConfigMap's files by renaming it. */
  if (filename && strcmp(filename, w->base) != 0 && strncmp(filename, "..", 2) != 0)
    return;
  uv_timer_start(&w->debounce, on_debounce, DEBOUNCE_MS, 0);
}

int gmt__config_watch_init(gmt_schd_t *s)
{
  struct gmt_config_watch *w = calloc(1, sizeof *w);
  if (!w)
    return -ENOMEM;
  w->s = s;
  const char *path = s->config_path;
  const char *slash = strrchr(path, '/');
  if (!slash) {
    w->dir = strdup(".");
    w->base_buf = strdup(path);
  } else {
    size_t dlen = slash == path ? 1 : (size_t)(slash - path);
    w->dir = strndup(path, dlen);
    w->base_buf = strdup(slash + 1);
  }
  if (!w->dir || !w->base_buf) {
    free(w->dir);
    free(w->base_buf);
    free(w);
    return -ENOMEM;
  }
  w->base = w->base_buf;
  /* What main() loaded (a change in between is caught by the next one). */
  sig_read(path, &w->last);

  uv_fs_event_init(s->loop, &w->event);
  uv_timer_init(s->loop, &w->debounce);
  uv_timer_init(s->loop, &w->poll);
  w->event.data = w->debounce.data = w->poll.data = w;
  w->open_handles = 3;
  s->cwatch = w;

  int rc = uv_fs_event_start(&w->event, on_event, w->dir, 0);
  if (rc < 0)
    gmt_warn("cannot watch %s for changes (%s); checking %s every %d ms instead", w->dir,
             uv_strerror(rc), path, POLL_MS);
  uv_timer_start(&w->poll, on_poll, POLL_MS, POLL_MS);
  return 0;
}

static void on_closed(uv_handle_t *h)
{
  struct gmt_config_watch *w = h->data;
  if (--w->open_handles == 0) {
    free(w->dir);
    free(w->base_buf);
    free(w);
  }
}

void gmt__config_watch_close(gmt_schd_t *s)
{
  struct gmt_config_watch *w = s->cwatch;
  if (!w)
    return;
  s->cwatch = NULL;
  uv_close((uv_handle_t *)&w->event, on_closed);
  uv_close((uv_handle_t *)&w->debounce, on_closed);
  uv_close((uv_handle_t *)&w->poll, on_closed);
}
