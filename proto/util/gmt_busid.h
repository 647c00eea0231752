/* PCI bus ids as CUDA and NVML spell them. One device has several
 * spellings: "0000:17:00.0" (cuDeviceGetPCIBusId, NVML's busIdLegacy,
 * /sys), "00000000:17:00.0" (NVML's busId) and "17:00.0" (no domain, which
 * the driver takes too), in either case of hex digit. They are compared as
 * numbers, never as text. In proto/ because the daemon, topo/, the hook
 * and the fake driver all meet devices there; libc only, so the hook
 * gains no dependency. */
#ifndef GMT_BUSID_H
#define GMT_BUSID_H

#include <stdbool.h>

/* A buffer that holds any spelling the driver or NVML writes (NVML's
 * NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE). */
#define GMT_BUSID_SIZE 32

typedef struct gmt_busid {
  unsigned domain;   /* up to 32 bits, as NVML's nvmlPciInfo_t holds it */
  unsigned bus;      /* 0 to 0xff */
  unsigned device;   /* 0 to 0x1f */
  unsigned function; /* 0 to 7 */
} gmt_busid_t;

/* Parses "DOMAIN:BUS:DEVICE.FUNCTION" or "BUS:DEVICE.FUNCTION" (domain
 * 0): DOMAIN 1 to 8 hex digits, BUS 1 or 2, DEVICE 1 or 2 (at most 0x1f),
 * FUNCTION 1 (at most 7), and nothing else: no white space, sign, "0x" or
 * trailing character. 0, or -EINVAL (s NULL or not a bus id; *out then
 * untouched). */
int gmt_busid_parse(const char *s, gmt_busid_t *out);

static inline bool gmt_busid_equal(const gmt_busid_t *a, const gmt_busid_t *b)
{
  return a->domain == b->domain && a->bus == b->bus && a->device == b->device &&
         a->function == b->function;
}

#endif
