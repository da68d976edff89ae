/*
 * The net transport's butterfly schedules (5 processes or more, docs/decisions/0035) and the
 * world's order of summation: W ranks split into processes as P x D give bitwise what one
 * process of W ranks gives (shm), for every collective, for f32/f64/integer sums, means,
 * max, small (recursive doubling) and large (halving and doubling, several rounds) counts,
 * every kind of root; with W = 2^k (8 x 1), with pairs that fold first (6 x 1, 6 x 2) and
 * with pairs across processes (5 x 3), beside direct schedules (2 x 4, 3 x 2). A process
 * whose rank passes bad arguments, or that disagrees, makes every rank of every process
 * return STRATA_EINVAL with nothing written, and the communicator goes on.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "strata/strata.h"
#include "drivers/comm_workers.h"
#include "drivers/net.h"
#include "strategy/process/process.h"

#define MAX_WORLD 16
#define MAX_CASES 96
#define BIG 300001 /* f32 rounds of 1 MiB / D: several rounds in every layout */

enum bad { GOOD, COUNT_RANK3, NULL_SEND_RANK2, ROOT_RANK1 };

struct kase {
        enum strata_coll_kind kind;
        enum strata_dtype dt;
        int op, root;
        size_t count;
        enum bad bad;
};

struct result {
        int rc[MAX_CASES][MAX_WORLD];
        size_t off[MAX_CASES];
        char why[256];
        unsigned char data[];
};

static struct kase cases[MAX_CASES];
static int ncases, world;
static struct result *shared;
static size_t data_bytes;

static void add(enum strata_coll_kind kind, enum strata_dtype dt, int op, size_t count, int root,
                enum bad bad)
{
        cr_assert_lt(ncases, MAX_CASES);
        cases[ncases++] = (struct kase){ kind, dt, op, root, count, bad };
}

static void make_cases(void)
{
        static const enum strata_dtype dts[] = { STRATA_F32, STRATA_F64, STRATA_I32 };
        static const size_t counts[] = { 0, 1, 7, 1001, BIG };

        ncases = 0;
        for (size_t d = 0; d < 3; d++)
                for (size_t n = 0; n < 5; n++) {
                        add(STRATA_COLL_ALL_REDUCE, dts[d], STRATA_OP_SUM, counts[n], 0, GOOD);
                        add(STRATA_COLL_ALL_REDUCE, dts[d], (int)(1 + n % 3), counts[n], 0,
                            GOOD); /* mean, max, min */
                        add(STRATA_COLL_REDUCE, dts[d], STRATA_OP_SUM, counts[n],
                            (int)(d + n) % world, GOOD);
                        add(STRATA_COLL_BROADCAST, dts[d], 0, counts[n], (int)(d * 2 + n) % world,
                            GOOD);
                }
        add(STRATA_COLL_ALL_REDUCE, STRATA_F32, STRATA_OP_MEAN, BIG, 0, GOOD);
        add(STRATA_COLL_ALL_REDUCE, STRATA_F64, STRATA_OP_SUM_TREE, 1001, 0, GOOD);
        add(STRATA_COLL_ALL_REDUCE, STRATA_I64, STRATA_OP_SUM_TREE, BIG, 0, GOOD);
        for (size_t n = 0; n < 4; n++) {
                add(STRATA_COLL_ALL_GATHER, STRATA_F32, 0, counts[n], 0, GOOD);
                add(STRATA_COLL_GATHER, STRATA_F64, 0, counts[n], (int)n % world, GOOD);
                add(STRATA_COLL_SCATTER, STRATA_I32, 0, counts[n], (int)(n + 1) % world, GOOD);
                add(STRATA_COLL_REDUCE_SCATTER, STRATA_F32, (int)n % 3, counts[n], 0, GOOD);
        }
        add(STRATA_COLL_ALL_GATHER, STRATA_F32, 0, 70001, 0, GOOD);
        add(STRATA_COLL_REDUCE_SCATTER, STRATA_F32, STRATA_OP_SUM, 30011, 0, GOOD);
        add(STRATA_COLL_SCATTER, STRATA_F64, 0, 30011, world - 1, GOOD);
        add(STRATA_COLL_BARRIER, STRATA_F32, 0, 0, 0, GOOD);
        add(STRATA_COLL_ALL_REDUCE, STRATA_F32, STRATA_OP_SUM, 33, 0, COUNT_RANK3);
        add(STRATA_COLL_ALL_REDUCE, STRATA_F32, STRATA_OP_SUM, BIG, 0, COUNT_RANK3);
        add(STRATA_COLL_ALL_GATHER, STRATA_F32, 0, 7, 0, NULL_SEND_RANK2);
        add(STRATA_COLL_BROADCAST, STRATA_F64, 0, 7, 0, ROOT_RANK1);
        add(STRATA_COLL_ALL_REDUCE, STRATA_F32, STRATA_OP_SUM, BIG, 0, GOOD); /* goes on */
}

/* Element i of global rank g's send buffer: sums that round differently in another order. */
static void fill(enum strata_dtype dt, void *p, size_t n, int g)
{
        for (size_t i = 0; i < n; i++) {
                double v = sin((double)i * 0.37 + g * 1.3) * (g % 2 ? 3e-4 : 1.7e3) +
                           (double)((i + (size_t)g) % 5);
                int64_t k = (int64_t)((i * 2654435761u + (size_t)g * 40503u) % 2001) - 1000;

                if (dt == STRATA_F32)
                        ((float *)p)[i] = (float)v;
                else if (dt == STRATA_F64)
                        ((double *)p)[i] = v;
                else if (dt == STRATA_I32)
                        ((int32_t *)p)[i] = (int32_t)k;
                else
                        ((int64_t *)p)[i] = k * 3000000007ll;
        }
}

static int gathers(const struct kase *k)
{
        return k->kind == STRATA_COLL_ALL_GATHER || k->kind == STRATA_COLL_GATHER;
}

static int scatters(const struct kase *k)
{
        return k->kind == STRATA_COLL_SCATTER || k->kind == STRATA_COLL_REDUCE_SCATTER;
}

/* Bytes a rank sends, and receives. */
static size_t send_bytes(const struct kase *k)
{
        return k->count * strata_dtype_size(k->dt) * (scatters(k) ? (size_t)world : 1);
}

static size_t recv_bytes(const struct kase *k)
{
        return k->count * strata_dtype_size(k->dt) * (gathers(k) ? (size_t)world : 1);
}

struct call {
        struct strata_comm *c;
        const struct kase *k;
        void *send[MAX_WORLD], *recv[MAX_WORLD];
        int rc[MAX_WORLD];
};

static int one(int rank, void *arg)
{
        struct call *cl = arg;
        const struct kase *k = cl->k;
        int g = strata_comm_rank(cl->c, rank);
        struct strata_coll op = { .kind = k->kind, .send = cl->send[rank], .recv = cl->recv[rank],
                                  .count = k->count, .dtype = k->dt, .op = k->op,
                                  .root = k->root };

        if (k->kind == STRATA_COLL_BROADCAST)
                op.send = op.recv;
        if (k->bad == COUNT_RANK3 && g == 3)
                op.count++;
        if (k->bad == NULL_SEND_RANK2 && g == 2)
                op.send = NULL;
        if (k->bad == ROOT_RANK1 && g == 1)
                op.root = 2;
        cl->rc[rank] = strata_comm_run(cl->c, rank, &op);
        return STRATA_OK;
}

static int run_case(struct strata_comm *c, struct strata__workers *w, struct strata_arena *a,
                    int i)
{
        const struct kase *k = &cases[i];
        size_t ns = send_bytes(k), nr = recv_bytes(k);
        struct call cl = { .c = c, .k = k };
        int n = strata_comm_local_size(c);

        for (int r = 0; r < n; r++) {
                int g = strata_comm_rank(c, r);

                if (strata_arena_alloc(a, ns + 64, 64, &cl.send[r]) ||
                    strata_arena_alloc(a, nr + 64, 64, &cl.recv[r]))
                        return 1;
                fill(k->dt, cl.send[r], ns / strata_dtype_size(k->dt), g);
                memset(cl.recv[r], 0xA5, nr);
                if (k->kind == STRATA_COLL_BROADCAST && g == k->root)
                        fill(k->dt, cl.recv[r], k->count, g);
        }
        if (strata__workers_run(w, one, &cl) != STRATA_OK)
                return 2;
        for (int r = 0; r < n; r++) {
                int g = strata_comm_rank(c, r);

                shared->rc[i][g] = cl.rc[r];
                memcpy(shared->data + shared->off[i] + (size_t)g * nr, cl.recv[r], nr);
        }
        return strata_arena_reset(a) ? 3 : 0;
}

static int run_cases(int devices, int rank0, struct strata_net *net)
{
        struct strata__workers_config wc = STRATA__WORKERS_CONFIG_INIT;
        struct strata_comm_config cc = STRATA_COMM_CONFIG_INIT;
        struct strata_arena arena, scratch;
        struct strata__workers *w;
        struct strata_comm *c;
        struct strata_group g;
        size_t wb, cb;
        int rc = 0;

        wc.devices = devices;
        wc.timeout_s = 60.0;
        cc = (struct strata_comm_config){ .world_size = world, .rank0 = rank0,
                                          .local_size = devices, .net = net };
        if (strata__workers_plan(&wc, &wb) || strata_comm_plan_config(&cc, &cb) ||
            strata_arena_map(&arena, wb + cb + STRATA_KIB(64), NULL) ||
            strata_arena_map(&scratch, STRATA_MIB(96), NULL))
                return 10;
        if (strata__workers_start(&w, &arena, &wc))
                return 11;
        strata__workers_group(w, &g);
        cc.group = &g;
        if (strata_comm_init(&c, &arena, &cc))
                rc = 12;
        else if (strcmp(strata_comm_transport(c), net ? "net" : "shm"))
                rc = 14;
        for (int i = 0; i < ncases && !rc; i++)
                rc = run_case(c, w, &scratch, i);
        if (rc)
                snprintf(shared->why, sizeof(shared->why), "rank0 %d: %s", rank0,
                         strata_last_error());
        if (strata__workers_stop(w))
                rc = rc ? rc : 13;
        strata_arena_release(&arena);
        strata_arena_release(&scratch);
        return rc;
}

static int child(int rank, int size, void *arg)
{
        struct strata_net net = { .ops = &strata__shm_spawn_link };
        int rc;

        (void)arg;
        if (net.ops->open(&net, strata__spawned()))
                return 20;
        rc = run_cases(world / size, rank * (world / size), &net);
        net.ops->close(&net);
        return rc;
}

static struct result *map_result(void)
{
        size_t off[MAX_CASES], end = 0;
        struct result *r;

        for (int i = 0; i < ncases; i++) {
                off[i] = (end + 63) / 64 * 64;
                end = off[i] + recv_bytes(&cases[i]) * (size_t)world;
        }
        data_bytes = end;
        r = mmap(NULL, sizeof(*r) + data_bytes, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        cr_assert_neq(r, MAP_FAILED);
        memcpy(r->off, off, sizeof(off));
        return r;
}

static void clear(void)
{
        size_t off[MAX_CASES];

        memcpy(off, shared->off, sizeof(off));
        memset(shared, 0, sizeof(*shared) + data_bytes);
        memcpy(shared->off, off, sizeof(off));
}

/* The pairwise tree of f32/f64 over a world not a power of two is not halving's order: more
 * than 4 processes refuse it (docs/decisions/0035). */
static int refused(const struct kase *k, int procs)
{
        return procs > 4 && k->op == STRATA_OP_SUM_TREE && (world & (world - 1)) &&
               (k->dt == STRATA_F32 || k->dt == STRATA_F64) && k->kind != STRATA_COLL_BROADCAST;
}

static void same_as(const struct result *ref, int procs)
{
        struct strata_spawn_result res;
        int rc, d = world / procs;

        clear();
        rc = strata_spawn(procs, child, NULL, 120.0, NULL, 0, &res);
        cr_assert_eq(rc, STRATA_OK, "%dx%d: %s (%s)", procs, d, res.why, shared->why);
        for (int i = 0; i < ncases; i++) {
                const struct kase *k = &cases[i];

                if (refused(k, procs)) {
                        for (int g = 0; g < world; g++)
                                cr_assert_eq(shared->rc[i][g], STRATA_ENOTSUP);
                        continue;
                }
                for (int g = 0; g < world; g++)
                        cr_assert_eq(shared->rc[i][g], ref->rc[i][g], "%dx%d, case %d (kind %d "
                                     "dtype %d op %d count %zu bad %d): rank %d returned %d, "
                                     "one process %d", procs, d, i, k->kind, k->dt, k->op,
                                     k->count, k->bad, g, shared->rc[i][g], ref->rc[i][g]);
                for (int g = 0; g < world; g++) {
                        size_t nr = recv_bytes(k), at = ref->off[i] + (size_t)g * nr;

                        if (k->kind == STRATA_COLL_GATHER && g != k->root)
                                continue;
                        if (k->kind == STRATA_COLL_REDUCE && g != k->root)
                                continue;
                        cr_assert_eq(memcmp(shared->data + at, ref->data + at, nr), 0,
                                     "%dx%d, case %d (kind %d dtype %d op %d count %zu bad %d): "
                                     "rank %d's result differs from one process's", procs, d, i,
                                     k->kind, k->dt, k->op, k->count, k->bad, g);
                }
        }
}

static void reference(struct result *ref)
{
        clear();
        cr_assert_eq(run_cases(world, 0, NULL), 0, "%s", shared->why);
        memcpy(ref, shared, sizeof(*shared) + data_bytes);
        for (int i = 0; i < ncases; i++)
                for (int g = 0; g < world; g++)
                        cr_assert_eq(ref->rc[i][g], cases[i].bad ? STRATA_EINVAL : STRATA_OK,
                                     "one process, case %d rank %d: %d", i, g, ref->rc[i][g]);
}

/* World @p w, one process against each of the splits @p procs (0-terminated). */
static void layouts(int w, const int *procs)
{
        struct result *ref;

        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan (fork of a threaded runner, see processes.c)");
        world = w;
        make_cases();
        shared = map_result();
        ref = map_result();
        reference(ref);
        for (; *procs; procs++)
                same_as(ref, *procs);
        munmap(ref, sizeof(*ref) + data_bytes);
        munmap(shared, sizeof(*shared) + data_bytes);
}

Test(net_butterfly, world8, .timeout = 600)
{
        static const int procs[] = { 8, 2, 0 };

        layouts(8, procs);
}

Test(net_butterfly, world6, .timeout = 600)
{
        static const int procs[] = { 6, 3, 0 };

        layouts(6, procs);
}

Test(net_butterfly, world12, .timeout = 600)
{
        static const int procs[] = { 6, 0 };

        layouts(12, procs);
}

Test(net_butterfly, world15, .timeout = 600)
{
        static const int procs[] = { 5, 0 };

        layouts(15, procs);
}
