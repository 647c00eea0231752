/* A pod's config as both daemons hold it: gmt.proto's PodConfig, the one
 * shape from resource-config.txt to the hook. gmt-schd makes it from the
 * parsed file, gmt-pmgr keeps what the scheduler last said, and both log
 * a change with one diff. The diff reads the fields through the message's
 * descriptor, so a new key in PodConfig is compared and logged without a
 * change here. */
#ifndef GMT_PODCONFIG_H
#define GMT_PODCONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gmt.pb-c.h"

/* *dst, initialised (gmt__pod_config__init) or filled by an earlier call,
 * becomes an owned copy of src: its name and lists are dst's own, fields
 * a newer sender added are dropped. 0, or -ENOMEM with dst unchanged. */
int gmt_podcfg_copy(Gmt__PodConfig *dst, const Gmt__PodConfig *src);

/* Frees what gmt_podcfg_copy made dst own; dst is empty after. */
void gmt_podcfg_clear(Gmt__PodConfig *dst);

/* Whether a pod confined to devices (n of them; 0: every GPU) may use the
 * node's GPU device. */
bool gmt_podcfg_devices_allow(const int32_t *devices, size_t n, int32_t device);

/* devices as the config writes them, "0,1" ("all" for none: every GPU),
 * into buf; a list that does not fit ends in ",...". Returns buf. */
const char *gmt_podcfg_devices_str(const int32_t *devices, size_t n, char *buf, size_t len);

/* What differs from a to b, but the name, as "request 0.5 -> 0.3, mode
 * swap -> um" (each field by its gmt.proto name, memory_limit as
 * "memory"; enums by their config names; lists as devices_str writes
 * them), into buf (cut to len). Returns how many fields differ. */
size_t gmt_podcfg_diff(const Gmt__PodConfig *a, const Gmt__PodConfig *b, char *buf, size_t len);

#endif
