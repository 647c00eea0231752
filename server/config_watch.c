/* Watching resource-config.txt: the owner's callback runs within about a
 * second of a change, without SIGHUP (gmt-schd reloads then, as on SIGHUP).
 *
 * Editors and `mv` replace the file rather than write into it, so the
 * watch (uv_fs_event, inotify on Linux) is on the file's folder, and only
 * events naming the file (or Kubernetes' `..data` swap of a mounted
 * ConfigMap) count. They are debounced: the check runs DEBOUNCE_MS after
 * the last one. Where fs events are not to be had (some container file
 * systems, a folder that was itself replaced) a timer stats the file
 * every POLL_MS.
 *
 * A check calls back only when the file is not what was last noted: its
 * stat (device, inode, size, mtime, ctime) is compared first, and where
 * that differs its content's hash, so that `touch` reloads nothing and
 * logs nothing. The owner notes the file before each load, whether it
 * loads or not, so a broken file is reported once, not every second. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "config_watch.h"
#include "gmt_log.h"

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
  gmt_config_watch_cb cb;
  void *data;
  char *path;
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
  /* Not a plain open: a FIFO or a device must not hold the loop. */
  const char *why;
  int fd = gmt_config_open(path, &why);
  if (fd < 0) {
    g->err = -fd;
    return;
  }
  uint64_t h = 1469598103934665603ULL;
  unsigned char buf[4096];
  for (size_t total = 0; total <= GMT_CONFIG_MAX_BYTES; total += sizeof buf) {
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

void gmt_config_watch_note(gmt_config_watch_t *w)
{
  sig_read(w->path, &w->last);
}

/* Calls back where the content is not the one last noted. full: hash even
 * where the stat is the same (an fs event said something was written,
 * maybe within one mtime tick). */
static void check(struct gmt_config_watch *w, bool full)
{
  file_sig_t now;
  sig_stat(w->path, &now);
  if (!full && sig_same_stat(&now, &w->last))
    return;
  sig_read(w->path, &now);
  if (sig_same(&now, &w->last)) {
    w->last = now; /* touched, or replaced by the same bytes: nothing to do */
    return;
  }
  /* Noted now, so that an owner that does not note (or not yet) is not
   * called again for the same content; one that reloads notes again. */
  w->last = now;
  w->cb(w->data);
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

int gmt_config_watch_init(gmt_config_watch_t **out, uv_loop_t *loop, const char *path,
                          gmt_config_watch_cb cb, void *data)
{
  *out = NULL;
  struct gmt_config_watch *w = calloc(1, sizeof *w);
  if (!w)
    return -ENOMEM;
  w->cb = cb;
  w->data = data;
  const char *slash = strrchr(path, '/');
  if (!slash) {
    w->dir = strdup(".");
    w->base_buf = strdup(path);
  } else {
    size_t dlen = slash == path ? 1 : (size_t)(slash - path);
    w->dir = strndup(path, dlen);
    w->base_buf = strdup(slash + 1);
  }
  w->path = strdup(path);
  if (!w->dir || !w->base_buf || !w->path) {
    free(w->dir);
    free(w->base_buf);
    free(w->path);
    free(w);
    return -ENOMEM;
  }
  w->base = w->base_buf;
  /* What the owner loaded (a change in between is caught by the next one). */
  sig_read(path, &w->last);

  uv_fs_event_init(loop, &w->event);
  uv_timer_init(loop, &w->debounce);
  uv_timer_init(loop, &w->poll);
  w->event.data = w->debounce.data = w->poll.data = w;
  w->open_handles = 3;
  *out = w;

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
    free(w->path);
    free(w);
  }
}

void gmt_config_watch_close(gmt_config_watch_t *w)
{
  if (!w)
    return;
  uv_close((uv_handle_t *)&w->event, on_closed);
  uv_close((uv_handle_t *)&w->debounce, on_closed);
  uv_close((uv_handle_t *)&w->poll, on_closed);
}
