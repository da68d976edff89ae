/*
 * reduce_scatter and scatter across processes (the net transport over strata_spawn()'s link):
 * 4 ranks as 2 processes x 2 and 4 x 1 give bitwise what 1 x 4 gives in one process (shm), for
 * every dtype and op, counts 0, 1, odd and large enough for several exchanges, every root. In
 * place is refused on every rank, as in one process; a process whose rank passes bad
 * arguments, or that disagrees with the others, makes every rank of every process return
 * STRATA_EINVAL with nothing written (an all_reduce too: the local ranks of the process that
 * agreed learn it from their local rank 0), and the communicator goes on.
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

#define WORLD 4
#define MAX_CASES 256
#define BIG 300001 /* f32 blocks of 1.2 MB: several exchanges in every layout */

/* How a case goes wrong, if it does (every rank then returns STRATA_EINVAL). */
enum bad { GOOD, IN_PLACE, COUNT_RANK3, ROOT_RANK1, NULL_SEND_RANK2 };

struct kase {
        enum strata_coll_kind kind;
        enum strata_dtype dt;
        int op, root;
        size_t count;
        enum bad bad;
};

/* What a layout's ranks returned and received, in memory the processes share. */
struct result {
        int rc[MAX_CASES][WORLD];
        size_t off[MAX_CASES]; /* where each case's received blocks start in data */
        char why[256];         /* a process's failure */
        unsigned char data[];  /* per case, every global rank's count elements in rank order */
};

static struct kase cases[MAX_CASES];
static int ncases;
static struct result *shared; /* the layout under test writes here */
static size_t data_bytes;

static void add(enum strata_coll_kind kind, enum strata_dtype dt, int op, size_t count, int root,
                enum bad bad)
{
        cr_assert_lt(ncases, MAX_CASES);
        cases[ncases++] = (struct kase){ kind, dt, op, root, count, bad };
}

static void make_cases(void)
{
        static const enum strata_dtype dts[] = { STRATA_F32, STRATA_F64, STRATA_BF16,
                                                 STRATA_F16, STRATA_I32, STRATA_I64 };
        static const size_t counts[] = { 0, 1, 7, 33, 1001 };

        ncases = 0;
        for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++) {
                for (size_t n = 0; n < sizeof(counts) / sizeof(counts[0]); n++) {
                        for (int op = 0; op < STRATA_OP_COUNT; op++)
                                if (op != STRATA_OP_SUM_TREE || strata_dtype_size(dts[d]) > 2)
                                        add(STRATA_COLL_REDUCE_SCATTER, dts[d], op, counts[n],
                                            0, GOOD); /* halves: no tree (shm_bad_input) */
                        add(STRATA_COLL_SCATTER, dts[d], 0, counts[n], (int)(d + n) % WORLD,
                            GOOD);
                }
                add(STRATA_COLL_REDUCE_SCATTER, dts[d], (int)d % STRATA_OP_COUNT, BIG, 0, GOOD);
                add(STRATA_COLL_SCATTER, dts[d], 0, BIG, (int)d % WORLD, GOOD);
        }
        add(STRATA_COLL_REDUCE_SCATTER, STRATA_F32, STRATA_OP_SUM, 33, 0, IN_PLACE);
        add(STRATA_COLL_SCATTER, STRATA_F64, 0, 33, 2, IN_PLACE);
        add(STRATA_COLL_REDUCE_SCATTER, STRATA_F32, STRATA_OP_SUM, 33, 0, COUNT_RANK3);
        add(STRATA_COLL_SCATTER, STRATA_I32, 0, 7, 0, ROOT_RANK1);
        add(STRATA_COLL_REDUCE_SCATTER, STRATA_BF16, STRATA_OP_MEAN, BIG, 0, NULL_SEND_RANK2);
        add(STRATA_COLL_ALL_REDUCE, STRATA_F32, STRATA_OP_SUM, 33, 0, COUNT_RANK3);
        add(STRATA_COLL_REDUCE_SCATTER, STRATA_F32, STRATA_OP_SUM, 1001, 0, GOOD); /* goes on */
}

/* Element i of global rank g's send buffer: magnitudes whose sums round differently in
 * another order; half floats from bit patterns that keep every sum finite. */
static void fill(enum strata_dtype dt, void *p, size_t n, int g)
{
        for (size_t i = 0; i < n; i++) {
                double v = sin((double)i * 0.37 + g * 1.3) * (g % 2 ? 3e-4 : 1.7e3) +
                           (double)((i + (size_t)g) % 5);
                int64_t k = (int64_t)((i * 2654435761u + (size_t)g * 40503u) % 2001) - 1000;
                float f = (float)v;
                uint32_t u;

                memcpy(&u, &f, sizeof(u));
                switch (dt) {
                case STRATA_F32: ((float *)p)[i] = f; break;
                case STRATA_F64: ((double *)p)[i] = v; break;
                case STRATA_BF16: ((uint16_t *)p)[i] = (uint16_t)(u >> 16); break;
                case STRATA_F16:
                        ((uint16_t *)p)[i] = (uint16_t)(((i + (size_t)g) & 1) << 15 |
                                                        ((i * 3 + (size_t)g) % 20 + 5) << 10 |
                                                        ((i * 37 + (size_t)g * 101) & 0x3ff));
                        break;
                case STRATA_I32: ((int32_t *)p)[i] = (int32_t)k; break;
                case STRATA_I64: ((int64_t *)p)[i] = k * 3000000007ll; break;
                default: break;
                }
        }
}

/* Bytes of a case's send buffer, and of every rank's received block together. */
static size_t case_bytes(const struct kase *k)
{
        return k->count * WORLD * strata_dtype_size(k->dt);
}

/* One case on this process's ranks: their buffers, and what each returned. */
struct call {
        struct strata_comm *c;
        const struct kase *k;
        void *send[WORLD], *recv[WORLD];
        int rc[WORLD];
};

static int one(int rank, void *arg)
{
        struct call *cl = arg;
        const struct kase *k = cl->k;
        int g = strata_comm_rank(cl->c, rank);
        struct strata_coll op = { .kind = k->kind, .send = cl->send[rank], .recv = cl->recv[rank],
                                  .count = k->count, .dtype = k->dt, .op = k->op,
                                  .root = k->root };

        if (k->kind == STRATA_COLL_SCATTER && g != k->root)
                op.send = NULL;
        if (k->bad == IN_PLACE)
                op.send = op.recv;
        if (k->bad == COUNT_RANK3 && g == 3)
                op.count++;
        if (k->bad == ROOT_RANK1 && g == 1)
                op.root = 2;
        if (k->bad == NULL_SEND_RANK2 && g == 2)
                op.send = NULL;
        cl->rc[rank] = strata_comm_run(cl->c, rank, &op);
        return STRATA_OK; /* statuses are compared by the test */
}

/* Case @p i on this process's ranks; their received blocks and statuses into *shared. */
static int run_case(struct strata_comm *c, struct strata__workers *w, struct strata_arena *a,
                    int i)
{
        const struct kase *k = &cases[i];
        size_t es = strata_dtype_size(k->dt), ns = case_bytes(k);
        size_t nr = k->bad == IN_PLACE ? ns : k->count * es;
        struct call cl = { .c = c, .k = k };
        int n = strata_comm_local_size(c);

        for (int r = 0; r < n; r++) {
                if (strata_arena_alloc(a, ns + 64, 64, &cl.send[r]) ||
                    strata_arena_alloc(a, nr + 64, 64, &cl.recv[r]))
                        return 1;
                fill(k->dt, cl.send[r], k->count * WORLD, strata_comm_rank(c, r));
                memset(cl.recv[r], 0xA5, nr);
        }
        if (strata__workers_run(w, one, &cl) != STRATA_OK)
                return 2;
        for (int r = 0; r < n; r++) {
                int g = strata_comm_rank(c, r);

                shared->rc[i][g] = cl.rc[r];
                memcpy(shared->data + shared->off[i] + (size_t)g * k->count * es, cl.recv[r],
                       k->count * es);
        }
        return strata_arena_reset(a) ? 3 : 0;
}

/* Every case on this process's @p devices ranks of WORLD (@p net: the link, or NULL). */
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
        wc.timeout_s = 30.0;
        cc = (struct strata_comm_config){ .world_size = WORLD, .rank0 = rank0,
                                          .local_size = devices, .net = net };
        if (strata__workers_plan(&wc, &wb) || strata_comm_plan_config(&cc, &cb) ||
            strata_arena_map(&arena, wb + cb + STRATA_KIB(64), NULL) ||
            strata_arena_map(&scratch, STRATA_MIB(64), NULL))
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

/* A process of a spawned job: its link to the others, then every case. */
static int child(int rank, int size, void *arg)
{
        struct strata_net net = { .ops = &strata__shm_spawn_link };
        int rc;

        (void)arg;
        if (net.ops->open(&net, strata__spawned()))
                return 20;
        rc = run_cases(WORLD / size, rank * (WORLD / size), &net);
        net.ops->close(&net);
        return rc;
}

/* A result the processes share, its cases' offsets laid out. */
static struct result *map_result(void)
{
        size_t off[MAX_CASES], end = 0;
        struct result *r;

        for (int i = 0; i < ncases; i++) {
                off[i] = (end + 63) / 64 * 64;
                end = off[i] + case_bytes(&cases[i]);
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

/* @p procs processes of WORLD / procs ranks each give bitwise @p ref's statuses and blocks. */
static void same_as(const struct result *ref, int procs)
{
        struct strata_spawn_result res;
        int rc;

        clear();
        rc = strata_spawn(procs, child, NULL, 60.0, NULL, 0, &res);
        cr_assert_eq(rc, STRATA_OK, "%dx%d: %s (%s)", procs, WORLD / procs, res.why,
                     shared->why);
        for (int i = 0; i < ncases; i++) {
                const struct kase *k = &cases[i];
                size_t bytes = case_bytes(k);

                for (int g = 0; g < WORLD; g++)
                        cr_assert_eq(shared->rc[i][g], ref->rc[i][g], "%dx%d, case %d (kind %d "
                                     "dtype %d op %d count %zu bad %d): rank %d returned %d, "
                                     "one process %d", procs, WORLD / procs, i, k->kind, k->dt,
                                     k->op, k->count, k->bad, g, shared->rc[i][g],
                                     ref->rc[i][g]);
                cr_assert_eq(memcmp(shared->data + shared->off[i], ref->data + ref->off[i],
                                    bytes), 0, "%dx%d, case %d (kind %d dtype %d op %d count "
                             "%zu bad %d): blocks differ from one process's", procs,
                             WORLD / procs, i, k->kind, k->dt, k->op, k->count, k->bad);
        }
}

/* One process of 4 ranks, into @p ref: its statuses as the protocol promises. */
static void reference(struct result *ref)
{
        clear();
        cr_assert_eq(run_cases(WORLD, 0, NULL), 0, "%s", shared->why);
        memcpy(ref, shared, sizeof(*shared) + data_bytes);
        for (int i = 0; i < ncases; i++)
                for (int g = 0; g < WORLD; g++)
                        cr_assert_eq(ref->rc[i][g], cases[i].bad ? STRATA_EINVAL : STRATA_OK,
                                     "one process, case %d rank %d: %d", i, g, ref->rc[i][g]);
}

static void layout(int procs)
{
        struct result *ref;

        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan (fork of a threaded runner, see processes.c)");
        make_cases();
        shared = map_result();
        ref = map_result();
        reference(ref);
        same_as(ref, procs);
        munmap(ref, sizeof(*ref) + data_bytes);
        munmap(shared, sizeof(*shared) + data_bytes);
}

Test(net_scatter, two_by_two, .timeout = 240)
{
        layout(2);
}

Test(net_scatter, four_by_one, .timeout = 240)
{
        layout(4);
}
