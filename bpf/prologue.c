/* x86-64 uprobes emulate a few instructions in the kernel (push of a
 * register, nop, jmp, call) and single-step any other out of line, which is
 * a second trap. Measured with bench/uprobe_cost on kernel 6.18
 * (2026-11-22): 0.6-0.9 us a hit emulated vs 5-6.6 us single-stepped on
 * the H200 VMs, 0.4-0.6 vs 26-28 us on the CPU VMs. libcuda's entry points begin with `push %rbp`
 * (fast); a library built for CET begins with `endbr64` (slow), which
 * changes no register, so the probe goes one instruction later. Nothing
 * further is skipped: past a push [rsp] is no longer the return address
 * that a return probe takes. */
#include "prologue.h"

#include <string.h>

static const uint8_t ENDBR64[] = {0xf3, 0x0f, 0x1e, 0xfa};

static bool emulated(const uint8_t *c, size_t n)
{
  if (n < 1)
    return false;
  if (c[0] >= 0x50 && c[0] <= 0x57) /* push %rax..%rdi */
    return true;
  if (c[0] == 0x41 && n >= 2 && c[1] >= 0x50 && c[1] <= 0x57) /* push %r8..%r15 */
    return true;
  if (c[0] == 0x90 || c[0] == 0xe8 || c[0] == 0xe9 || c[0] == 0xeb) /* nop, call, jmp */
    return true;
  /* the 5-byte nop (nopl 0x0(%rax,%rax,1)) */
  return n >= 5 && c[0] == 0x0f && c[1] == 0x1f && c[2] == 0x44 && c[3] == 0x00 && c[4] == 0x00;
}

gmt_probe_site_t gmt_probe_site(const uint8_t *code, size_t n)
{
  gmt_probe_site_t s = {0, false};
  if (n >= sizeof ENDBR64 && memcmp(code, ENDBR64, sizeof ENDBR64) == 0)
    s.skip = sizeof ENDBR64;
  s.fast = emulated(code + s.skip, n - s.skip);
  return s;
}
