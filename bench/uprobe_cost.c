/* What one uprobe hit costs, by the instruction probed: x86-64 uprobes
 * emulate a few instructions (push, nop, jmp, call) in the kernel and
 * single-step any other out of line, a second trap. Each case is a tiny
 * function of this program timed bare, then with a bare perf uprobe (no
 * BPF program) on the chosen instruction; side by side in one run. Needs
 * root (perf uprobes). Why it matters: bpf/prologue.c.
 *
 * usage: uprobe_cost [CALLS]   (default 20000) */
#include <dlfcn.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Each function begins with the instruction under test. */
__asm__(".text\n"
        ".globl gmt_uc_endbr\n gmt_uc_endbr: endbr64\n push %rbp\n mov %rdi,%rax\n pop %rbp\n ret\n"
        ".globl gmt_uc_push\n gmt_uc_push: push %rbp\n mov %rdi,%rax\n pop %rbp\n ret\n"
        ".globl gmt_uc_nop5\n gmt_uc_nop5: .byte 0x0f,0x1f,0x44,0x00,0x00\n mov %rdi,%rax\n ret\n"
        ".globl gmt_uc_mov\n gmt_uc_mov: mov %rdi,%rax\n ret\n"
        ".globl gmt_uc_sub\n gmt_uc_sub: sub $8,%rsp\n add $8,%rsp\n mov %rdi,%rax\n ret\n");
long gmt_uc_endbr(long), gmt_uc_push(long), gmt_uc_nop5(long), gmt_uc_mov(long), gmt_uc_sub(long);

static double now_ns(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static double per_call_ns(long (*fn)(long), int n)
{
  volatile long sink = 0;
  double t = now_ns();
  for (int i = 0; i < n; i++)
    sink += fn(i);
  return (now_ns() - t) / n;
}

static int uprobe_type(void)
{
  FILE *f = fopen("/sys/bus/event_source/devices/uprobe/type", "r");
  int t = -1;
  if (!f || fscanf(f, "%d", &t) != 1)
    t = -1;
  if (f)
    fclose(f);
  return t;
}

int main(int argc, char **argv)
{
  int calls = argc > 1 ? atoi(argv[1]) : 20000;
  struct {
    const char *what;
    long (*fn)(long);
    unsigned skip; /* bytes past the start to probe */
  } cases[] = {
      {"push %rbp (libcuda's first)", gmt_uc_push, 0},
      {"push after endbr64 (+4)", gmt_uc_endbr, 4},
      {"5-byte nop", gmt_uc_nop5, 0},
      {"endbr64", gmt_uc_endbr, 0},
      {"mov", gmt_uc_mov, 0},
      {"sub $8,%rsp", gmt_uc_sub, 0},
  };
  char exe[4096];
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  int type = uprobe_type();
  if (calls <= 0 || len <= 0 || type < 0) {
    fprintf(stderr, "uprobe_cost: %s\n",
            calls <= 0 ? "usage: uprobe_cost [CALLS]" : "no uprobe PMU (/sys/bus/event_source)");
    return 2;
  }
  exe[len] = 0;
  double base = 0;
  printf("%-30s %12s %12s %8s\n", "probed instruction", "bare ns", "probed ns", "x push");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    Dl_info di;
    if (!dladdr((void *)cases[i].fn, &di) || !di.dli_fbase) {
      fprintf(stderr, "uprobe_cost: cannot locate %s in %s\n", cases[i].what, exe);
      return 1;
    }
    /* A PIE's text is mapped at its file offset: address - base = offset. */
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = (unsigned)type;
    a.config1 = (unsigned long)exe;
    a.config2 = (unsigned long)cases[i].fn - (unsigned long)di.dli_fbase + cases[i].skip;
    a.sample_period = 1;
    double bare = per_call_ns(cases[i].fn, calls);
    int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
    if (fd < 0) {
      fprintf(stderr, "uprobe_cost: perf_event_open (uprobe): %s%s\n", strerror(errno),
              errno == EACCES || errno == EPERM ? " (needs root)" : "");
      return 1;
    }
    double probed = per_call_ns(cases[i].fn, calls);
    close(fd);
    if (i == 0)
      base = probed;
    printf("%-30s %12.1f %12.0f %8.1f\n", cases[i].what, bare, probed, probed / base);
  }
  return 0;
}
