/* One request to a gmt daemon, as any local program could send it: the
 * security tests (test_security.py) send forged ones through it.
 *
 *   wire_call URL register POD PID
 *   wire_call URL reserve POD PID BYTES
 *   wire_call URL release POD PID BYTES
 *   wire_call URL token POD PID BURST_MS [release]
 *   wire_call URL heartbeat POD EPOCH SEQ [PID...]
 *   wire_call URL status
 *
 * Prints "OK" (and the reply's numbers) or "ERROR code message"; exits 0
 * when a reply came, 1 when none did. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gmt_error.h"
#include "gmt_wire.h"

#define TIMEOUT_MS 5000

static unsigned long long num(const char *s)
{
  return strtoull(s, NULL, 10);
}

int main(int argc, char **argv)
{
  if (argc < 3) {
    fprintf(stderr, "usage: wire_call URL KIND ARGS...\n");
    return 2;
  }
  const char *kind = argv[2];
  char **a = argv + 3;
  int n = argc - 3;
  Gmt__Envelope env = GMT__ENVELOPE__INIT;
  Gmt__RegisterRequest reg = GMT__REGISTER_REQUEST__INIT;
  Gmt__ReserveRequest res = GMT__RESERVE_REQUEST__INIT;
  Gmt__ReleaseRequest rel = GMT__RELEASE_REQUEST__INIT;
  Gmt__TokenRequest tok = GMT__TOKEN_REQUEST__INIT;
  Gmt__HeartbeatRequest hb = GMT__HEARTBEAT_REQUEST__INIT;
  Gmt__StatusRequest st = GMT__STATUS_REQUEST__INIT;
  Gmt__ProcessReport procs[64], *pp[64];
  int rc = -EINVAL;

  if (!strcmp(kind, "register") && n == 2) {
    reg.pod = a[0];
    reg.pid = (uint32_t)num(a[1]);
    reg.exe = (char *)"wire_call";
    rc = gmt_wire_set_body(&env, GMT__ENVELOPE__BODY_REGISTER_REQ, &reg);
  } else if (!strcmp(kind, "reserve") && n == 3) {
    res.pod = a[0];
    res.pid = (uint32_t)num(a[1]);
    res.bytes = num(a[2]);
    rc = gmt_wire_set_body(&env, GMT__ENVELOPE__BODY_RESERVE_REQ, &res);
  } else if (!strcmp(kind, "release") && n == 3) {
    rel.pod = a[0];
    rel.pid = (uint32_t)num(a[1]);
    rel.bytes = num(a[2]);
    rc = gmt_wire_set_body(&env, GMT__ENVELOPE__BODY_RELEASE_REQ, &rel);
  } else if (!strcmp(kind, "token") && (n == 3 || n == 4)) {
    tok.pod = a[0];
    tok.pid = (uint32_t)num(a[1]);
    tok.burst_ms = strtod(a[2], NULL);
    tok.release = n == 4;
    rc = gmt_wire_set_body(&env, GMT__ENVELOPE__BODY_TOKEN_REQ, &tok);
  } else if (!strcmp(kind, "heartbeat") && n >= 3 && n - 3 <= 64) {
    hb.pod = a[0];
    hb.epoch = num(a[1]);
    hb.seq = num(a[2]);
    for (int i = 3; i < n; i++) {
      gmt__process_report__init(&procs[i - 3]);
      procs[i - 3].pid = (uint32_t)num(a[i]);
      procs[i - 3].exe = (char *)"forged";
      pp[i - 3] = &procs[i - 3];
    }
    hb.n_processes = (size_t)(n - 3);
    hb.processes = pp;
    rc = gmt_wire_set_body(&env, GMT__ENVELOPE__BODY_HEARTBEAT_REQ, &hb);
  } else if (!strcmp(kind, "status") && n == 0) {
    rc = gmt_wire_set_body(&env, GMT__ENVELOPE__BODY_STATUS_REQ, &st);
  }
  if (rc != 0) {
    fprintf(stderr, "wire_call: bad request '%s' with %d arguments\n", kind, n);
    return 2;
  }

  gmt_client_t *c = NULL;
  Gmt__Envelope *rep = NULL;
  if ((rc = gmt_client_open(&c, argv[1], GMT_CLIENT_DIAL_NOW)) < 0 ||
      (rc = gmt_client_call(c, &env, &rep, TIMEOUT_MS)) < 0) {
    printf("NOREPLY %s\n", gmt_strerror(rc));
    gmt_client_close(c);
    return 1;
  }
  if (rep->body_case == GMT__ENVELOPE__BODY_ERROR)
    printf("ERROR %d %s\n", rep->error->code, rep->error->message);
  else if (rep->body_case == GMT__ENVELOPE__BODY_RESERVE_REP)
    printf("OK used %llu limit %llu\n", (unsigned long long)rep->reserve_rep->memory_used,
           (unsigned long long)rep->reserve_rep->memory_limit);
  else if (rep->body_case == GMT__ENVELOPE__BODY_TOKEN_REP)
    printf("OK quota %.1f\n", rep->token_rep->quota_ms);
  else
    printf("OK\n");
  gmt_wire_free(rep);
  gmt_client_close(c);
  return 0;
}
