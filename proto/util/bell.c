/* The bell's memory and its handing out (see gmt_bell.h). */
#include "gmt_bell.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "gmt_unixsock.h"

_Static_assert(sizeof(gmt_bell_slot_t) == 64, "a slot is a cache line");

int gmt_bell_create(void)
{
  int fd = memfd_create("gmt-bell", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0)
    return -errno;
  gmt_bell_t *b = NULL;
  if (ftruncate(fd, sizeof(gmt_bell_t)) < 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0 ||
      (b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
    int e = errno;
    close(fd);
    return -e;
  }
  b->version = GMT_BELL_VERSION;
  b->slots = GMT_BELL_SLOTS;
  __atomic_store_n(&b->magic, GMT_BELL_MAGIC, __ATOMIC_RELEASE);
  munmap(b, sizeof *b);
  return fd;
}

gmt_bell_t *gmt_bell_map(int fd)
{
  struct stat st;
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
    errno = EPERM; /* it could shrink under the mapping */
    return NULL;
  }
  if (fstat(fd, &st) < 0)
    return NULL;
  if (!S_ISREG(st.st_mode) || (size_t)st.st_size < sizeof(gmt_bell_t)) {
    errno = EPROTO;
    return NULL;
  }
  gmt_bell_t *b = mmap(NULL, sizeof *b, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (b == MAP_FAILED)
    return NULL;
  if (__atomic_load_n(&b->magic, __ATOMIC_ACQUIRE) != GMT_BELL_MAGIC ||
      b->version != GMT_BELL_VERSION || b->slots != GMT_BELL_SLOTS) {
    munmap(b, sizeof *b);
    errno = EPROTO;
    return NULL;
  }
  return b;
}

int64_t gmt_bell_ring(gmt_bell_t *b, int dev, int64_t until_ns)
{
  gmt_bell_slot_t *s = &b->slot[dev];
  int64_t cur = atomic_load_explicit(&s->until_ns, memory_order_relaxed);
  while (cur < until_ns)
    if (atomic_compare_exchange_weak_explicit(&s->until_ns, &cur, until_ns, memory_order_relaxed,
                                              memory_order_relaxed)) {
      atomic_fetch_add_explicit(&s->rings, 1, memory_order_relaxed);
      return until_ns;
    }
  return cur;
}

void gmt_bell_hush(gmt_bell_t *b, int dev, int64_t mine_ns, int64_t now_ns)
{
  int64_t cur = mine_ns;
  if (now_ns < mine_ns)
    atomic_compare_exchange_strong_explicit(&b->slot[dev].until_ns, &cur, now_ns,
                                            memory_order_relaxed, memory_order_relaxed);
}

void gmt_bell_stay(gmt_bell_t *b, int dev, int64_t until_ns)
{
  _Atomic int64_t *p = &b->slot[dev].stay_until_ns;
  int64_t cur = atomic_load_explicit(p, memory_order_relaxed);
  while (cur < until_ns && !atomic_compare_exchange_weak_explicit(
                               p, &cur, until_ns, memory_order_relaxed, memory_order_relaxed))
    ;
}

int64_t gmt_bell_wait_until(const gmt_bell_t *b, int dev, int64_t now_ns, int64_t kernel_ns)
{
  int64_t until = gmt_bell_until(b, dev);
  if (until > now_ns)
    return until;
  int64_t stay =
      atomic_load_explicit(&((gmt_bell_t *)b)->slot[dev].stay_until_ns, memory_order_relaxed);
  if (stay > now_ns && (kernel_ns <= 0 || kernel_ns > stay - now_ns))
    return stay;
  return now_ns;
}

int gmt_bell_path(const char *url, char *out, size_t n)
{
  const char *p = url;
  if (!strncmp(url, "ipc://", 6))
    p = url + 6;
  else if (strstr(url, "://"))
    return -EINVAL;
  if (*p != '/' || (size_t)snprintf(out, n, "%s%s", p, GMT_BELL_SUFFIX) >= n ||
      strlen(out) >= sizeof(((struct sockaddr_un *)0)->sun_path))
    return -EINVAL;
  return 0;
}

static void set_timeouts(int fd)
{
  struct timeval tv = {GMT_BELL_IO_TIMEOUT_MS / 1000, (GMT_BELL_IO_TIMEOUT_MS % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

int gmt_bell_fetch(const char *path)
{
  struct sockaddr_un a;
  int rc = gmt_unix_addr(path, &a);
  if (rc < 0)
    return rc;
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0)
    return -errno;
  set_timeouts(s);
  /* A unix socket connects at once or fails at once (a full backlog
   * blocks: SO_SNDTIMEO bounds that). */
  if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) {
    rc = -errno;
    close(s);
    return rc;
  }
  char byte;
  struct iovec iov = {&byte, 1};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
  } c;
  struct msghdr m = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf, .msg_controllen = sizeof c.buf};
  ssize_t got = recvmsg(s, &m, MSG_CMSG_CLOEXEC);
  rc = got < 0 ? -errno : -ENOENT; /* closed without one: the server has none */
  struct cmsghdr *h = got > 0 ? CMSG_FIRSTHDR(&m) : NULL;
  if (h && h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS &&
      h->cmsg_len == CMSG_LEN(sizeof(int)))
    memcpy(&rc, CMSG_DATA(h), sizeof(int));
  close(s);
  return rc == -EAGAIN ? -ETIMEDOUT : rc;
}

struct gmt_bell_server {
  int fd;
  int stop[2]; /* a pipe: its write end closed stops the thread */
  pthread_t th;
  char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
  int (*get)(void *);
  void *arg;
};

static void send_fd(int c, int fd)
{
  char byte = 0;
  struct iovec iov = {&byte, 1};
  union {
    struct cmsghdr h;
    char buf[CMSG_SPACE(sizeof(int))];
  } u;
  memset(&u, 0, sizeof u);
  struct msghdr m = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
  struct cmsghdr *h = CMSG_FIRSTHDR(&m);
  h->cmsg_level = SOL_SOCKET;
  h->cmsg_type = SCM_RIGHTS;
  h->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(h), &fd, sizeof(int));
  (void)sendmsg(c, &m, MSG_NOSIGNAL);
}

static void *serve_main(void *arg)
{
  gmt_bell_server_t *s = arg;
  struct pollfd p[2] = {{s->fd, POLLIN, 0}, {s->stop[0], POLLIN, 0}};
  for (;;) {
    if (poll(p, 2, -1) < 0 && errno != EINTR)
      break;
    if (p[1].revents)
      break;
    if (!(p[0].revents & POLLIN))
      continue;
    int c = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0)
      continue;
    set_timeouts(c);
    int fd = s->get(s->arg);
    if (fd >= 0) {
      send_fd(c, fd);
      close(fd);
    }
    close(c);
  }
  return NULL;
}

int gmt_bell_serve(gmt_bell_server_t **out, const char *path, long gid, int (*get)(void *arg),
                   void *arg)
{
  struct sockaddr_un a;
  int rc = gmt_unix_addr(path, &a);
  if (rc < 0)
    return rc;
  gmt_bell_server_t *s = calloc(1, sizeof *s);
  if (!s)
    return -ENOMEM;
  snprintf(s->path, sizeof s->path, "%s", path);
  s->get = get;
  s->arg = arg;
  s->stop[0] = s->stop[1] = -1;
  s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s->fd < 0)
    goto fail;
  if (bind(s->fd, (struct sockaddr *)&a, sizeof a) < 0) {
    struct stat st;
    if (errno != EADDRINUSE || lstat(path, &st) < 0 || !S_ISSOCK(st.st_mode))
      goto fail;
    /* Someone's socket file: taken over only from a process that died. */
    if (!gmt_unix_stale(path)) {
      errno = EADDRINUSE;
      goto fail;
    }
    if (unlink(path) < 0 || bind(s->fd, (struct sockaddr *)&a, sizeof a) < 0)
      goto fail;
  }
  if (chmod(path, 0660) < 0 || (gid >= 0 && chown(path, (uid_t)-1, (gid_t)gid) < 0) ||
      listen(s->fd, 64) < 0 || pipe2(s->stop, O_CLOEXEC) < 0)
    goto fail_bound;
  if ((rc = pthread_create(&s->th, NULL, serve_main, s)) != 0) {
    errno = rc;
    goto fail_bound;
  }
  *out = s;
  return 0;
fail_bound:
  rc = -errno;
  unlink(path);
  goto out;
fail:
  rc = -errno;
out:
  if (s->fd >= 0)
    close(s->fd);
  if (s->stop[0] >= 0) {
    close(s->stop[0]);
    close(s->stop[1]);
  }
  free(s);
  return rc;
}

void gmt_bell_serve_stop(gmt_bell_server_t *s)
{
  if (!s)
    return;
  close(s->stop[1]);
  pthread_join(s->th, NULL);
  close(s->stop[0]);
  close(s->fd);
  unlink(s->path);
  free(s);
}
