/* Which metrics connection gives way (see http_admit.h). */
#include "http_admit.h"

/* Connections of conns[i]'s user (those whose owner is not known count as
 * one user). */
static size_t held_by(const gmt_http_conn_t *conns, size_t n, size_t i)
{
  size_t held = 0;
  for (size_t j = 0; j < n; j++)
    held += conns[j].uid == conns[i].uid;
  return held;
}

int gmt_http_admit(const gmt_http_conn_t *conns, size_t n, size_t max, size_t per_user)
{
  if (n == 0)
    return -1;
  size_t newest = n - 1;
  if (conns[newest].limited && held_by(conns, n, newest) > per_user) {
    for (size_t i = 0; i < newest; i++)
      if (conns[i].uid == conns[newest].uid && !conns[i].busy)
        return (int)i;
    return (int)newest;
  }
  if (n <= max)
    return -1;
  size_t pick = newest, most = 0;
  for (size_t i = 0; i < n; i++) {
    if (conns[i].busy)
      continue;
    size_t held = held_by(conns, n, i);
    if (held > most) { /* strictly more: the oldest of a tie stays picked */
      most = held;
      pick = i;
    }
  }
  return (int)pick;
}
