/* resource-config.txt (Gemini's format): which pods may use this node and
 * with what shares.
 *
 *   N                                    number of pods
 *   ID REQUEST LIMIT GPU_MEM [key=value]...  one line per pod
 *
 * ID is 1..62 characters of [A-Za-z0-9._-], unique. 0 <= REQUEST <= LIMIT
 * <= 1 are decimal numbers. GPU_MEM is a byte count, optionally with a
 * suffix K, M, G, T or Ki, Mi, Gi, Ti (any case; all powers of 1024).
 * After GPU_MEM come optional key=value fields, each key at most once
 * (an unknown key or a bad value is an error): pin=off|profile|use|adaptive
 * (pin advice for host buffers; default off), mode=strict|swap|um (how the
 * pod's device memory is held, docs/tiers.md; default strict),
 * class=batch|latency (whose work goes first on a GPU: a latency pod with
 * work before every batch pod, within its LIMIT; default batch),
 * devices=0,1 (the node's GPUs, NVML indices, the pod may use, in
 * ascending order, each once, at most GMT_CONFIG_MAX_DEVICES of them, each
 * at most GMT_CONFIG_DEVICE_MAX; empty or absent: every GPU;
 * docs/devices.md).
 * Blank lines and lines starting with '#' are skipped. At most
 * GMT_CONFIG_MAX_PODS pods; requests that add up to more than 1 are logged
 * as a warning. */
#ifndef GMT_SERVER_CONFIG_H
#define GMT_SERVER_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmt.pb-c.h"

#define GMT_POD_NAME_MAX 62
/* devices=: at most this many GPUs, each index at most GMT_CONFIG_DEVICE_MAX. */
#define GMT_CONFIG_MAX_DEVICES 64
#define GMT_CONFIG_DEVICE_MAX 1023
/* idle-out= when a pod line has none, and the most it may say (a day). */
#define GMT_IDLE_OUT_DEFAULT_MS 30000
#define GMT_IDLE_OUT_MAX_MS 86400000

typedef struct gmt_pod_config {
  char name[GMT_POD_NAME_MAX + 1];
  double request;        /* guaranteed share of GPU time */
  double limit;          /* most GPU time it may take */
  uint64_t memory_limit; /* bytes of device memory */
  int pin;               /* pin=: a Gmt__PinMode (gmt_pin_mode_name()) */
  int mode;              /* mode=: a Gmt__MemMode (gmt_mem_mode_name()); strict is the
                          * hard quota on the device, swap lets gmt move the pod's
                          * allocations to host or disk, um backs them with unified
                          * memory (docs/tiers.md). */
  int klass;             /* class=: a Gmt__PodClass (gmt_pod_class_name()) */
  /* idle-out=: ms a swap pod that does not wait for a GPU must have run
   * nothing there before its memory moves out for others (-1: off). */
  int64_t idle_out_ms;
  /* devices=: the node's GPUs it may use, ascending, no duplicates
   * (int32_t: PodConfig.devices points at them); ndevices 0: every GPU. */
  int32_t devices[GMT_CONFIG_MAX_DEVICES];
  size_t ndevices;
  int line; /* where it was read, for messages */
} gmt_pod_config_t;

typedef struct gmt_config {
  char *path;
  size_t npods;
  gmt_pod_config_t *pods; /* sorted by name */
} gmt_config_t;

/* The most pods a config may list, and the largest file read. Checking a
 * file costs time that grows with the square of its pods, so a bigger one
 * is refused at once. */
#define GMT_CONFIG_MAX_PODS 4096
#define GMT_CONFIG_MAX_BYTES (16u << 20)

/* Opens path for reading without blocking (a FIFO with no writer would
 * hold the loop): a regular file of at most GMT_CONFIG_MAX_BYTES only.
 * Returns the descriptor, or a negative code and *why says what is wrong
 * ("a FIFO", "cannot open", ...). */
int gmt_config_open(const char *path, const char **why);

/* Reads path. On success returns 0, *out is the config (gmt_config_free())
 * and *errors is NULL. On failure *out is NULL and *errors (when errors is
 * not NULL) is a malloc'd text with one "file:line: what is wrong" per line,
 * every line ending in '\n'; the return is GMT_ECONFIG for a bad file, or a
 * negative errno when it cannot be read. */
int gmt_config_load(const char *path, gmt_config_t **out, char **errors);

/* As gmt_config_load, from text in memory; path only names it in messages. */
int gmt_config_parse(const char *path, const char *text, size_t len, gmt_config_t **out,
                     char **errors);

void gmt_config_free(gmt_config_t *cfg);

/* The pod named name, or NULL. */
const gmt_pod_config_t *gmt_config_find(const gmt_config_t *cfg, const char *name);

/* Whether the pod may use the node's GPU `device` (devices=; every GPU
 * when it names none). */
bool gmt_pod_config_allows(const gmt_pod_config_t *pod, int device);

/* The quotas (GPU_MEM) of the pods that may use the node's GPU `device`
 * (devices=; one without it may use every GPU) and whose memory moves
 * (moves: mode=swap or um) or not (strict mode), summed, at most
 * UINT64_MAX: what they may hold there at once. When pods is not NULL,
 * the indices in cfg->pods of those pods go there (room for cfg->npods)
 * and their count in *npods. */
uint64_t gmt_config_quotas_on(const gmt_config_t *cfg, int device, bool moves, size_t *pods,
                              size_t *npods);

/* The pod's devices= as "0,1" ("all" for every GPU) into buf; a list
 * that does not fit ends in "...". Returns buf. */
const char *gmt_pod_config_devices_str(const gmt_pod_config_t *pod, char *buf, size_t len);

/* The pod's config as the wire carries it, the shape both daemons share
 * (gmt_podconfig.h): a view whose name and devices point into pod. */
void gmt_pod_config_wire(const gmt_pod_config_t *pod, Gmt__PodConfig *pc);

#endif
