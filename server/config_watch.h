/* Watches a config file and calls its owner back when the file's content
 * changes (see config_watch.c for how). Names no owner: the callback and
 * its data say whom to tell, as libuv's uv_fs_event_cb does. Loop thread
 * only. */
#ifndef GMT_SERVER_CONFIG_WATCH_H
#define GMT_SERVER_CONFIG_WATCH_H

#include <uv.h>

typedef struct gmt_config_watch gmt_config_watch_t;

/* Runs on the loop when the file's content differs from what was last
 * noted (the file as it was at init, or at gmt_config_watch_note()). */
typedef void (*gmt_config_watch_cb)(void *data);

/* Starts watching path on loop. -ENOMEM only: where fs events fail it
 * logs why and stats the file every second instead. */
int gmt_config_watch_init(gmt_config_watch_t **w, uv_loop_t *loop, const char *path,
                          gmt_config_watch_cb cb, void *data);
/* Remembers the file as it is now: call it before loading the file, so
 * that a later change is seen and this content is not reported again. */
void gmt_config_watch_note(gmt_config_watch_t *w);
/* Stops; no callback runs after. The memory goes when the handles have
 * closed, so the loop must run on. NULL is a no-op. */
void gmt_config_watch_close(gmt_config_watch_t *w);

#endif
