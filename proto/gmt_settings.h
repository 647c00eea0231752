/* gmt's settings file (INI), read by gmt-schd (best-GPU selection, its
 * cache and probe) and by the gmt CLI (where the scheduler is): one file,
 * so that both ends agree (docs/devices.md, "Picking a GPU").
 *
 *   # comment (also ';'), blank lines skipped
 *   [server]
 *   addr = ipc:///run/gmt/schd.sock
 *   max-queued-requests = 32
 *   [daemon]
 *   max-cache-time-interval = 1s
 *   max-cache-request = 10
 *   probe = on
 *   probe-timeout = 3s
 *   pick-hold = 10s
 *
 * A key is "section.key": under a [section] header, or written whole
 * ("server.addr = ...") before any header. Each key at most once; an
 * unknown section or key, a line that is not `key = value`, or a bad value
 * is a "file:line: reason" error. A value runs to the end of the line (a
 * '#' or ';' after white space starts a comment). Durations are a number
 * with ms, s or min (no unit: seconds); booleans on/off, true/false,
 * yes/no, 1/0.
 *
 * Plain C with no dependency beyond libc: the CLI, the daemons and tests
 * link it (libgmtwire). */
#ifndef GMT_SETTINGS_H
#define GMT_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where the file is looked for when no path is given. */
#define GMT_SETTINGS_PATH "/etc/gmt/gmt.ini"
/* The largest file read: a settings file is a few lines. */
#define GMT_SETTINGS_MAX_BYTES (64u << 10)

#define GMT_SETTINGS_MAX_QUEUED_DEFAULT 32u
#define GMT_SETTINGS_MAX_QUEUED_MAX 4096u
#define GMT_SETTINGS_CACHE_MS_DEFAULT 1000u
#define GMT_SETTINGS_CACHE_MS_MAX 3600000u
#define GMT_SETTINGS_CACHE_REQUESTS_DEFAULT 10u
#define GMT_SETTINGS_CACHE_REQUESTS_MAX 1000000000u
#define GMT_SETTINGS_PROBE_TIMEOUT_MS_DEFAULT 3000u
#define GMT_SETTINGS_PROBE_TIMEOUT_MS_MAX 60000u
#define GMT_SETTINGS_PICK_HOLD_MS_DEFAULT 10000u
#define GMT_SETTINGS_PICK_HOLD_MS_MAX 3600000u

typedef struct gmt_settings {
  /* server.addr: where the scheduler answers (an ipc:// or tcp:// URL);
   * default GMT_DEFAULT_SCHD_IPC, the gmt CLI's own default. */
  char server_addr[256];
  bool server_addr_set; /* the file gave it (a --schd flag still wins) */
  /* server.max-queued-requests: Picks that may wait for a probe at once
   * (1 to 4096; default 32); one more is refused as busy. */
  uint32_t max_queued_requests;
  /* daemon.max-cache-time-interval: sampled device numbers are stale when
   * older than this (0: every Pick samples anew; default 1 s, at most 1 h). */
  uint64_t cache_max_age_ms;
  /* daemon.max-cache-request: ... or once they have served this many Picks
   * (1 to 10^9; 1: every Pick samples anew; default 10). */
  uint64_t cache_max_requests;
  /* daemon.probe: time a tiny memset on each GPU (gmt-probe) when the cache
   * is stale (default on); off scores without the probe delay. */
  bool probe;
  /* daemon.probe-timeout: how long gmt-probe may take in all (1 ms to 60 s;
   * default 3 s); a GPU it did not finish counts as the slowest. */
  uint64_t probe_timeout_ms;
  /* daemon.pick-hold: how long a GPU given by a Pick counts as one more
   * job on it, with the Pick's bytes reserved, so that jobs started
   * together are spread (0: not at all; default 10 s, at most 1 h). */
  uint64_t pick_hold_ms;
  /* The file they came from; "" for the built-in defaults. */
  char path[4096];
} gmt_settings_t;

/* The built-in defaults above. */
void gmt_settings_default(gmt_settings_t *s);

/* Parses text (len bytes, NUL not needed) over the defaults into *out;
 * path names it in messages. On success 0 and *errors (when errors is not
 * NULL) is NULL. On failure GMT_ECONFIG (or -ENOMEM), *out holds the
 * defaults, and *errors is a malloc'd text with one "path:line: reason\n"
 * per problem. */
int gmt_settings_parse(const char *path, const char *text, size_t len, gmt_settings_t *out,
                       char **errors);

/* Reads the file at path into *out. With path NULL: GMT_SETTINGS_PATH when
 * it exists, else the defaults (out->path ""). A named file that cannot be
 * read is an error (-errno, or -EINVAL for one that is not a regular file,
 * -EFBIG past GMT_SETTINGS_MAX_BYTES); errors as gmt_settings_parse. */
int gmt_settings_load(const char *path, gmt_settings_t *out, char **errors);

#endif
