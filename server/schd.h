/* gmt-schd's state: one struct, owned by the libuv loop thread. Only the
 * inbox is touched from other threads (nng's hand it the requests). */
#ifndef GMT_SERVER_SCHD_H
#define GMT_SERVER_SCHD_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <uv.h>

#include "config.h"
#include "config_watch.h"
#include "gmt_bytes.h"
#include "gmt_inbox.h"
#include "gmt_peer.h"
#include "gmt_wire.h"
#include "pods.h"
#include "store.h"
#include "token.h"

/* Whether a line logged at most once every GMT_SAY_PERIOD_MS may be
 * logged now (*said_ms: when it last was, 0 never); if so, now is noted.
 * A process that repeats a refused request or a report past its grants
 * every few ms would otherwise fill the log. */
#define GMT_SAY_PERIOD_MS 10000
static inline bool gmt__say_now(uint64_t *said_ms, uint64_t now_ms)
{
  if (*said_ms && now_ms - *said_ms < GMT_SAY_PERIOD_MS)
    return false;
  *said_ms = now_ms ? now_ms : 1;
  return true;
}

/* A --disk-tier: the folder where spill files are to go, and its space's
 * bytes (DISK space i is disks[i]). */
#define GMT_SCHD_MAX_DISK_TIERS 16
typedef struct gmt_disk_tier {
  char dir[PATH_MAX];
  uint64_t bytes;
  uint64_t fs_free; /* free on its filesystem at start */
} gmt_disk_tier_t;

/* How the last read of the -c file went (Status: ConfigStatus). */
#define GMT_SCHD_RELOAD_ERROR_MAX 1024
typedef struct gmt_config_health {
  bool ok;
  double read_unix, ok_unix;             /* the last read; the last good one */
  char error[GMT_SCHD_RELOAD_ERROR_MAX]; /* the last failed read's messages */
} gmt_config_health_t;

#define GMT_SCHD_MAX_BELLS 16

typedef struct gmt_schd {
  uv_loop_t *loop;
  gmt_config_t *cfg;
  const char *config_path;
  gmt_config_health_t config_health;
  gmt_pods_t *pods;
  gmt_store_t *store;
  gmt_server_t *server;
  uint64_t pod_timeout_ms;
  gmt_admit_t admit;     /* the users whose pod managers may speak for pods */
  uint64_t pinned_limit; /* the node's pinned host memory budget (--pinned-limit) */
  /* --host-tier was given, or a --disk-tier: swap's moves are bounded by
   * the host space's room (rpc_tiers.c); else host memory is unbounded. */
  bool swap_host_bounded;
  /* Memory tiers (tiers.h), built at start by main.c from --gpu-capacity,
   * --host-tier, --disk-tier and the thresholds; rpc_tiers.c shows them in
   * Status. Nothing places or moves memory with it yet; its HOST space is
   * apart from pinned_ledger. */
  struct gmt_tiers *tiers;
  gmt_disk_tier_t disks[GMT_SCHD_MAX_DISK_TIERS];
  int ndisks;

  gmt_inbox_t inbox; /* nng threads -> loop: the requests */

  struct gmt_tokens *tokens;       /* rpc_token.c: GPU time tokens */
  gmt_token_params_t token_params; /* --window-ms, --base-quota-ms, --min-quota-ms */
  struct gmt_ledger *ledger;       /* rpc_memory.c: memory reservations */
  struct gmt_swap *swap;           /* rpc_swap.c: mode=swap's resident bytes, targets */
  struct gmt_turns *turns;         /* rpc_swap_turn.c: swap pods' turns, cards' switch rates */
  /* rpc_memory.c keeps it in step with the pods, rpc_pin.c charges it:
   * the host memory pinned on advice, against pinned_limit. */
  struct gmt_ledger *pinned_ledger;
  struct gmt_pin_profiles *pin_profiles; /* rpc_pin.c: pin=use's profiles */
  struct gmt_trace *trace;               /* rpc_trace.c: the node's eBPF tracer */
  struct gmt_devices *devices;           /* rpc_devices.c: the node's GPUs (devices.h) */
  struct gmt_pick *pick;                 /* rpc_pick.c: best-GPU selection */
  struct gmt_procmem *procmem;           /* rpc_pod_devices.c: NVML's use per process */
  gmt_config_watch_t *cwatch;            /* main.c reloads the config when it says */
  struct gmt_metrics *metrics;           /* http_metrics.c: GET /metrics; NULL: not served */
  /* The bell (gmt_bell.h): its memfd, -1 when it could not be made, and
   * its sockets beside the ipc ones (main.c). */
  int bell_fd;
  struct gmt_bell_server *bells[GMT_SCHD_MAX_BELLS];
  int nbells;

  uv_timer_t expiry; /* disconnects silent pods */
  uv_signal_t sigterm, sigint, sighup;
  bool stopping;
} gmt_schd_t;

/* Answers one request (rpc.c); the loop thread only. */
void gmt__rpc_handle(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req);

/* ---- rpc_token.c: GPU time tokens ---- */
int gmt__tokens_init(gmt_schd_t *s);
void gmt__tokens_close(gmt_schd_t *s);
void gmt__rpc_token(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req);
void gmt__rpc_token_watch(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req);
/* The pod's process set or connection changed (heartbeat, expiry, reload):
 * a token held by a process that is gone is taken back. Pods are found by
 * name: gmt_pods_reload() may move them. */
void gmt__tokens_pod_changed(gmt_schd_t *s, const gmt_pod_t *pod);
void gmt__tokens_status(gmt_schd_t *s, const gmt_pod_t *pod, Gmt__PodStatus *ps);
/* For each device with a token: whether pod holds it, and pod's usage
 * there over the window (the per-device part of gpu_time_share). */
typedef void (*gmt__tokens_dev_fn)(void *arg, int device, bool holds, double share);
void gmt__tokens_pod_devices(gmt_schd_t *s, const char *pod, gmt__tokens_dev_fn fn, void *arg);
/* Whether pod holds device's token now (its grant runs, or drains). */
bool gmt__tokens_holds(gmt_schd_t *s, const char *pod, int device);
/* Whether a Token call of pod waits for device's token now. */
bool gmt__tokens_waits(gmt_schd_t *s, const char *pod, int device);
/* Whether pod's grant on device was cut short within the last
 * GMT_TOKEN_DRAIN_MAX_MS and pod has not been granted there since: it has
 * work, and asks again once its queued work is done. */
bool gmt__tokens_cut(gmt_schd_t *s, const char *pod, int device);
/* When pod's last grant on device ended (-INFINITY: never, or forgotten). */
double gmt__tokens_last_run(gmt_schd_t *s, const char *pod, int device);
/* How many Token calls wait for device's token now; *holder: the pod
 * holding it (NULL: free), valid until the loop runs again. */
unsigned gmt__tokens_device(gmt_schd_t *s, int device, const char **holder);

/* ---- rpc_memory.c: the memory ledgers (device, and pinned host) ---- */
int gmt__ledger_init(gmt_schd_t *s);
void gmt__ledger_close(gmt_schd_t *s);
void gmt__rpc_reserve(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req);
void gmt__rpc_release(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req);
void gmt__rpc_meminfo(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req);
/* As gmt__tokens_pod_changed: reservations and advised pins of processes
 * that are gone are reclaimed, and the pod's reports are held to what the
 * ledgers granted (reports.h). */
void gmt__ledger_pod_changed(gmt_schd_t *s, gmt_pod_t *pod);
/* memory_reserved and pinned_advised of the pod and its processes (after
 * they are filled in), and the node's pinned_advised. */
void gmt__ledger_status(gmt_schd_t *s, const gmt_pod_t *pod, Gmt__PodStatus *ps);
void gmt__ledger_host_status(gmt_schd_t *s, Gmt__HostStatus *host);

/* ---- rpc_tiers.c: the memory tiers ---- */
/* host->tiers: every space of s->tiers, in the order declared. It is one
 * allocation: the caller free()s host->tiers once the reply is sent.
 * 0 or -ENOMEM. */
int gmt__tiers_host_status(gmt_schd_t *s, Gmt__HostStatus *host);
/* Room left on device's GPU space (--gpu-capacity) for more device
 * reservations, after those of the device ledger and the swap processes'
 * resident bytes; -ENOENT when no capacity was declared for it. */
int gmt__tiers_device_room(gmt_schd_t *s, int device, uint64_t *room);
/* Who holds device's GPU space, the most first, in words for a refusal
 * ("'a' 700.0 MiB, 'c' 64.0 MiB resident and 2 more": the first
 * GMT_TIERS_HOLDERS_SAID; a swap pod's resident bytes), into buf;
 * returns how many pods hold some. */
#define GMT_TIERS_HOLDERS_SAID 3
size_t gmt__tiers_holders(gmt_schd_t *s, int device, char *buf, size_t len);
/* The device's GPU space as mode=swap sees it: its limit, what occupies
 * it besides the swap processes' resident bytes (the device reservations
 * of pods not in swap mode), and its
 * downgrade thresholds in bytes (trigger and stop may be NULL). -ENOENT
 * when no capacity was declared for it. */
int gmt__tiers_gpu_space(gmt_schd_t *s, int device, uint64_t *limit, uint64_t *base,
                         uint64_t *trigger, uint64_t *stop);
/* Logs a warning for each GPU space that the quotas of the strict pods
 * that may use it (config.h, gmt_config_quotas_on) pass: at start and
 * after each reload (main.c). Status shows the same (TierSpace). */
void gmt__tiers_check_quotas(gmt_schd_t *s);
/* Where swap processes' moved bytes may go now: the host space's room,
 * and the first disk space's room and folder ("" and 0 without one).
 * False when unbounded: no --host-tier and no --disk-tier given (the host
 * space's default, the pinned limit, is pin advice's budget: swapping is
 * not held to it unless asked). */
bool gmt__tiers_swap_rooms(gmt_schd_t *s, uint64_t *host_room, uint64_t *disk_room,
                           const char **spill_dir);

/* ---- rpc_swap.c: mode=swap's resident bytes and eviction targets ---- */
int gmt__swap_init(gmt_schd_t *s);
void gmt__swap_close(gmt_schd_t *s);
void gmt__rpc_resident(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req);
/* As gmt__ledger_pod_changed: the resident bytes and targets of processes
 * (and pods) that are gone, or no longer in swap mode, are dropped; after
 * a restart what the processes report is taken in. */
void gmt__swap_pod_changed(gmt_schd_t *s, const gmt_pod_t *pod);
/* reply->evict: the targets pending for pod's processes (one allocation:
 * the caller free()s reply->evict once the reply is sent), and
 * reply->prepare when they are to prepare host copies. 0 or -ENOMEM. */
int gmt__swap_heartbeat_evicts(gmt_schd_t *s, const gmt_pod_t *pod, Gmt__HeartbeatReply *reply);

/* ---- rpc_swap_turn.c: mode=swap pods' turns (swap_turn.h) ---- */
int gmt__turns_init(gmt_schd_t *s);
void gmt__turns_close(gmt_schd_t *s);
/* What a turn's plan asks of the tokens (rpc_token.c's answers, passed
 * in: the token calls the turns, never the other way): whether pod waits
 * for device's token, holds it, and when its last grant there ended. */
typedef struct gmt__turns_tokens {
  bool (*waits)(gmt_schd_t *s, const char *pod, int device);
  bool (*holds)(gmt_schd_t *s, const char *pod, int device);
  double (*last_run)(gmt_schd_t *s, const char *pod, int device);
} gmt__turns_tokens_t;
/* The turn a token decision plans for a waiting pod on device (its
 * TokenRequest turn no longer counts): ms, 0 when it has none (not
 * mode=swap, nothing to bring back, or it fits beside what the card holds
 * and what its rivals will grow to). */
double gmt__turns_plan(gmt_schd_t *s, const gmt__turns_tokens_t *tok, const char *pod, int device);
/* Whether pod wakes on device: it ran there since its processes came,
 * then nothing for its idle-out (at least GMT_SWAP_RIVAL_MS; never with
 * idle-out=0 or off), and has bytes off the card to bring back (an
 * inference pod moved out while idle). Its new launch may cut a swap
 * turn short (gmt_token_cand_t). */
bool gmt__turns_waking(gmt_schd_t *s, const gmt__turns_tokens_t *tok, const char *pod, int device);
/* Whether a pod other than holder, not waiting for device now, with
 * memory there, may wake within_ms from now (a grant's length): its
 * idle-out ends by then (gmt__turns_waking; what it holds on the card may
 * be moved out for the holder meanwhile). The holder's grant then bounds
 * its queued work (gmt-schd --wake-queue-ms), so that the waking pod does
 * not wait for it. The grant's terms are set at its start: an 8 GiB
 * inference pod that went idle after a training job's 10 s turn began
 * woke within it (H200). */
bool gmt__turns_may_wake(gmt_schd_t *s, const gmt__turns_tokens_t *tok, const char *holder,
                         int device, double within_ms);
/* pod was granted device's token: a turn that brings bytes back is
 * counted, its plan kept for status, and the card's switch timed. */
void gmt__turns_granted(gmt_schd_t *s, const gmt__turns_tokens_t *tok, const char *pod, int device);
/* pod's resident bytes on device rose by raised (a Resident call): the
 * switch being timed has claimed its room once all it had moved off is
 * claimed back; memory that came back outside a timed switch (before a
 * grant; restore: the call brought memory back,
 * ResidentRequest.at_least) counts a turn. */
void gmt__turns_resident(gmt_schd_t *s, const char *pod, int device, uint64_t raised, bool restore);
/* pod's processes reported: a switch to it that claimed its room ends
 * once they say its bytes are on the card; with none left, the most it
 * held on each card is forgotten. */
void gmt__turns_reported(gmt_schd_t *s, const gmt_pod_t *pod);
/* Status: e's (its device set) and t's (a GPU space, device) turn fields. */
void gmt__turns_pod_status(gmt_schd_t *s, const char *pod, Gmt__PodDeviceStatus *e);
void gmt__turns_space_status(gmt_schd_t *s, int device, Gmt__TierSpace *t);
/* After a reload: pods no longer in swap mode are forgotten. */
void gmt__turns_forget(gmt_schd_t *s);

/* ---- rpc_pin.c: pin advice ---- */
int gmt__pin_init(gmt_schd_t *s);
void gmt__pin_close(gmt_schd_t *s);
void gmt__rpc_advise(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req);
/* The pod's parts of the node's pinned budget (docs/pinning.md,
 * "Shares"), split over the pods that run (connected, and pod itself):
 * *share, what its pins on advice and its programs' own pins together may
 * reach (0 for a pod whose pin= is off); *own, what its programs' own pins
 * may count. */
void gmt__pin_shares(gmt_schd_t *s, const gmt_pod_t *pod, uint64_t *share, uint64_t *own);

/* All of the above, for one pod or (pod NULL) for every pod. */
void gmt__pods_changed(gmt_schd_t *s, gmt_pod_t *pod);

/* ---- rpc_pod_devices.c: a pod per GPU, context memory (docs/devices.md) ---- */
/* ps->devices (one allocation: gmt__pod_devices_free() once the reply is
 * sent) and the context_bytes of ps and its processes, after the ledger's
 * and the tokens' parts are filled. 0 or -ENOMEM. */
int gmt__pod_devices_status(gmt_schd_t *s, const gmt_pod_t *pod, Gmt__PodStatus *ps);
void gmt__pod_devices_free(Gmt__PodStatus *ps);
void gmt__pod_devices_close(gmt_schd_t *s);
/* The GPU processes NVML lists that are no pod's process (by node pid) and
 * not gmt-schd's own children (its probes): st->unmanaged, sorted by pid,
 * in one allocation (*mem: free() it once the reply is sent). 0 or
 * -ENOMEM; none without NVML. */
int gmt__unmanaged_status(gmt_schd_t *s, Gmt__StatusReply *st, void **mem);

/* ---- rpc_devices.c: the node's GPUs (docs/devices.md) ---- */
int gmt__devices_init(gmt_schd_t *s);
void gmt__devices_close(gmt_schd_t *s);
/* Devices: CUDA's bus ids to the node's indices. */
void gmt__rpc_devices(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req);

/* ---- rpc_pick.c: best-GPU selection (docs/devices.md, "Picking a GPU") ---- */
/* Reads the settings file (settings_path, or GMT_SETTINGS_PATH when it
 * exists; its errors are logged): GMT_ECONFIG for a bad one. */
int gmt__pick_init(gmt_schd_t *s, const char *settings_path);
/* Kills a probe still running; Picks waiting for it are dropped with the
 * server's calls. */
void gmt__pick_close(gmt_schd_t *s);
void gmt__rpc_pick(gmt_schd_t *s, gmt_call_t *call, const Gmt__Envelope *req);
/* st->devices: every GPU as sampled for Pick (the cache while it is young,
 * else NVML now with the last probe's delays), scored against each other.
 * The memory is kept until the next call or gmt__pick_close. */
void gmt__pick_status(gmt_schd_t *s, Gmt__StatusReply *st);

/* ---- status.c: the Status view (Status sends it, /metrics renders it) ---- */
typedef struct gmt__status {
  Gmt__StatusReply reply; /* points into the rest: never copy or move the struct */
  /* private: what reply points into */
  Gmt__HostStatus host;
  Gmt__PodStatus *ps, **psp;
  Gmt__PodConfig *pcs;
  Gmt__ProcessStatus *pr, **prp;
  Gmt__ProcessCounters *pc; /* pr[k].counters: copies, the ledgers' parts written over */
  Gmt__ProcessCounters *pt; /* ps[i].totals */
  Gmt__ProcessCounters ht;  /* host.totals */
  Gmt__ConfigStatus config; /* host.config */
  void *unmanaged;          /* reply.unmanaged's one allocation */
  size_t npods;
} gmt__status_t;
/* st->reply: the node now, as Status answers (loop thread; the GPUs'
 * part stays valid until the next build). 0 or -ENOMEM; either way
 * gmt__status_free(st) after. */
int gmt__status_build(gmt_schd_t *s, gmt__status_t *st);
void gmt__status_free(gmt__status_t *st);

/* ---- http_metrics.c: GET /metrics for Prometheus (docs/operators.md) ---- */
/* Serves /metrics on addr (HOST:PORT, checked by gmt_metrics_addr_parse()
 * in metrics.h), once the loop and the inbox run. When it cannot
 * (the port is taken, a name that does not resolve) it logs why as an
 * error and returns the code: the daemon schedules on without metrics. */
int gmt__metrics_start(gmt_schd_t *s, const char *addr);
/* Stops serving (stop(), before the inbox closes); scrapes waiting get
 * 503. Nothing when not serving. */
void gmt__metrics_stop(gmt_schd_t *s);

#endif
