/* The bell: a few bytes of memory shared by every hooked process of the
 * node, through which a latency pod's processes stop batch pods' launches
 * at once, without a trip through the daemons (docs/protocol.md, "The
 * bell"). A trip through gmt-pmgr to gmt-schd and back costs about 1 ms on
 * a GPU machine, and every 100 us a stop takes to arrive costs a request
 * about 100 us (bench/handoff_floor.cu).
 *
 * One slot per node GPU holds the CLOCK_MONOTONIC time until which it
 * rings. A latency process rings its GPU's slot at its launches and hushes
 * it once its work is done; a batch process whose grant says a latency pod
 * shares the GPU reads the slot at each launch and waits while it rings,
 * for at most what its grant allows (TokenReply.bell_max_us), so a false
 * ring costs a batch pod no more than a latency pod at its LIMIT would.
 *
 * The memory is a memfd that gmt-schd makes and seals against shrinking,
 * handed out over a unix socket (SCM_RIGHTS) beside each ipc socket:
 * gmt-schd's at SCHD.sock.bell, each gmt-pmgr's at PMGR.sock.bell (it
 * passes on the one it fetched from gmt-schd, so that a container that
 * sees only its pod's folder gets the node's bell). The seal is checked
 * before the memory is mapped: whoever holds the fd can write the bell,
 * but nobody can shrink it under a mapping (a SIGBUS in every job). */
#ifndef GMT_BELL_H
#define GMT_BELL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define GMT_BELL_SLOTS 64
#define GMT_BELL_MAGIC 0x6c6c65622d746d67ULL /* "gmt-bell" */
#define GMT_BELL_VERSION 1
#define GMT_BELL_SUFFIX ".bell" /* the socket beside an ipc socket */
#define GMT_BELL_IO_TIMEOUT_MS 1000

typedef struct gmt_bell_slot {
  _Atomic int64_t until_ns; /* rings until then (CLOCK_MONOTONIC) */
  _Atomic uint64_t rings;   /* rings begun, for status and tests */
  /* After a hush, more work may follow until then: a batch launch whose
   * kernel would outlast what is left of it waits it out, a shorter one
   * goes (gmt_bell_stay). 0 in a bell of an older gmt-schd: no stay. */
  _Atomic int64_t stay_until_ns;
  char pad[40]; /* a cache line each: batch reads, latency writes */
} gmt_bell_slot_t;

typedef struct gmt_bell {
  uint64_t magic;
  uint32_t version, slots;
  char pad[48];
  gmt_bell_slot_t slot[GMT_BELL_SLOTS];
} gmt_bell_t;

/* gmt-schd: a new bell, sealed. Returns its fd, or -errno. */
int gmt_bell_create(void);

/* Maps the bell behind fd (kept open by the mapping's owner or closed:
 * the mapping stays). NULL with errno: EPERM when fd is not sealed against
 * shrinking, EPROTO when it is not a bell. */
gmt_bell_t *gmt_bell_map(int fd);

/* Rings slot dev until until_ns (a later ring stands). Returns the time it
 * rings until now. */
int64_t gmt_bell_ring(gmt_bell_t *b, int dev, int64_t until_ns);

/* Stops the ring of slot dev at now_ns if it is still the one that rang
 * until mine_ns (nobody rang longer since). */
void gmt_bell_hush(gmt_bell_t *b, int dev, int64_t mine_ns, int64_t now_ns);

/* Until when slot dev rings (in the past: quiet). */
static inline int64_t gmt_bell_until(const gmt_bell_t *b, int dev)
{
  return atomic_load_explicit(&((gmt_bell_t *)b)->slot[dev].until_ns, memory_order_relaxed);
}

/* Slot dev's stay: more latency work may follow until until_ns (a later
 * stay stands). */
void gmt_bell_stay(gmt_bell_t *b, int dev, int64_t until_ns);

/* Until when a batch launch whose kernel takes kernel_ns (0: not known)
 * waits on slot dev at now_ns: the ring's end while it rings; else the
 * stay's end if the kernel would outlast what is left of it (a request
 * that comes meanwhile would wait that long behind it, longer than the
 * batch pod waits for the stay); else now_ns (go). */
int64_t gmt_bell_wait_until(const gmt_bell_t *b, int dev, int64_t now_ns, int64_t kernel_ns);

/* The bell socket's path beside an ipc:// URL (or a plain path) in out.
 * -EINVAL when url is not ipc or too long. */
int gmt_bell_path(const char *url, char *out, size_t n);

/* Fetches the bell's fd from the socket at path, within GMT_BELL_IO_TIMEOUT_MS.
 * Returns the fd or -errno. */
int gmt_bell_fetch(const char *path);

/* Serves fds at path on a thread of its own: each connection gets the fd
 * that get() returns (one the server passes and then closes, or -errno:
 * the connection is closed without one). The socket is mode 0660, group
 * gid (-1: ours), as the daemons' ipc sockets are: whoever may ask the
 * daemon may ring (the seal makes the fd safe to hand out). A stale socket
 * file at path is replaced; a live one is -EADDRINUSE. */
typedef struct gmt_bell_server gmt_bell_server_t;
int gmt_bell_serve(gmt_bell_server_t **out, const char *path, long gid, int (*get)(void *arg),
                   void *arg);
/* Stops serving and removes the socket. NULL: nothing. */
void gmt_bell_serve_stop(gmt_bell_server_t *s);

#endif
