/* One request to a gmt daemon, as any local program could send it: the
 * security tests (test_security.py) send forged ones through it, the pin
 * advice tests (test_pin_advice.py) the Advise calls a hook would.
 *
 *   wire_call URL register POD PID
 *   wire_call URL reserve POD PID BYTES
 *   wire_call URL release POD PID BYTES
 *   wire_call URL token POD PID BURST_MS [release]
 *   wire_call URL heartbeat POD EPOCH SEQ [PID...]
 *   wire_call URL report PID PINNED_BYTES PINNED_ADVISED [swap_gpu=N] [swap_host=N]
 *             [swap_disk=N] [swap_kept=N] [swap_outs=N] [swap_ins=N] [swap_device=N]
 *   wire_call URL resident POD PID DEVICE BYTES
 *   wire_call URL advise POD PID BYTES [pays_back] [release=N] [exe=PATH]
 *             [site=MODULE:OFFSET:NTH:SIZE_CLASS]
 *             [history=MODULE:OFFSET:NTH:SIZE_CLASS:SIZE:H2D:D2H]...
 *   wire_call URL status
 *   wire_call URL -
 *
 * A history's H2D and D2H are copies of the whole buffer (bytes = copies
 * x SIZE). With "-" it reads one request per line on stdin (KIND ARGS...,
 * as above) and answers each, over one connection, until end of input:
 * one process, so that what its pod manager grants it stays its own.
 *
 * Prints "OK" (and the reply's numbers) or "ERROR code message"; exits 0
 * when a reply came, 1 when none did. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_error.h"
#include "gmt_wire.h"

#define TIMEOUT_MS 5000
#define MAX_ARGS 80
#define MAX_PROCS 64
#define MAX_HISTORY 64

static unsigned long long num(const char *s)
{
  return strtoull(s, NULL, 10);
}

/* Every message a request may need, so that one lives until it is sent. */
typedef struct {
  Gmt__Envelope env;
  Gmt__RegisterRequest reg;
  Gmt__ReserveRequest res;
  Gmt__ReleaseRequest rel;
  Gmt__TokenRequest tok;
  Gmt__HeartbeatRequest hb;
  Gmt__StatusRequest st;
  Gmt__ReportRequest rep;
  Gmt__AdviseRequest adv;
  Gmt__ResidentRequest resident;
  Gmt__PinSite site;
  Gmt__ProcessReport procs[MAX_PROCS], *pp[MAX_PROCS];
  Gmt__ProcessCounters counters; /* a report's */
  Gmt__BufferHistory hist[MAX_HISTORY], *hp[MAX_HISTORY];
  Gmt__PinSite hsite[MAX_HISTORY];
} req_t;

/* Splits "MODULE:A:B:..." (k fields in all) from its end, so that the
 * module may hold a ':'; false when it has fewer fields. */
static bool split(char *s, char **f, int k)
{
  for (int i = k - 1; i > 0; i--) {
    char *c = strrchr(s, ':');
    if (!c)
      return false;
    *c = '\0';
    f[i] = c + 1;
  }
  f[0] = s;
  return true;
}

static bool parse_site(char *s, Gmt__PinSite *site)
{
  char *f[4];
  if (!split(s, f, 4))
    return false;
  gmt__pin_site__init(site);
  site->module = f[0];
  site->offset = num(f[1]);
  site->nth = (uint32_t)num(f[2]);
  site->size_class = (uint32_t)num(f[3]);
  return true;
}

static bool parse_history(char *s, Gmt__BufferHistory *h, Gmt__PinSite *site)
{
  char *f[7];
  if (!split(s, f, 7))
    return false;
  gmt__buffer_history__init(h);
  gmt__pin_site__init(site);
  site->module = f[0];
  site->offset = num(f[1]);
  site->nth = (uint32_t)num(f[2]);
  site->size_class = (uint32_t)num(f[3]);
  h->site = site;
  h->size = num(f[4]);
  h->h2d_copies = num(f[5]);
  h->d2h_copies = num(f[6]);
  h->h2d_bytes = h->h2d_copies * h->size;
  h->d2h_bytes = h->d2h_copies * h->size;
  h->lifetime_ms = 1000;
  return true;
}

static int build_advise(req_t *q, char **a, int n)
{
  Gmt__AdviseRequest *r = &q->adv;
  gmt__advise_request__init(r);
  r->pod = a[0];
  r->pid = (uint32_t)num(a[1]);
  r->bytes = num(a[2]);
  r->exe = (char *)"wire_call";
  r->history = q->hp;
  for (int i = 3; i < n; i++) {
    if (!strcmp(a[i], "pays_back"))
      r->pays_back = true;
    else if (!strncmp(a[i], "release=", 8))
      r->release = num(a[i] + 8);
    else if (!strncmp(a[i], "exe=", 4))
      r->exe = a[i] + 4;
    else if (!strncmp(a[i], "site=", 5) && parse_site(a[i] + 5, &q->site))
      r->site = &q->site;
    else if (!strncmp(a[i], "history=", 8) && r->n_history < MAX_HISTORY &&
             parse_history(a[i] + 8, &q->hist[r->n_history], &q->hsite[r->n_history])) {
      q->hp[r->n_history] = &q->hist[r->n_history];
      r->n_history++;
    } else
      return -EINVAL;
  }
  return gmt_wire_set_body(&q->env, GMT__ENVELOPE__BODY_ADVISE_REQ, r);
}

static int build(req_t *q, const char *kind, char **a, int n)
{
  memset(q, 0, sizeof *q);
  gmt__envelope__init(&q->env);
  if (!strcmp(kind, "register") && n == 2) {
    gmt__register_request__init(&q->reg);
    q->reg.pod = a[0];
    q->reg.pid = (uint32_t)num(a[1]);
    q->reg.exe = (char *)"wire_call";
    return gmt_wire_set_body(&q->env, GMT__ENVELOPE__BODY_REGISTER_REQ, &q->reg);
  }
  if (!strcmp(kind, "reserve") && n == 3) {
    gmt__reserve_request__init(&q->res);
    q->res.pod = a[0];
    q->res.pid = (uint32_t)num(a[1]);
    q->res.bytes = num(a[2]);
    return gmt_wire_set_body(&q->env, GMT__ENVELOPE__BODY_RESERVE_REQ, &q->res);
  }
  if (!strcmp(kind, "release") && n == 3) {
    gmt__release_request__init(&q->rel);
    q->rel.pod = a[0];
    q->rel.pid = (uint32_t)num(a[1]);
    q->rel.bytes = num(a[2]);
    return gmt_wire_set_body(&q->env, GMT__ENVELOPE__BODY_RELEASE_REQ, &q->rel);
  }
  if (!strcmp(kind, "token") && (n == 3 || n == 4)) {
    gmt__token_request__init(&q->tok);
    q->tok.pod = a[0];
    q->tok.pid = (uint32_t)num(a[1]);
    q->tok.burst_ms = strtod(a[2], NULL);
    q->tok.release = n == 4;
    return gmt_wire_set_body(&q->env, GMT__ENVELOPE__BODY_TOKEN_REQ, &q->tok);
  }
  if (!strcmp(kind, "heartbeat") && n >= 3 && n - 3 <= MAX_PROCS) {
    gmt__heartbeat_request__init(&q->hb);
    q->hb.pod = a[0];
    q->hb.epoch = num(a[1]);
    q->hb.seq = num(a[2]);
    for (int i = 3; i < n; i++) {
      gmt__process_report__init(&q->procs[i - 3]);
      q->procs[i - 3].pid = (uint32_t)num(a[i]);
      q->procs[i - 3].exe = (char *)"forged";
      q->pp[i - 3] = &q->procs[i - 3];
    }
    q->hb.n_processes = (size_t)(n - 3);
    q->hb.processes = q->pp;
    return gmt_wire_set_body(&q->env, GMT__ENVELOPE__BODY_HEARTBEAT_REQ, &q->hb);
  }
  if (!strcmp(kind, "report") && n >= 3) {
    gmt__report_request__init(&q->rep);
    Gmt__ProcessReport *p = &q->procs[0];
    gmt__process_report__init(p);
    p->pid = (uint32_t)num(a[0]);
    p->exe = (char *)"wire_call";
    Gmt__ProcessCounters *c = &q->counters;
    gmt__process_counters__init(c);
    p->counters = c;
    c->pinned_bytes = num(a[1]);
    c->pinned_advised = num(a[2]);
    c->swap_device = -1;
    for (int i = 3; i < n; i++) {
      char *v = strchr(a[i], '=');
      if (!v)
        return -EINVAL;
      *v++ = '\0';
      if (!strcmp(a[i], "swap_gpu"))
        c->swap_gpu = num(v);
      else if (!strcmp(a[i], "swap_host"))
        c->swap_host = num(v);
      else if (!strcmp(a[i], "swap_disk"))
        c->swap_disk = num(v);
      else if (!strcmp(a[i], "swap_kept"))
        c->swap_kept = num(v);
      else if (!strcmp(a[i], "swap_outs"))
        c->swap_outs = num(v);
      else if (!strcmp(a[i], "swap_ins"))
        c->swap_ins = num(v);
      else if (!strcmp(a[i], "swap_device"))
        c->swap_device = (int32_t)strtol(v, NULL, 10);
      else
        return -EINVAL;
    }
    q->rep.process = p;
    return gmt_wire_set_body(&q->env, GMT__ENVELOPE__BODY_REPORT_REQ, &q->rep);
  }
  if (!strcmp(kind, "resident") && n == 4) {
    gmt__resident_request__init(&q->resident);
    q->resident.pod = a[0];
    q->resident.pid = (uint32_t)num(a[1]);
    q->resident.device = (int32_t)strtol(a[2], NULL, 10);
    q->resident.bytes = num(a[3]);
    return gmt_wire_set_body(&q->env, GMT__ENVELOPE__BODY_RESIDENT_REQ, &q->resident);
  }
  if (!strcmp(kind, "advise") && n >= 3)
    return build_advise(q, a, n);
  if (!strcmp(kind, "status") && n == 0) {
    gmt__status_request__init(&q->st);
    return gmt_wire_set_body(&q->env, GMT__ENVELOPE__BODY_STATUS_REQ, &q->st);
  }
  return -EINVAL;
}

static void print_reply(const Gmt__Envelope *rep)
{
  if (rep->body_case == GMT__ENVELOPE__BODY_ERROR) {
    printf("ERROR %d %s\n", rep->error->code, rep->error->message);
  } else if (rep->body_case == GMT__ENVELOPE__BODY_RESERVE_REP) {
    printf("OK used %llu limit %llu\n", (unsigned long long)rep->reserve_rep->memory_used,
           (unsigned long long)rep->reserve_rep->memory_limit);
  } else if (rep->body_case == GMT__ENVELOPE__BODY_TOKEN_REP) {
    printf("OK quota %.1f\n", rep->token_rep->quota_ms);
  } else if (rep->body_case == GMT__ENVELOPE__BODY_ADVISE_REP) {
    const Gmt__AdviseReply *a = rep->advise_rep;
    const ProtobufCEnumValue *v =
        protobuf_c_enum_descriptor_get_value(&gmt__pin_reason__descriptor, a->reason);
    printf("OK pin=%d reason=%s used=%llu limit=%llu\n", a->pin ? 1 : 0, v ? v->name : "?",
           (unsigned long long)a->pinned_used, (unsigned long long)a->pinned_limit);
  } else if (rep->body_case == GMT__ENVELOPE__BODY_RESIDENT_REP) {
    const Gmt__ResidentReply *r = rep->resident_rep;
    const ProtobufCEnumValue *v =
        protobuf_c_enum_descriptor_get_value(&gmt__resident_reason__descriptor, r->reason);
    printf("OK granted=%d reason=%s retry=%u room=%llu\n", r->granted ? 1 : 0, v ? v->name : "?",
           r->retry_ms, (unsigned long long)r->room);
  } else if (rep->body_case == GMT__ENVELOPE__BODY_REPORT_REP) {
    printf("OK evict=%d keep=%llu\n", rep->report_rep->evict ? 1 : 0,
           (unsigned long long)rep->report_rep->keep_bytes);
  } else {
    printf("OK\n");
  }
  fflush(stdout);
}

/* Sends one request; 0 when a reply came (printed), 1 when none, 2 for a
 * request that cannot be built. */
static int call(gmt_client_t *c, const char *kind, char **a, int n)
{
  static req_t q;
  Gmt__Envelope *rep = NULL;
  if (build(&q, kind, a, n) != 0) {
    fprintf(stderr, "wire_call: bad request '%s' with %d arguments\n", kind, n);
    return 2;
  }
  int rc = gmt_client_call(c, &q.env, &rep, TIMEOUT_MS);
  if (rc < 0) {
    printf("NOREPLY %s\n", gmt_strerror(rc));
    fflush(stdout);
    return 1;
  }
  print_reply(rep);
  gmt_wire_free(rep);
  return 0;
}

int main(int argc, char **argv)
{
  if (argc < 3) {
    fprintf(stderr, "usage: wire_call URL KIND ARGS... | wire_call URL -\n");
    return 2;
  }
  gmt_client_t *c = NULL;
  int rc = gmt_client_open(&c, argv[1], GMT_CLIENT_DIAL_NOW);
  if (rc < 0) {
    printf("NOREPLY %s\n", gmt_strerror(rc));
    return 1;
  }
  if (strcmp(argv[2], "-") != 0) {
    rc = call(c, argv[2], argv + 3, argc - 3);
    gmt_client_close(c);
    return rc;
  }
  char line[8192];
  while (fgets(line, sizeof line, stdin)) {
    char *a[MAX_ARGS];
    int n = 0;
    for (char *t = strtok(line, " \t\n"); t && n < MAX_ARGS; t = strtok(NULL, " \t\n"))
      a[n++] = t;
    if (n > 0 && call(c, a[0], a + 1, n - 1) == 2)
      printf("BAD\n");
    fflush(stdout);
  }
  gmt_client_close(c);
  return 0;
}
