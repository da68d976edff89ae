/*
 * strata-bench-coll: nccl-tests style table for Strata's shared-memory collectives, with the
 * machine's memory bandwidth (2-input sum) measured in the same run and, per row, the
 * fraction of the bound that bandwidth puts on the collective (traffic model in
 * docs/benchmarks.md, "Workers and collectives").
 */
#include <getopt.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "strata/strata.h"
#include "drivers/comm_workers.h"
#include "tools/timing.h"

struct bench {
        struct strata__workers *w;
        struct strata_comm *comm;
        enum strata_coll_kind kind;
        int n;
        size_t count;      /* elements per rank as the collective counts them */
        int iters;
        float *buf[64];    /* per rank: send (and recv for in-place kinds) */
        float *rbuf[64];   /* per rank: separate receive buffer */
        double t;          /* seconds per iteration (rank 0) */
        /* memory bandwidth probe */
        float *a, *b, *c;
        size_t mlen;
        double best;
};


static int one(struct bench *b, int rank)
{
        float *s = b->buf[rank], *r = b->rbuf[rank];

        switch (b->kind) {
        case STRATA_COLL_ALL_REDUCE:
                return strata_comm_all_reduce(b->comm, rank, s, s, b->count, STRATA_F32,
                                              STRATA_OP_SUM);
        case STRATA_COLL_REDUCE:
                return strata_comm_reduce(b->comm, rank, s, r, b->count, STRATA_F32,
                                          STRATA_OP_SUM, 0);
        case STRATA_COLL_BROADCAST:
                return strata_comm_broadcast(b->comm, rank, s, b->count, STRATA_F32, 0);
        case STRATA_COLL_ALL_GATHER:
                return strata_comm_all_gather(b->comm, rank, s, r, b->count, STRATA_F32);
        case STRATA_COLL_REDUCE_SCATTER:
                return strata_comm_reduce_scatter(b->comm, rank, s, r, b->count, STRATA_F32,
                                                  STRATA_OP_SUM);
        default:
                return strata_comm_barrier(b->comm, rank);
        }
}

static int timed(int rank, void *arg)
{
        struct bench *b = arg;
        double t0;

        for (int i = 0; i < 3; i++)
                STRATA_TRY(one(b, rank));
        STRATA_TRY(strata_comm_barrier(b->comm, rank));
        t0 = strata_tool_now();
        for (int i = 0; i < b->iters; i++)
                STRATA_TRY(one(b, rank));
        STRATA_TRY(strata_comm_barrier(b->comm, rank));
        if (rank == 0)
                b->t = (strata_tool_now() - t0) / b->iters;
        return STRATA_OK;
}

/* The 2-input sum kernel of tools/peers/memband.c, one slice per device. */
static int sum_kernel(int rank, void *arg)
{
        struct bench *b = arg;
        size_t lo = b->mlen * (size_t)rank / (size_t)b->n;
        size_t hi = b->mlen * (size_t)(rank + 1) / (size_t)b->n;
        double t0;

        for (size_t i = lo; i < hi; i++) {
                b->a[i] = 1.0f;
                b->b[i] = 2.0f;
                b->c[i] = 0.0f;
        }
        for (int rep = 0; rep < 5; rep++) {
                STRATA_TRY(strata__workers_barrier(b->w, rank));
                t0 = strata_tool_now();
                for (size_t i = lo; i < hi; i++)
                        b->c[i] = b->a[i] + b->b[i];
                STRATA_TRY(strata__workers_barrier(b->w, rank));
                if (rank == 0 && strata_tool_now() - t0 < b->best)
                        b->best = strata_tool_now() - t0;
        }
        return STRATA_OK;
}

static int nothing(int rank, void *arg)
{
        (void)rank;
        (void)arg;
        return STRATA_OK;
}


/* Median of 20000 round trips: post an empty command to every device and wait for all. */
static double dispatch_us(struct strata__workers *w)
{
        static double t[20000];

        for (int i = 0; i < 1000; i++)
                (void)strata__workers_run(w, nothing, NULL);
        for (int i = 0; i < 20000; i++) {
                double t0 = strata_tool_now();

                (void)strata__workers_run(w, nothing, NULL);
                t[i] = strata_tool_now() - t0;
        }
        qsort(t, 20000, sizeof(double), strata_tool_cmp_double);
        return t[10000] * 1e6;
}

#define PINGS 101
#define PING_BATCH 1000

/* Two flags on their own cache lines, one written by each of devices 0 and 1. */
static struct {
        _Alignas(64) _Atomic uint64_t ping;
        _Alignas(64) _Atomic uint64_t pong;
        _Alignas(64) double t[PINGS];
} lines;

/* Spin for the peer's value; yield now and then in case the two devices share a core. */
static void spin_until(_Atomic uint64_t *f, uint64_t k)
{
        for (unsigned spins = 1; atomic_load_explicit(f, memory_order_acquire) != k; spins++)
                if (spins % 4096 == 0)
                        sched_yield();
}

/*
 * Devices 0 and 1 take turns: 0 raises ping, 1 answers with pong. Half a round trip is the
 * time for one cache line written on one core to be seen on the other: the floor under every
 * meeting of a collective, since each meeting is one such handoff.
 */
static int ping_pong(int rank, void *arg)
{
        double t0 = 0.0;

        (void)arg;
        for (uint64_t k = 1; k <= (uint64_t)PINGS * PING_BATCH; k++) {
                if (rank == 0) {
                        if (k % PING_BATCH == 1)
                                t0 = strata_tool_now();
                        atomic_store_explicit(&lines.ping, k, memory_order_release);
                        spin_until(&lines.pong, k);
                        if (k % PING_BATCH == 0)
                                lines.t[k / PING_BATCH - 1] = (strata_tool_now() - t0) / PING_BATCH / 2;
                } else if (rank == 1) {
                        spin_until(&lines.ping, k);
                        atomic_store_explicit(&lines.pong, k, memory_order_release);
                }
        }
        return STRATA_OK;
}

/* Median over PINGS batches of one-way handoff time, in microseconds (0 on one device). */
static double handoff_us(struct strata__workers *w, int n)
{
        if (n < 2)
                return 0.0;
        atomic_store(&lines.ping, 0);
        atomic_store(&lines.pong, 0);
        if (strata__workers_run(w, ping_pong, NULL))
                return 0.0;
        qsort(lines.t, PINGS, sizeof(double), strata_tool_cmp_double);
        return lines.t[PINGS / 2] * 1e6;
}

static const char *names[STRATA_COLL_COUNT] = { "barrier", "broadcast", "reduce", "all_reduce",
                                                "all_gather", "reduce_scatter", "gather",
                                                "scatter" };

int main(int argc, char **argv)
{
        static const struct option lo[] = { { "devices", 1, 0, 'n' }, { "op", 1, 0, 'o' },
                                            { "json", 0, 0, 'j' },    { "max-bytes", 1, 0, 'M' },
                                            { "min-bytes", 1, 0, 'm' }, { "help", 0, 0, 'h' },
                                            { 0, 0, 0, 0 } };
        struct strata__workers_config wc = STRATA__WORKERS_CONFIG_INIT;
        struct strata_arena arena;
        struct bench b = { .kind = STRATA_COLL_ALL_REDUCE, .n = 2 };
        size_t minb = 4096, maxb = (size_t)256 << 20, wbytes, cbytes, total;
        size_t membw_len = (size_t)64 << 20;
        int json = 0, c;
        double bw, rt_us, hand_us;
        char line[160];

        while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
                switch (c) {
                case 'n': b.n = atoi(optarg); break;
                case 'j': json = 1; break;
                case 'M': maxb = strtoull(optarg, NULL, 0); break;
                case 'm': minb = strtoull(optarg, NULL, 0); break;
                case 'o':
                        for (b.kind = 0; b.kind < STRATA_COLL_COUNT; b.kind++)
                                if (!strcmp(optarg, names[b.kind]))
                                        break;
                        if (b.kind == STRATA_COLL_COUNT || b.kind == STRATA_COLL_GATHER ||
                            b.kind == STRATA_COLL_SCATTER) {
                                fprintf(stderr, "strata-bench-coll: --op %s unsupported\n", optarg);
                                return 2;
                        }
                        break;
                case 'h':
                        printf("usage: strata-bench-coll [--devices N] [--op all_reduce|reduce|"
                               "broadcast|all_gather|reduce_scatter|barrier] [--json] "
                               "[--min-bytes B] [--max-bytes B]\n");
                        return 0;
                default:
                        return 2;
                }
        }
        if (b.n < 1 || b.n > 64 || minb < 4 || maxb < minb) {
                fprintf(stderr, "strata-bench-coll: bad --devices or sizes\n");
                return 2;
        }
        wc.devices = b.n;
        if (strata__workers_plan(&wc, &wbytes) || strata_comm_plan(b.n, &cbytes))
                goto fail;
        total = wbytes + cbytes + 2 * (size_t)b.n * (maxb + 4096) + 3 * membw_len * 4 + 4096 * 4;
        if (strata_arena_map(&arena, total, NULL) || strata__workers_start(&b.w, &arena, &wc) ||
            strata__comm_init_workers(&b.comm, &arena, b.w, NULL))
                goto fail;
        for (int r = 0; r < b.n; r++) {
                void *p, *q;

                if (strata_arena_alloc(&arena, maxb, 4096, &p) ||
                    strata_arena_alloc(&arena, maxb, 4096, &q))
                        goto fail;
                b.buf[r] = p;
                b.rbuf[r] = q;
                memset(p, 0, maxb);
                memset(q, 0, maxb);
        }
        {
                void *p;

                if (strata_arena_alloc(&arena, 3 * membw_len * 4, 4096, &p))
                        goto fail;
                b.a = p;
                b.b = b.a + membw_len;
                b.c = b.b + membw_len;
                b.mlen = membw_len;
                b.best = 1e9;
                if (strata__workers_run(b.w, sum_kernel, &b))
                        goto fail;
                bw = 3.0 * (double)membw_len * 4 / b.best / 1e9;
        }
        rt_us = dispatch_us(b.w);
        hand_us = handoff_us(b.w, b.n);
        if (json) {
                printf("{\"dispatch_round_trip_us_median\":%.3f,\"handoff_us_median\":%.3f,"
                       "\"devices\":%d,\"membw_GBs\":%.2f}\n", rt_us, hand_us, b.n, bw);
        } else {
                printf("# strata-bench-coll: %s, %d devices, f32 sum; memory bandwidth (2-input "
                       "sum, %d threads) %.2f GB/s\n", names[b.kind], b.n, b.n, bw);
                printf("# dispatch round trip (post to %d devices and wait), median of 20000: "
                       "%.2f us\n", b.n, rt_us);
                if (b.n > 1)
                        printf("# cache-line handoff between devices 0 and 1 (one way), median "
                               "of %d x %d ping-pongs: %.3f us\n", PINGS, PING_BATCH, hand_us);
                for (int d = 0; d < b.n; d++) {
                        strata__placement_describe(strata__workers_placement(b.w, d), line,
                                                  sizeof(line));
                        printf("# %s\n", line);
                }
                printf("%12s %10s %10s %10s %10s\n", "bytes", "time_us", "algbw_GBs", "busbw_GBs",
                       "of_bound");
        }
        for (size_t bytes = minb; bytes <= maxb; bytes *= 4) {
                double n = b.n, algbw, busbw, factor = 1.0, traffic = 0.0, bound;

                /* nccl-tests sizes: all_gather counts the received total, reduce_scatter the sent. */
                b.count = bytes / 4;
                if (b.kind == STRATA_COLL_ALL_GATHER || b.kind == STRATA_COLL_REDUCE_SCATTER)
                        b.count = bytes / 4 / (size_t)b.n;
                b.iters = bytes < (1 << 20) ? 2000 : (bytes < (16 << 20) ? 50 : 10);
                if (strata__workers_run(b.w, timed, &b))
                        goto fail;
                algbw = (double)bytes / b.t / 1e9;
                switch (b.kind) {
                case STRATA_COLL_ALL_REDUCE: factor = 2 * (n - 1) / n; traffic = 2 * n; break;
                case STRATA_COLL_ALL_GATHER: factor = (n - 1) / n; traffic = n + 1; break;
                case STRATA_COLL_REDUCE_SCATTER: factor = (n - 1) / n; traffic = n + 1; break;
                case STRATA_COLL_BROADCAST: traffic = n; break;
                case STRATA_COLL_REDUCE: traffic = n + 1; break;
                default: break;
                }
                busbw = algbw * factor;
                /* Bytes moved through memory = traffic x message; time >= that / bandwidth. */
                bound = traffic > 0 ? bw / traffic * factor : 0.0;
                if (json)
                        printf("{\"op\":\"%s\",\"devices\":%d,\"bytes\":%zu,\"time_us\":%.2f,"
                               "\"algbw_GBs\":%.3f,\"busbw_GBs\":%.3f,\"membw_GBs\":%.2f,"
                               "\"bound_busbw_GBs\":%.3f,\"of_bound\":%.3f}\n",
                               names[b.kind], b.n, bytes, b.t * 1e6, algbw, busbw, bw, bound,
                               bound > 0 ? busbw / bound : 0.0);
                else
                        printf("%12zu %10.2f %10.2f %10.2f %10.2f\n", bytes, b.t * 1e6, algbw,
                               busbw, bound > 0 ? busbw / bound : 0.0);
                fflush(stdout);
        }
        strata__workers_stop(b.w);
        strata_arena_release(&arena);
        return 0;
fail:
        fprintf(stderr, "strata-bench-coll: %s\n", strata_last_error());
        return 1;
}
