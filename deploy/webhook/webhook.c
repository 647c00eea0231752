/* gmt-webhook: Kubernetes' mutating admission webhook for gmt. Serves
 * POST /mutate (an AdmissionReview v1 in, one out: review.c decides) and
 * GET /healthz over HTTPS: nng's TLS (mbedtls under Debian's nng), with
 * the connections read and bounded by server.c. This file is the flags,
 * the certificate and the signals. Kubernetes calls webhooks over TLS
 * only, so there is no plain HTTP mode. docs/kubernetes.md. */
#include "review.h"
#include "server.h"

#include "gmt_log.h"

#include <errno.h>
#include <malloc.h>
#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DEFAULT_LISTEN "0.0.0.0:8443"
/* The API server's own limit on a request (3 MiB): every review it can
 * send is read. gmt_webhook_memory_bound() of it is 56 MiB, and the
 * manifest's limit (128 Mi) twice that, rounded: docs/kubernetes.md. */
#define DEFAULT_MAX_BODY (3u << 20)
#define PEM_MAX (1u << 20)

typedef struct flags {
  const char *cert, *key, *listen;
  size_t max_body;
  int timeout_ms; /* --timeout: to send a request, and again to take the answer */
  gmt_webhook_opts_t opts;
} flags_t;

static void usage(FILE *f)
{
  gmt_webhook_opts_t d;
  gmt_webhook_opts_default(&d);
  fprintf(f,
          "usage: gmt-webhook --cert FILE --key FILE [--listen ADDR] [--hook-image IMAGE]\n"
          "                   [--hook-path DIR] [--pmgr-image IMAGE] [--schd URL]\n"
          "                   [--pmgr-port N] [--max-body BYTES] [--timeout MS] [-v]\n"
          "\n"
          "Kubernetes' mutating admission webhook for gmt: a Pod annotated\n"
          "%s: NAME gets the hook (LD_PRELOAD), GMT_PMGR (an ipc socket on a\n"
          "volume of the pod), GMT_AUTO_DEVICE=pod (its processes see only the gmt\n"
          "pod's devices=), GMT_FAIL_CLOSED=1 and a gmt-pmgr sidecar serving gmt\n"
          "pod NAME (docs/kubernetes.md).\n"
          "\n"
          "  --cert FILE        the server's certificate (PEM; with its chain)\n"
          "  --key FILE         its private key (PEM)\n"
          "  --listen ADDR      HOST:PORT to serve HTTPS on (default %s: every\n"
          "                     address, as the API server reaches a webhook through\n"
          "                     its Service; 127.0.0.1:PORT for a local test)\n"
          "  --hook-image IMAGE the image whose hook folder is copied into the pod (default %s)\n"
          "  --hook-path DIR    that folder, holding libgmthook.so; containers see it there\n"
          "                     too (default %s)\n"
          "  --pmgr-image IMAGE the sidecar's image, gmt-pmgr on its PATH (default %s)\n"
          "  --schd URL         gmt-schd as the sidecar reaches it; the node's /run/gmt is\n"
          "                     at /run/gmt-node there (default %s)\n"
          "  --pmgr-port N      the sidecar's port: GMT_PMGR is ipc:///run/gmt/pmgr-N.sock\n"
          "                     (default %d)\n"
          "  --max-body BYTES   refuse a larger body, unread, with HTTP 400 (default %u);\n"
          "                     %d bodies of it are held at once and %d parsed, so the\n"
          "                     process holds at most 8 MiB + %d x (BYTES + 8 KiB) + %d x 18 MiB\n"
          "                     (56 MiB by default): give its container twice that\n"
          "  --timeout MS       a client's time to send its whole request, and again to\n"
          "                     take the answer (default %d; 100 to 60000); at most %d\n"
          "                     connections at once: for a new one, the oldest unfinished\n"
          "                     one of the client address holding the most is closed\n"
          "  -v                 log every review\n"
          "\n"
          "Serves POST /mutate and GET /healthz. Exit codes: 0 stopped by\n"
          "SIGTERM/SIGINT, 1 the certificate or the address could not be used, 2 bad flags.\n",
          GMT_WEBHOOK_ANNOTATION, DEFAULT_LISTEN, d.hook_image, d.hook_path, d.pmgr_image,
          d.schd_url, d.pmgr_port, DEFAULT_MAX_BODY, GMT_WEBHOOK_BODIES, GMT_WEBHOOK_PARSERS,
          GMT_WEBHOOK_BODIES, GMT_WEBHOOK_PARSERS, GMT_WEBHOOK_TIMEOUT_MS, GMT_WEBHOOK_MAX_CONNS);
}

static int bad_flag(const char *what)
{
  fprintf(stderr, "gmt-webhook: %s\nRun 'gmt-webhook --help' for usage.\n", what);
  return 2;
}

/* -1 to go on, or an exit code. */
static int parse_flags(int argc, char **argv, flags_t *f)
{
  gmt_webhook_opts_default(&f->opts);
  f->listen = DEFAULT_LISTEN;
  f->max_body = DEFAULT_MAX_BODY;
  f->timeout_ms = GMT_WEBHOOK_TIMEOUT_MS;
  int verbose = 0;
  char msg[512];
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    }
    if (!strcmp(a, "-v")) {
      verbose = 1;
      continue;
    }
    static const char *const with_value[] = {
        "--cert",       "--key",  "--listen",    "--hook-image", "--hook-path",
        "--pmgr-image", "--schd", "--pmgr-port", "--max-body",   "--timeout"};
    size_t k = 0, nk = sizeof with_value / sizeof *with_value;
    while (k < nk && strcmp(a, with_value[k]) != 0)
      k++;
    if (k == nk) {
      snprintf(msg, sizeof msg, "unknown flag '%s'", a);
      return bad_flag(msg);
    }
    if (i + 1 >= argc) {
      snprintf(msg, sizeof msg, "%s wants a value", a);
      return bad_flag(msg);
    }
    const char *v = argv[++i];
    if (!strcmp(a, "--cert"))
      f->cert = v;
    else if (!strcmp(a, "--key"))
      f->key = v;
    else if (!strcmp(a, "--listen"))
      f->listen = v;
    else if (!strcmp(a, "--hook-image"))
      f->opts.hook_image = v;
    else if (!strcmp(a, "--hook-path"))
      f->opts.hook_path = v;
    else if (!strcmp(a, "--pmgr-image"))
      f->opts.pmgr_image = v;
    else if (!strcmp(a, "--schd"))
      f->opts.schd_url = v;
    else {
      char *end;
      errno = 0;
      unsigned long long n = strtoull(v, &end, 10);
      bool port = !strcmp(a, "--pmgr-port"), ms = !strcmp(a, "--timeout");
      unsigned long long lo = ms ? 100 : 1, hi = port ? 65535ull : ms ? 60000ull : (1ull << 30);
      if (errno || end == v || *end || v[0] == '-' || n < lo || n > hi) {
        snprintf(msg, sizeof msg, "%s wants %s, not '%s'", a,
                 port ? "a TCP port 1..65535"
                 : ms ? "milliseconds 100..60000"
                      : "a byte count 1..1073741824",
                 v);
        return bad_flag(msg);
      }
      if (port)
        f->opts.pmgr_port = (int)n;
      else if (ms)
        f->timeout_ms = (int)n;
      else
        f->max_body = (size_t)n;
    }
  }
  gmt_log_init("gmt-webhook", verbose ? GMT_LOG_DEBUG : GMT_LOG_INFO);
  if (!f->cert || !f->key)
    return bad_flag(
        "--cert FILE and --key FILE are required (Kubernetes calls webhooks over TLS only)");
  if (gmt_webhook_opts_check(&f->opts, msg, sizeof msg) < 0)
    return bad_flag(msg);
  return -1;
}

/* The container's memory limit (cgroup v2, else v1) in bytes; 0 when
 * there is none or it cannot be read. */
static unsigned long long memory_limit(void)
{
  static const char *const files[] = {"/sys/fs/cgroup/memory.max",
                                      "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    FILE *fp = fopen(files[i], "re");
    unsigned long long v = 0;
    int got = fp ? fscanf(fp, "%llu", &v) : 0;
    if (fp)
      fclose(fp);
    if (got == 1)
      return v;
  }
  return 0;
}

/* A PEM file whole, NUL-terminated: malloc'ed, or NULL with why logged. */
static char *read_pem(const char *path, const char *what)
{
  FILE *fp = fopen(path, "re");
  struct stat st;
  if (!fp) {
    gmt_error("%s %s: %s", what, path, strerror(errno));
    return NULL;
  }
  if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
      st.st_size > (off_t)PEM_MAX) {
    gmt_error("%s %s: not a regular file of 1 byte to %u bytes", what, path, PEM_MAX);
    fclose(fp);
    return NULL;
  }
  char *buf = malloc((size_t)st.st_size + 1);
  size_t n = buf ? fread(buf, 1, (size_t)st.st_size, fp) : 0;
  fclose(fp);
  if (!buf || n != (size_t)st.st_size) {
    gmt_error("%s %s: could not read it", what, path);
    free(buf);
    return NULL;
  }
  buf[n] = '\0';
  return buf;
}

int main(int argc, char **argv)
{
  flags_t f = {0};
  int code = parse_flags(argc, argv, &f);
  if (code >= 0)
    return code;

  /* SIGTERM and SIGINT are waited for below, in this thread only: nng's
   * threads, started after this, inherit the mask. */
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, NULL);
  signal(SIGPIPE, SIG_IGN);
#ifdef M_MMAP_THRESHOLD
  /* Bodies and large answers from mmap, handed back when freed. glibc
   * would raise its threshold past a body's size at the first free and
   * keep later bodies in each thread's arena, so the peak would grow with
   * nng's threads rather than with what is held (server.h's bound). */
  mallopt(M_MMAP_THRESHOLD, 128 << 10);
#endif

  char url_text[300], stream_url[310];
  snprintf(url_text, sizeof url_text, "https://%s", f.listen);
  snprintf(stream_url, sizeof stream_url, "tls+tcp://%s", f.listen);
  char *cert = read_pem(f.cert, "--cert"), *key = read_pem(f.key, "--key");
  nng_url *url = NULL;
  nng_tls_config *tls = NULL;
  gmt_webhook_server_t *srv = NULL;
  int rv;
  code = 1;
  if (!cert || !key)
    goto cleanup;
  if ((rv = nng_url_parse(&url, url_text)) != 0 || !url->u_port || !*url->u_port) {
    gmt_error("--listen %s: want HOST:PORT (%s)", f.listen, rv ? nng_strerror(rv) : "no port");
    code = 2;
    goto cleanup;
  }
  if ((rv = nng_tls_config_alloc(&tls, NNG_TLS_MODE_SERVER)) != 0 ||
      (rv = nng_tls_config_own_cert(tls, cert, key, NULL)) != 0) {
    gmt_error("--cert %s / --key %s: %s (a PEM certificate and its matching key)", f.cert, f.key,
              nng_strerror(rv));
    goto cleanup;
  }
  if ((rv = gmt_webhook_server_start(&srv, stream_url, tls, &f.opts, f.max_body, f.timeout_ms)) !=
      0) {
    gmt_error("listening on %s: %s", url_text, nng_strerror(rv));
    goto cleanup;
  }
  gmt_info("serving %s/mutate (hook image %s at %s, pod manager image %s, annotation %s)", url_text,
           f.opts.hook_image, f.opts.hook_path, f.opts.pmgr_image, GMT_WEBHOOK_ANNOTATION);
  /* Killed for its memory, the webhook lets pods start without gmt (or
   * not at all): said at once where the limit is below what it may hold. */
  size_t bound = gmt_webhook_memory_bound(f.max_body);
  unsigned long long limit = memory_limit();
  if (limit && limit < bound)
    gmt_warn(
        "the memory limit, %llu MiB, is below the %zu MiB gmt-webhook may hold with --max-body "
        "%zu: raise the limit to twice that or lower --max-body (docs/kubernetes.md)",
        limit >> 20, bound >> 20, f.max_body);
  int sig = 0;
  sigwait(&stop, &sig);
  gmt_info("stopping on signal %d", sig);
  gmt_webhook_server_stop(srv);
  code = 0;
cleanup:
  if (tls)
    nng_tls_config_free(tls);
  if (url)
    nng_url_free(url);
  free(cert);
  free(key);
  nng_fini(); /* nng's threads and caches, so that a leak check sees only ours */
  return code;
}
