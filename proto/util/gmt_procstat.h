/* /proc/PID/stat, read once and split where it can be split: after the
 * process's name in parentheses, which may hold spaces and ')'. In proto/
 * because gmt-schd (its trace and its list of processes outside gmt) and
 * `gmt trace` all read it. */
#ifndef GMT_PROCSTAT_H
#define GMT_PROCSTAT_H

#include <stddef.h>
#include <stdint.h>

/* Reads pid's /proc/PID/stat into buf (len bytes) and returns the text
 * from field 3 (the state letter) on, fields separated by single spaces;
 * NULL when it cannot be read (no such process) or is malformed. */
const char *gmt_procstat_fields(uint32_t pid, char *buf, size_t len);

#endif
