/* The numbers of the GPU time token, in one place for every process that
 * takes part: gmt-schd's policy (server/token.c), the pod manager's sharing
 * (client/pmgr/token_share.c) and the hook's gate and busy rule
 * (hook/token/). What each means is said where it is used; why it has the
 * value it has is said here. docs/protocol.md ("GPU time tokens") gives
 * the rules they enter. */
#ifndef GMT_TOKEN_RULES_H
#define GMT_TOKEN_RULES_H

/* ---- the scheduler's grants ---- */

/* The sliding window usage is measured over (--window-ms). */
#define GMT_TOKEN_WINDOW_MS 10000
/* A grant's length without a burst estimate (--base-quota-ms); a pod
 * manager that cannot reach the scheduler grants itself this much. */
#define GMT_TOKEN_BASE_QUOTA_MS 250
/* The shortest grant (--min-quota-ms): a sliver costs a round trip. */
#define GMT_TOKEN_MIN_QUOTA_MS 100
/* A grant to a pod with the device to itself (nobody else waits or ran in
 * the window) lasts at least this long, within its LIMIT: each grant's
 * end stalls the pod for its queued work and a trip to gmt-schd (about
 * 1 ms on an H200), which every 250 ms was the p99.9 of an inference loop
 * alone (bench/hook_infer.py). A pod that comes meanwhile cuts it short
 * (TokenWatch), so it is given only to a pod whose last grant was watched. */
#define GMT_TOKEN_ALONE_QUOTA_MS 2000
/* How long a holder whose quota ran out (or whose grant was cut short) is
 * waited for to say that its queued work is done, by the scheduler and by
 * a pod manager for its processes: then it counts as dead or stalled. */
#define GMT_TOKEN_DRAIN_MAX_MS 1000

/* ---- classes ---- */

/* A batch pod granted while a latency pod may need the GPU keeps at most
 * this much of its work queued (TokenReply.queue_bound_us): the latency
 * pod then waits for the kernel that runs and about this much more. On an
 * H200 a 100 us queue kept a batch job of 25 us kernels at the same rate
 * as a 500 us one, and cut a request's p99 from 1.09 to 0.65 ms
 * (bench/handoff_floor.cu); 200 leaves room for the hook's own lag. */
#define GMT_TOKEN_QUEUE_BOUND_US 200
/* A batch pod granted while a swap pod moved out while idle may wake on
 * its GPU keeps at most this much of its work queued (gmt-schd
 * --wake-queue-ms): the waking pod's first launch cuts the grant, and its
 * memory comes back as the batch pod's moves out, which wait for that
 * queue. On an H200 (docs/BENCHMARKS.md, issue 26, eleventh session) an
 * AdamW job's queued step (60-96 ms) was a third of an 8 GiB pod's wake;
 * bounded, the wakes took 0.216-0.230 s at 10, 20 and 40 ms alike (the
 * drain hides behind the first copy in), and the job ran 7.72-7.80 steps
 * a second at 10 ms (its 9 ms GEMMs then queue one at a time) against
 * 7.96-7.98 at 20 and 40 and unbounded. */
#define GMT_TOKEN_WAKE_QUEUE_US 20000
/* A latency pod gives its grant back once it has been quiet this long with
 * its work done (TokenReply.idle_us; gmt-schd --latency-idle-ms): coming
 * back costs it only the batch holder's bounded queue (it launches ahead,
 * below), so it need not sit on an idle GPU for long. On an H200 (docs/
 * BENCHMARKS.md) 2 ms against 0.3 ms halved a service's median wait at
 * 500-1000 requests/s (each release then asking again shares the GPU with
 * the batch pod for a round trip) and cost a batch job beside 100
 * requests/s 3 points of its rate. */
#define GMT_TOKEN_LATENCY_IDLE_US 2000
/* A latency process that gave its grant back as idle launches again at
 * once and asks meanwhile (TokenReply.ahead_us), for at most this long:
 * a request then does not wait for the trip to gmt-schd and back (about
 * 1 ms on a GPU machine, bench/handoff_floor.cu: each 100 us of it costs
 * a request about 100 us). A stalled scheduler costs it this much, once. */
#define GMT_TOKEN_LATENCY_AHEAD_US 5000

/* A latency process's launch rings the node's bell (gmt_bell.h) for this
 * long; the next launches keep it ringing and its idle thread hushes it
 * once the work is found done (every GMT_BUSY_LATENCY_TICK_NS), so it
 * lapses on its own only when that thread has no grant to look at (a
 * request launched ahead of its grant). Long enough to cover the GPU work
 * of a small request after its last launch (an inference call at batch 1:
 * 0.2-0.4 ms on an H200), short enough that a batch pod does not stand
 * idle long after it. */
#define GMT_BELL_RING_US 500
/* While a latency process's idle thread waits for its queued work (its
 * launches done, its kernels not), the ring lasts this much more, and is
 * hushed when the wait returns: work that outlasts its last launch by more
 * than GMT_BELL_RING_US keeps the batch pods held. */
#define GMT_BELL_DRAIN_US 5000
/* After a latency process's work is done it rings on for at most this
 * long when it launched again within this long last time
 * (gmt_bell_stay_ns): requests queued in a server follow each other, and
 * a batch kernel between two of them delays all those behind. At most
 * this much of a batch pod's time per request when the guess is wrong. */
#define GMT_BELL_STAY_MAX_US 500
/* After a latency process's work is done its bell rings on for at most
 * this long, when it launched again within this long the last time
 * (gmt__busy_stay_ns, hook/token/busy.h): requests queued in a server
 * follow each other closely, and a batch kernel between two of them delays
 * all those behind. At most this much of a batch pod's time per request
 * when the guess is wrong. */
#define GMT_BELL_STAY_MAX_US 500
/* A batch launch that heeds the bell looks again this often while it
 * rings (the timer's own slack adds about 50 us). */
#define GMT_BELL_NAP_NS 50000

/* ---- the hook's busy rule (hook/token/busy.h) ---- */

/* Quiet this long, with its work done, a batch process's grant is idle:
 * a training loop gets the time to launch its next step after its
 * synchronize returns. */
#define GMT_BUSY_IDLE_NS 20000000LL
/* How often the idle thread looks while a grant is held (a latency grant:
 * every GMT_BUSY_LATENCY_TICK_NS). */
#define GMT_BUSY_TICK_NS 5000000LL
#define GMT_BUSY_LATENCY_TICK_NS 250000LL
/* How often it looks while the process keeps launching under a grant
 * with the device to itself (TokenReply.alone): a pod that comes and
 * should go first cuts such a grant short itself, so the look that finds
 * the process quiet may come this late. At 5 ms the thread woke 200
 * times a second beside an inference loop of 5000 calls a second (4% of
 * its calls), and that loop's p99 was 1.20x native under the gated hook
 * against 0.97x ungated (H200, bench/hook_infer.py). Not for any watched
 * grant: a batch pod serving requests beside training kept each grant
 * up to 45 ms longer after its request, and the training pod, which the
 * scheduler would not put first, fell from over 0.5 of the GPU to 0.33
 * (e2e test_tokens.ComeBack). */
#define GMT_BUSY_ALONE_TICK_NS 50000000LL
/* In a mode=swap pod's turn (TokenReply.turn_ms) a grant is idle only once
 * quiet this long with its work done: the job ended, or left the GPU for
 * longer than a gap between two training steps. */
#define GMT_BUSY_TURN_IDLE_NS 250000000LL

#endif
