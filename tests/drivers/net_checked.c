/*
 * The checked all-reduce across processes (drivers/comm_blocks.h, decision 0110: ddp's step
 * where each device decides alone takes the check of its gradients from the sum's pass): over
 * the net transport's direct reduction with one rank a process (2 and 3 processes), every
 * process's sums are the unchecked all-reduce's bits, its record counts the span and says
 * whether a sum it stored is NaN or infinite (a NaN or infinity in one process's input, or two
 * finite inputs whose sum overflows, anywhere in the span), and is cleared when taken; with two
 * ranks a process (local rank 0 reduces for both) and within one process (the shm transport),
 * nothing is checked: the record is marked missed (span 0), so the step reads its gradients
 * again.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "strata/strata.h"
#include "drivers/comm_blocks.h"
#include "drivers/comm_workers.h"
#include "drivers/net.h"
#include "strategy/process/process.h"

#define COUNT 1003
#define MAXR 4
#define ROUNDS 7

/*
 * Each round's input: finite, or one bad element (of process at % 2) at element at; a finite
 * round after each bad one (the record's verdict is cleared when taken).
 */
enum bad { FINITE, NAN_ONE, INF_ONE, OVERFLOW };
static const struct {
        enum bad bad;
        size_t at;
} rounds[ROUNDS] = { { FINITE, 0 }, { NAN_ONE, 0 },       { FINITE, 0 }, { INF_ONE, 501 },
                     { FINITE, 0 }, { OVERFLOW, 1002 },   { NAN_ONE, 17 } };

/* What every global rank saw, in memory the processes share. */
struct result {
        int rc[ROUNDS][MAXR], nf[ROUNDS][MAXR], same[ROUNDS][MAXR];
        size_t span[ROUNDS][MAXR];
        char why[256];
};
static struct result *shared;

struct call {
        struct strata_comm *c;
        int round;
        float *g[MAXR], *ref[MAXR];
};

static float input(int g, size_t i)
{
        return (float)(sin((double)i * 0.37 + (double)g * 1.3) * (g % 2 ? 3e-4 : 1.7e3));
}

static int one(int rank, void *arg)
{
        struct call *cl = arg;
        int g = strata_comm_rank(cl->c, rank), k = cl->round;

        for (size_t i = 0; i < COUNT; i++)
                cl->g[rank][i] = input(g, i);
        if ((rounds[k].bad == NAN_ONE || rounds[k].bad == INF_ONE) &&
            (size_t)g == rounds[k].at % 2)
                cl->g[rank][rounds[k].at] = rounds[k].bad == NAN_ONE ? NAN : -INFINITY;
        if (rounds[k].bad == OVERFLOW) /* every input finite, their sum is not */
                cl->g[rank][rounds[k].at] = 3e38f;
        memcpy(cl->ref[rank], cl->g[rank], COUNT * sizeof(float));
        shared->rc[k][g] = strata__comm_all_reduce_checked(cl->c, rank, cl->g[rank], COUNT,
                                                           STRATA_OP_SUM);
        shared->nf[k][g] = strata__comm_checked(cl->c, rank, &shared->span[k][g]);
        if (strata_comm_all_reduce(cl->c, rank, cl->ref[rank], cl->ref[rank], COUNT, STRATA_F32,
                                   STRATA_OP_SUM) != STRATA_OK)
                return STRATA_EIO;
        shared->same[k][g] = !memcmp(cl->g[rank], cl->ref[rank], COUNT * sizeof(float));
        return STRATA_OK;
}

/* Every round on this process's @p devices ranks of @p world (@p net: the link, or NULL). */
static int run_rounds(int world, int devices, int rank0, struct strata_net *net)
{
        struct strata__workers_config wc = STRATA__WORKERS_CONFIG_INIT;
        struct strata_comm_config cc = STRATA_COMM_CONFIG_INIT;
        struct strata_arena arena;
        struct strata__workers *w;
        struct call cl = { 0 };
        struct strata_group grp;
        size_t wb, cb;
        int rc = 0;

        wc.devices = devices;
        wc.timeout_s = 30.0;
        cc = (struct strata_comm_config){ .world_size = world, .rank0 = rank0,
                                          .local_size = devices, .net = net };
        if (strata__workers_plan(&wc, &wb) || strata_comm_plan_config(&cc, &cb) ||
            strata_arena_map(&arena, wb + cb + STRATA_MIB(1), NULL))
                return 10;
        if (strata__workers_start(&w, &arena, &wc))
                return 11;
        strata__workers_group(w, &grp);
        cc.group = &grp;
        if (strata_comm_init(&cl.c, &arena, &cc))
                rc = 12;
        for (int r = 0; r < devices && !rc; r++) {
                void *p = NULL, *q = NULL;

                if (strata_arena_alloc(&arena, COUNT * sizeof(float), 64, &p) ||
                    strata_arena_alloc(&arena, COUNT * sizeof(float), 64, &q))
                        rc = 13;
                cl.g[r] = p;
                cl.ref[r] = q;
        }
        for (int k = 0; k < ROUNDS && !rc; k++) {
                cl.round = k;
                if (strata__workers_run(w, one, &cl) != STRATA_OK)
                        rc = 14;
        }
        if (rc)
                snprintf(shared->why, sizeof(shared->why), "rank0 %d: %s", rank0,
                         strata_last_error());
        if (strata__workers_stop(w))
                rc = rc ? rc : 15;
        strata_arena_release(&arena);
        return rc;
}

static int child(int rank, int size, void *arg)
{
        struct strata_net net = { .ops = &strata__shm_spawn_link };
        int devices = *(const int *)arg, rc;

        if (net.ops->open(&net, strata__spawned()))
                return 20;
        rc = run_rounds(size * devices, devices, rank * devices, &net);
        net.ops->close(&net);
        return rc;
}

/* Every rank's sums the unchecked ones'; @p checked: the records say what the rounds hold. */
static void expect(int world, int checked, const char *what)
{
        for (int k = 0; k < ROUNDS; k++)
                for (int g = 0; g < world; g++) {
                        cr_assert_eq(shared->rc[k][g], STRATA_OK, "%s, round %d, rank %d", what,
                                     k, g);
                        cr_assert(shared->same[k][g], "%s, round %d, rank %d: the checked sums "
                                  "differ from the unchecked all-reduce's", what, k, g);
                        cr_assert_eq(shared->span[k][g], checked ? (size_t)COUNT : 0,
                                     "%s, round %d, rank %d: span %zu", what, k, g,
                                     shared->span[k][g]);
                        cr_assert_eq(shared->nf[k][g], checked && rounds[k].bad != FINITE,
                                     "%s, round %d (kind %d at %zu), rank %d: verdict %d", what,
                                     k, (int)rounds[k].bad, rounds[k].at, g, shared->nf[k][g]);
                }
}

/* @p procs processes of @p devices ranks each, spawned, the rounds run and checked. */
static void spawned(int procs, int devices)
{
        struct strata_spawn_result res;
        int rc;

        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan (fork of a threaded runner, see processes.c)");
        shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                      -1, 0);
        cr_assert_neq(shared, MAP_FAILED);
        memset(shared, 0, sizeof(*shared));
        rc = strata_spawn(procs, child, &devices, 60.0, NULL, 0, &res);
        cr_assert_eq(rc, STRATA_OK, "%dx%d: %s (%s)", procs, devices, res.why, shared->why);
        expect(procs * devices, devices == 1,
               procs == 3 ? "3 processes x 1" : devices == 1 ? "2 processes x 1"
                                                             : "2 processes x 2");
        munmap(shared, sizeof(*shared));
}

Test(net_checked, two_processes_one_rank_each_check, .timeout = 120)
{
        spawned(2, 1);
}

/* Three processes: the direct schedule's sum of every peer's part, then a scan of it. */
Test(net_checked, three_processes_one_rank_each_check, .timeout = 120)
{
        spawned(3, 1);
}

Test(net_checked, two_ranks_a_process_are_not_checked, .timeout = 120)
{
        spawned(2, 2);
}

Test(net_checked, one_process_is_not_checked, .timeout = 60)
{
        static struct result r;

        shared = &r;
        memset(shared, 0, sizeof(*shared));
        cr_assert_eq(run_rounds(2, 2, 0, NULL), 0, "%s", shared->why);
        expect(2, 0, "one process x 2");
}
