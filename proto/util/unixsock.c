/* Unix socket paths (gmt_unixsock.h). */
#include "gmt_unixsock.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int gmt_unix_addr(const char *path, struct sockaddr_un *sa)
{
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  if (strlen(path) >= sizeof sa->sun_path)
    return -ENAMETOOLONG;
  strcpy(sa->sun_path, path);
  return 0;
}

bool gmt_unix_stale(const char *path)
{
  struct sockaddr_un sa;
  if (gmt_unix_addr(path, &sa) < 0)
    return false;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return false;
  int rv = connect(fd, (struct sockaddr *)&sa, sizeof sa);
  int e = errno;
  close(fd);
  return rv != 0 && e == ECONNREFUSED;
}
