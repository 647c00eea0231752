/* The memory ledger: device memory reserved by each process of each pod,
 * the one truth about who holds what against the pods' quotas.
 *
 * A pod's quota (GPU_MEM in resource-config.txt) is its total across every
 * device of the node: the sum of what all its processes hold on all
 * devices. Bytes are kept per process and per device so that a process
 * that goes away gives back exactly what it held.
 *
 * Pure bookkeeping: no loop, no wire, no config. The caller passes the
 * limit in force at each reservation (so a reload applies to the next one)
 * and the list of live processes when it changes. Unit tested by
 * test/unit/test_ledger.c. */
#ifndef GMT_SERVER_LEDGER_H
#define GMT_SERVER_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Devices 0..GMT_LEDGER_DEVICES-1 are kept apart; bytes adopted from a
 * report (which carries one total) are kept without a device. */
#define GMT_LEDGER_DEVICES 64

typedef struct gmt_ledger gmt_ledger_t;

int gmt_ledger_new(gmt_ledger_t **out);
void gmt_ledger_free(gmt_ledger_t *l);

/* Adds bytes for pid on device when the pod's total stays within limit:
 * reserved + bytes <= limit, so a reservation that fits exactly succeeds.
 * Returns 0, GMT_EQUOTA (nothing changes), -EINVAL (device out of range)
 * or -ENOMEM. *pod_total (may be NULL) is the pod's total afterwards (or
 * now, on failure). */
int gmt_ledger_reserve(gmt_ledger_t *l, const char *pod, uint32_t pid, int device, uint64_t bytes,
                       uint64_t limit, uint64_t now_ms, uint64_t *pod_total);

/* Takes up to bytes from what pid holds on device (then from what it holds
 * without a device), never below zero. Returns how many bytes it took. */
uint64_t gmt_ledger_release(gmt_ledger_t *l, const char *pod, uint32_t pid, int device,
                            uint64_t bytes);

uint64_t gmt_ledger_pod_total(const gmt_ledger_t *l, const char *pod);
/* The sum over every pod (saturating): the node's total, for a ledger
 * whose limit is the node's (the pinned host memory of pin advice). */
uint64_t gmt_ledger_node_total(const gmt_ledger_t *l);
/* The sum over every pod on one device (saturating); bytes adopted from a
 * report with no device known are not in it. */
uint64_t gmt_ledger_device_total(const gmt_ledger_t *l, int device);
/* The same over the pods for which count(arg, pod) is true (NULL: all). */
uint64_t gmt_ledger_device_total_if(const gmt_ledger_t *l, int device,
                                    bool (*count)(void *arg, const char *pod), void *arg);
uint64_t gmt_ledger_pid_total(const gmt_ledger_t *l, const char *pod, uint32_t pid);
/* What the pod's processes hold on one device (saturating): the pod's part
 * of gmt_ledger_device_total; bytes adopted without a device are not in
 * it, and a device out of range holds 0. */
uint64_t gmt_ledger_pod_device_total(const gmt_ledger_t *l, const char *pod, int device);
/* Whether pid has an entry: it reserved (or was adopted) since it joined,
 * even if it holds nothing now. */
bool gmt_ledger_knows(const gmt_ledger_t *l, const char *pod, uint32_t pid);

/* Called for each process that is forgotten with what it held. */
typedef void (*gmt_ledger_reclaim_fn)(void *arg, const char *pod, uint32_t pid, uint64_t bytes);

/* A process that reserved but was never listed by a heartbeat is kept for
 * this long (its Reserve may overtake the heartbeat that lists it). */
#define GMT_LEDGER_GRACE_MS 2000

/* Keeps the entries of the pids listed (pids need not be sorted) and
 * reclaims every other process of the pod (but those in their grace
 * period). Times are monotonic ms. Returns the bytes reclaimed. */
uint64_t gmt_ledger_retain(gmt_ledger_t *l, const char *pod, const uint32_t *pids, size_t npids,
                           uint64_t now_ms, gmt_ledger_reclaim_fn fn, void *arg);

/* Reclaims every pod for which keep(arg, name) is false (a pod removed
 * from the config). Returns the bytes reclaimed. */
uint64_t gmt_ledger_retain_pods(gmt_ledger_t *l, bool (*keep)(void *arg, const char *pod),
                                gmt_ledger_reclaim_fn fn, void *arg);

/* Rebuilding after a restart or a reconnection: a process reports what it
 * holds. A pid the ledger does not know gets bytes; with at_least, a known
 * pid that holds less is raised to bytes (the first report of a pod after
 * the ledger lost track of it, which may cross a reservation made
 * meanwhile). Nothing is refused (the memory is already allocated), but a
 * report is believed only as far as limit, what the pod may hold: the
 * pod's total stays within it. Returns the bytes added. */
uint64_t gmt_ledger_adopt(gmt_ledger_t *l, const char *pod, uint32_t pid, uint64_t bytes,
                          bool at_least, uint64_t limit);

/* Whether the pod's entries are in step with its pod manager's reports;
 * cleared when the pod is forgotten (disconnect), set by the caller once
 * it has adopted a first report. A pod the ledger has no entry for is not
 * synced. */
bool gmt_ledger_synced(const gmt_ledger_t *l, const char *pod);
int gmt_ledger_set_synced(gmt_ledger_t *l, const char *pod, bool synced);

#endif
