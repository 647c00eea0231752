/* What `gmt run` execs with (client/cli/cmd_run.c): its options, the
 * LD_PRELOAD that puts the hook in, and where the hook is. Pure apart
 * from looking at files, so that test/unit can check it. */
#ifndef GMT_RUN_ENV_H
#define GMT_RUN_ENV_H

#include <stddef.h>
#include <stdint.h>

#define GMT_RUN_TIMEOUT_MS 5000 /* the dial and the Pick together */
#define GMT_RUN_MAX_COUNT 64    /* the most GPUs one --count may ask */

typedef struct gmt_run_opts {
  const char *pod;    /* --pod: run CMD under the hook, in this pod */
  const char *pmgr;   /* --pmgr: the pod manager's address (else $GMT_PMGR) */
  const char *config; /* --config: the settings file (server.addr) */
  int auto_device;    /* --auto-device: ask gmt-schd for the best GPUs */
  uint32_t count;     /* --count: how many GPUs (1 unless given) */
  uint64_t bytes;     /* --bytes: free memory they must have (0: any) */
  int timeout_ms;     /* --timeout: bound on reaching gmt-schd and its answer */
  int quiet;          /* -q: no line about the pick */
  char **cmd;         /* CMD and its arguments, NULL-terminated (argv's) */
} gmt_run_opts_t;

/* Parses `run`'s arguments (argv[0] is "run"; argv[argc] must be NULL).
 * Options come first; CMD starts after "--" or at the first argument that
 * is not an option. 0 parsed; 1 help was asked; -EINVAL with the reason
 * in err. */
int gmt__run_parse(int argc, char **argv, gmt_run_opts_t *o, char *err, size_t errlen);

/* LD_PRELOAD for CMD: hook (a path, or a list such as "libasan.so:hook")
 * in front of old (the current LD_PRELOAD, may be NULL), unless old
 * already names a libgmthook.so (a nested gmt run, a pod whose webhook put
 * it there): then old as it is. 0, or -ENOSPC when out is too small. */
int gmt__run_preload(const char *hook, const char *old, char *out, size_t len);

/* Where libgmthook.so is, as LD_PRELOAD wants it, first found of:
 *   hook_lib ($GMT_HOOK_LIB): that file, as given;
 *   build_dir ($GMT_BUILD_DIR): its hook/preload.txt (which puts the ASan
 *     runtime first in a sanitized build), else its hook/libgmthook.so;
 *   beside exe (this gmt): ../hook/preload.txt or ../hook/libgmthook.so
 *     (a build tree: build/client/gmt), ../lib/libgmthook.so (installed:
 *     PREFIX/bin/gmt).
 * A variable that is set must name what it promises: a hook_lib that is
 * not a readable file, or a build_dir without the hook, is an error, not a
 * reason to look elsewhere. 0; -ENOENT with what was looked at in err. */
int gmt__run_find_hook(const char *hook_lib, const char *build_dir, const char *exe, char *out,
                       size_t len, char *err, size_t errlen);

#endif
