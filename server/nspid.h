/* A process's pid on the node, from the pid its pod manager reported.
 *
 * A pod manager reports its processes by the pids of its own PID
 * namespace (the kernel gives SO_PEERCRED in the reader's), and in a
 * Kubernetes pod that namespace is the pod's. NVML and the tracer name
 * processes by the node's pids (gmt-schd's namespace: the DaemonSet runs
 * it with hostPID). The pod manager's own pid on the node comes with its
 * connection; the processes in its namespace are found under /proc by
 * their ns/pid link, and each one's NSpid line (its pid in every namespace
 * from /proc's down to its own) says which was reported.
 *
 * Reads only the /proc it is given, so that it is tested on a tree of
 * files (test/unit/test_nspid.c). */
#ifndef GMT_SERVER_NSPID_H
#define GMT_SERVER_NSPID_H

#include <stddef.h>
#include <stdint.h>

/* The node's pids of the processes the pod manager owner (a node pid)
 * calls pids[0..n), with one pass over proc ("/proc", or a test's tree):
 * nodes[i] is pids[i] itself when owner shares gmt-schd's PID namespace
 * (or owner is not known: 0 or less), else the pid of the process of
 * owner's namespace whose innermost pid is pids[i], 0 where there is none
 * (gone, or owner is). 0, or -errno when owner's namespace cannot be read
 * (every nodes[i] 0 then: a pid may name another process on the node). */
int gmt_nspid_nodes(const char *proc, int64_t owner, const uint32_t *pids, uint32_t *nodes,
                    size_t n);

#endif
