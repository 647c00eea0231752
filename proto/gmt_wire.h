/* The wire: envelopes (proto/gmt.proto) over nng REQ/REP.
 *
 * Client side: a call with a timeout, blocking or with a callback.
 * Server side: many outstanding requests at once (one nng context each),
 * each answered when its handler is ready, from any thread.
 *
 * Every function that can fail returns 0 or a negative code (gmt_error.h). */
#ifndef GMT_WIRE_H
#define GMT_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmt.pb-c.h"

#define GMT_PROTOCOL_VERSION 1u

#define GMT_DEFAULT_SCHD_IPC "ipc:///run/gmt/schd.sock"
/* Names gmt-schd for every program that dials it when its --schd is not
 * given: gmt, gmt-pmgr, gmt-device-plugin. */
#define GMT_SCHD_ENV "GMT_SCHD"
/* $GMT_SCHD when set and not empty, else NULL (the caller's default). */
const char *gmt_schd_from_env(void);
#define GMT_DEFAULT_SCHD_TCP "tcp://127.0.0.1:50051"
#define GMT_DEFAULT_PMGR_PORT 50052
/* A pod manager's ipc socket for its --port (printf with the port), and
 * the one a hook dials when GMT_PMGR is not set: the kernel names an ipc
 * caller at once, where a tcp:// one must be looked up (docs/security.md). */
#define GMT_PMGR_IPC_FMT "ipc:///run/gmt/pmgr-%ld.sock"
#define GMT_DEFAULT_PMGR "ipc:///run/gmt/pmgr-50052.sock"

/* The largest frame any socket accepts. A longer one closes its
 * connection before anything is allocated for it, so a peer cannot make a
 * daemon allocate what a frame header declares. The largest legitimate
 * messages (a status of the most pods and processes allowed, a trace reply)
 * are far below it: docs/protocol.md has the sizes. */
#define GMT_WIRE_MAX_FRAME (16u << 20)

/* The most processes one pod may have: a pod manager admits no more, and
 * gmt-schd refuses a heartbeat that lists more, so one message cannot hold
 * the scheduler's loop for long. */
#define GMT_POD_MAX_PROCESSES 4096

/* The most buffer histories one Advise may carry: gmt-schd records the
 * first this many and skips the rest, so that one message cannot hold the
 * scheduler's loop (and its store) for long. A hook with more sends them
 * in several calls. */
#define GMT_ADVISE_MAX_HISTORY 4096
/* The most hot nths an AdviseReply lists for one site. */
#define GMT_ADVISE_MAX_HOT_NTHS 4096

/* ---- envelopes ---- */

/* Packs env (its version is set to ours) into a new buffer owned by the
 * caller (free()). */
int gmt_wire_pack(const Gmt__Envelope *env, void **buf, size_t *len);

/* Unpacks a frame. GMT_EDECODE when it does not decode, GMT_EVERSION when
 * it comes from a newer protocol. *env is freed with gmt_wire_free(). */
int gmt_wire_unpack(const void *buf, size_t len, Gmt__Envelope **env);
void gmt_wire_free(Gmt__Envelope *env);

/* Sets env's body: msg under case c. Every body of the envelope is a
 * message pointer in one oneof, so this one function fills any of them
 * (a request or a reply). msg must be a message of the type that case c
 * carries, else -EINVAL and env is left as it was. msg is not copied: it
 * must live until env is packed. */
int gmt_wire_set_body(Gmt__Envelope *env, Gmt__Envelope__BodyCase c, const void *msg);

/* Checks that rep is of the expected case. An Error reply returns its code
 * and copies its text into errbuf (may be NULL); a wrong case returns
 * GMT_EUNEXPECTED. */
int gmt_wire_expect(const Gmt__Envelope *rep, Gmt__Envelope__BodyCase expect, char *errbuf,
                    size_t errlen);

/* ---- client ---- */

typedef struct gmt_client gmt_client_t;

enum {
  /* Dial now and fail at once if nobody listens (the hook wants this:
   * it must not wait for a pod manager that is not there), or with
   * -ETIMEDOUT after GMT_CLIENT_DIAL_MS if the peer does not complete the
   * handshake. Without it the dial goes on in the background and
   * reconnects with backoff. */
  GMT_CLIENT_DIAL_NOW = 1,
};

#define GMT_CLIENT_DIAL_MS 1000
/* How long closing waits for nng's close and the callbacks of calls in
 * flight, together. */
#define GMT_CLIENT_CLOSE_MS 2000

int gmt_client_open(gmt_client_t **c, const char *url, int flags);
/* Aborts calls in flight and waits until their callbacks have returned:
 * 0, and the client is freed. When nng's close or a callback has not
 * returned within GMT_CLIENT_CLOSE_MS (nng hangs or lost a completion, or
 * the callback blocks), that is logged and -ETIMEDOUT returned (nng's
 * close alone: logged, and the client freed). A callback may then still
 * run, and whatever it uses must outlive it; the last one frees the
 * client. */
int gmt_client_close(gmt_client_t *c);

/* Sends req and waits at most timeout_ms for the reply (-ETIMEDOUT).
 * On success *rep is the reply, freed with gmt_wire_free(). An Error reply
 * is returned as a reply, not as a failure: use gmt_wire_expect(). */
int gmt_client_call(gmt_client_t *c, const Gmt__Envelope *req, Gmt__Envelope **rep, int timeout_ms);

/* As above but returns at once; cb runs later on an nng thread with rc and
 * the reply (NULL on failure), which cb then owns. */
typedef void (*gmt_client_cb)(void *arg, int rc, Gmt__Envelope *rep);
int gmt_client_call_async(gmt_client_t *c, const Gmt__Envelope *req, int timeout_ms,
                          gmt_client_cb cb, void *arg);

/* A PinMode's name ("off", "profile", "use", "adaptive": resource-config's
 * pin= and gmt status), and back (-EINVAL when unknown). */
const char *gmt_pin_mode_name(int mode);
int gmt_pin_mode_parse(const char *name);

/* A PodClass's name ("batch", "latency": resource-config's class= and gmt
 * status), and back (-EINVAL when unknown). */
const char *gmt_pod_class_name(int c);
int gmt_pod_class_parse(const char *name);

/* A grant's terms besides its length (TokenReply's fields after quota_ms),
 * as gmt-schd sets them, a pod manager passes them on and the hook obeys
 * them (docs/protocol.md, "Token"). Zeroed: none. */
typedef struct gmt_token_terms {
  uint32_t queue_bound_us, idle_us, ahead_us, bell_max_us, turn_ms;
  uint32_t alone; /* TokenReply.alone: 1 or 0 */
} gmt_token_terms_t;
gmt_token_terms_t gmt_token_terms_of(const Gmt__TokenReply *r);
void gmt_token_terms_put(Gmt__TokenReply *r, gmt_token_terms_t t);

/* A MemMode's name ("strict", "swap", "um": resource-config's mode= and
 * gmt status), and back (-EINVAL when unknown). */
const char *gmt_mem_mode_name(int mode);
int gmt_mem_mode_parse(const char *name);
/* Whether a pod in mode moves its allocations between tiers (swap, um):
 * its resident bytes, not its reservations, occupy the GPU spaces. */
bool gmt_mem_mode_moves(int mode);

/* ---- server ---- */

typedef struct gmt_server gmt_server_t;
typedef struct gmt_call gmt_call_t; /* one request waiting for its reply */

/* Runs on an nng thread for each request that decoded. The call owns req
 * until it is answered; the handler (or whoever it hands the call to)
 * must answer every call exactly once with gmt_call_reply*(). */
typedef void (*gmt_server_cb)(void *arg, gmt_call_t *call, const Gmt__Envelope *req);

/* Connections one user other than root and the daemon's own may hold open
 * to a server; one more is closed at once. Enough for hundreds of
 * processes of a pod (a hooked process holds up to three), and far below
 * the descriptors the daemon has (gmt_daemon_raise_nofile). */
#define GMT_SERVER_MAX_PER_USER 1024

int gmt_server_new(gmt_server_t **s, int ncontexts, gmt_server_cb cb, void *arg);
/* Listens on url; ipc:// paths get their folder made, a stale socket
 * removed and mode 0660. May be called for several urls before gmt_server_start(). */
int gmt_server_listen(gmt_server_t *s, const char *url);
/* ipc sockets are made 0660; this gives them group gid (before listen). */
void gmt_server_set_ipc_group(gmt_server_t *s, int64_t gid);
int gmt_server_start(gmt_server_t *s);
/* Stops receiving, waits for callbacks in flight, removes ipc socket files.
 * Calls not yet answered are dropped. When nng's close has not returned
 * within GMT_SERVER_CLOSE_MS, that is logged and the server is left
 * allocated (nng may still call into it): for a daemon about to exit. */
#define GMT_SERVER_CLOSE_MS 2000
void gmt_server_free(gmt_server_t *s);

const Gmt__Envelope *gmt_call_request(const gmt_call_t *call);
/* Whether the connection the call came on has closed: its answer would
 * reach no one. A hooked process closes its connection when it gives up
 * on a call (hook/base/conn.c), and then takes the call as not done. */
bool gmt_call_caller_gone(const gmt_call_t *call);
/* Who sent the call, as the kernel says (gmt_peer.h; a struct gmt_peer).
 * want_pid: find a tcp peer's process too (a scan of /proc, once per
 * connection). -EPERM when the peer's user is unknown (not loopback, or
 * its socket not found): such a peer is trusted with nothing. */
struct gmt_peer;
int gmt_call_peer(const gmt_call_t *call, struct gmt_peer *out, bool want_pid);
/* Whether the caller's user is one a admits (gmt_peer.h) and, with
 * need_pid, its process is known; *peer is who it is. Otherwise answers
 * the call with -EPERM saying why, who (e.g. "gmt-schd") naming the daemon,
 * and returns -EPERM. */
struct gmt_admit;
int gmt_call_admit(gmt_call_t *call, const struct gmt_admit *a, const char *who, bool need_pid,
                   struct gmt_peer *peer);
int gmt_call_reply(gmt_call_t *call, const Gmt__Envelope *rep);
/* Answers with an envelope whose body is msg under case c (as
 * gmt_wire_set_body()): the usual reply, built in one place. */
int gmt_call_reply_body(gmt_call_t *call, Gmt__Envelope__BodyCase c, const void *msg);
int gmt_call_reply_error(gmt_call_t *call, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
