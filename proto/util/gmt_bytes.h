/* Byte counts as people write and read them: "512Mi", "1G" in
 * resource-config.txt, flags and `gmt run --bytes`; "1.5 GiB" in the CLI.
 * In proto/ because the daemons, the CLI and their tests all need them. */
#ifndef GMT_BYTES_H
#define GMT_BYTES_H

#include <stddef.h>
#include <stdint.h>

/* Parses "1073741824", "1G", "512Mi" (K, M, G, T, optionally with i; all
 * powers of 1024): 0, or -EINVAL (not a byte count) or -ERANGE (does not
 * fit in 64 bits). */
int gmt_parse_bytes(const char *s, uint64_t *out);

/* bytes for people: "512 B", "1.5 GiB". */
void gmt_human_bytes(char *buf, size_t len, uint64_t bytes);

/* a + b, UINT64_MAX when it would wrap: byte sums over pods, processes
 * and reports, which a false report must not wrap to a small number. */
static inline uint64_t gmt_bytes_add(uint64_t a, uint64_t b)
{
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

#endif
