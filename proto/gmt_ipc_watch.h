/* Keeping a daemon's ipc listeners accepting (ipc_watch.c).
 *
 * nng 1.5's ipc transport stops accepting for good when a client hangs up
 * before the server has sent its half of the SP handshake: the send fails
 * with EPIPE, which nng reports as "closed", and its listener takes that
 * for its own close (nng issue #1518, fixed in nng 1.6; Debian 12 ships
 * 1.5.2). One connect-and-close by any process that may open the socket,
 * or a client killed while it dials, then leaves every later process of
 * the pod unable to reach its pod manager. A watch thread therefore asks
 * each ipc path something every period; a listener that does not answer
 * within the timeout is made again by the owner's callback. */
#ifndef GMT_IPC_WATCH_H
#define GMT_IPC_WATCH_H

#define GMT_IPC_WATCH_PERIOD_MS 500
#define GMT_IPC_WATCH_TIMEOUT_MS 1000

/* Whether a gmt server (nng's SP REP protocol) answers at the ipc socket
 * path within timeout_ms: 0, or -errno (-ETIMEDOUT: connected, no answer
 * came back: a listener that stopped accepting).
 * It completes the handshake and asks something (a frame that does not
 * decode: the server's nng threads answer it with an error, whatever its
 * own loop is doing), so that it never breaks what it probes and sees a
 * listener whose connections are taken but never served. */
int gmt_sp_probe_ipc(const char *path, int timeout_ms);

/* Makes listener `index` again; 0 or -errno. Called on the watch thread. */
typedef int (*gmt_ipc_relisten_cb)(void *data, int index);

typedef struct gmt_ipc_watch gmt_ipc_watch_t;

/* Starts a thread that probes paths[0..n) (the strings must live until
 * gmt_ipc_watch_stop) every period_ms, and calls relisten for one that
 * does not answer within timeout_ms. */
int gmt_ipc_watch_start(gmt_ipc_watch_t **out, char *const *paths, int n, int period_ms,
                        int timeout_ms, gmt_ipc_relisten_cb relisten, void *data);

/* Stops and joins the thread (at most one probe's timeout). NULL is fine. */
void gmt_ipc_watch_stop(gmt_ipc_watch_t *w);

#endif
