/*
 * Collectives over blocks (drivers/comm_blocks.h, docs/decisions/0045): a reduce-scatter whose
 * pieces are the owners' parts of a span of ZeRO shards gives, with uneven and empty pieces,
 * in place or not, over several rounds, bitwise what one strata_comm_reduce per piece gives
 * (the path zero2 and fsdp took before), in one process (shm) and split into processes (net:
 * direct schedules at 2 and 4 processes, recursive halving from 5, with and without pairs);
 * the all-gather over blocks gives every rank the span. Bad arguments on any rank make every
 * rank refuse, with nothing written.
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
#include "tests/support/pool.h"

#define MAX_WORLD 16
#define MAX_CASES 24

enum mode { BLOCKS, PIECES };

struct kase {
        int gather, in_place;
        enum strata_dtype dt;
        int op;
        size_t count, lo, block;
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

static void add(int gather, int in_place, enum strata_dtype dt, int op, size_t count, size_t lo,
                size_t block)
{
        cr_assert_lt(ncases, MAX_CASES);
        cases[ncases++] = (struct kase){ gather, in_place, dt, op, count, lo, block };
}

/* Spans that meet every block, a few, one, the last; uneven and empty pieces; many rounds. */
static void make_cases(void)
{
        size_t W = (size_t)world;

        ncases = 0;
        for (int g = 0; g < 2; g++) {
                add(g, 0, STRATA_F32, STRATA_OP_SUM, 16 * W, 0, 16);
                add(g, 0, STRATA_F32, STRATA_OP_SUM, 2300, 1500, 1000);
                add(g, 1, STRATA_F32, STRATA_OP_SUM, 2300, 1500, 1000);
                add(g, 0, STRATA_F32, STRATA_OP_SUM, 7, 1000 * W - 9, 1000);
                add(g, 0, STRATA_F32, STRATA_OP_SUM, 0, 5, 16);
                add(g, 0, STRATA_F32, STRATA_OP_SUM, 600001, 37, 600100 / W + 16);
                add(g, 0, STRATA_F32, STRATA_OP_SUM, 600001, 37, 300100); /* rounds in a piece */
                add(g, 1, STRATA_F32, STRATA_OP_SUM, 300003, (400100 / W + 32) - 11,
                    400100 / W + 32);
        }
        add(0, 0, STRATA_F64, STRATA_OP_SUM, 30011, 100, 30200 / W);
        add(0, 0, STRATA_F32, STRATA_OP_MEAN, 5003, 0, 5008 / W + 16);
        add(0, 1, STRATA_F32, STRATA_OP_MAX, 333, 1, 336 / W + 16);
}

static size_t es_of(const struct kase *k)
{
        return strata_dtype_size(k->dt);
}

/* Element i of global rank g's span: sums that round differently in another order. */
static double value(size_t i, int g)
{
        return sin((double)i * 0.37 + g * 1.3) * (g % 2 ? 3e-4 : 1.7e3) + (double)((i + (size_t)g) % 5);
}

static void put(const struct kase *k, void *p, size_t i, double v)
{
        if (k->dt == STRATA_F32)
                ((float *)p)[i] = (float)v;
        else
                ((double *)p)[i] = v;
}

static void piece(const struct kase *k, int g, size_t *a, size_t *e)
{
        size_t x = (size_t)g * k->block, y = x + k->block, hi = k->lo + k->count;

        x = x < k->lo ? k->lo : x > hi ? hi : x;
        y = y < k->lo ? k->lo : y > hi ? hi : y;
        *a = x - k->lo;
        *e = y - k->lo;
}

/* What a case leaves: a reduce-scatter its pieces (the span once); a gather every rank's span. */
static size_t out_bytes(const struct kase *k)
{
        return k->count * es_of(k) * (k->gather ? (size_t)world : 1);
}

struct call {
        struct strata_comm *c;
        const struct kase *k;
        enum mode mode;
        unsigned char *send[MAX_WORLD], *recv[MAX_WORLD];
        int rc[MAX_WORLD];
};

static int one(int rank, void *arg)
{
        struct call *cl = arg;
        const struct kase *k = cl->k;
        int g = strata_comm_rank(cl->c, rank), rc = STRATA_OK;
        size_t es = es_of(k), a, e;

        piece(k, g, &a, &e);
        if (k->gather)
                rc = strata__comm_all_gather_blocks(cl->c, rank,
                                                    k->in_place ? cl->recv[rank] + a * es
                                                                : cl->send[rank],
                                                    cl->recv[rank], k->count, k->lo, k->block,
                                                    k->dt);
        else if (cl->mode == BLOCKS)
                rc = strata__comm_reduce_scatter_blocks(
                        cl->c, rank, cl->send[rank],
                        k->in_place ? cl->send[rank] + a * es : cl->recv[rank], k->count, k->lo,
                        k->block, k->dt, k->op);
        else /* zero2's path before: one reduce per piece, rooted at its owner */
                for (int o = 0; o < world && rc == STRATA_OK; o++) {
                        size_t oa, oe;

                        piece(k, o, &oa, &oe);
                        if (oa < oe)
                                rc = strata_comm_reduce(cl->c, rank, cl->send[rank] + oa * es,
                                                        cl->recv[rank], oe - oa, k->dt, k->op, o);
                }
        cl->rc[rank] = rc;
        return STRATA_OK;
}

static int run_case(struct strata_comm *c, struct strata__workers *w, struct strata_arena *a,
                    int i, enum mode mode)
{
        const struct kase *k = &cases[i];
        size_t es = es_of(k), span = k->count * es;
        struct call cl = { .c = c, .k = k, .mode = mode };
        int n = strata_comm_local_size(c);

        for (int r = 0; r < n; r++) {
                int g = strata_comm_rank(c, r);
                size_t pa, pe;
                void *p, *q;

                if (strata_arena_alloc(a, span + 64, 64, &p) ||
                    strata_arena_alloc(a, span + 64, 64, &q))
                        return 1;
                cl.send[r] = p;
                cl.recv[r] = q;
                memset(cl.recv[r], 0xA5, span + 64);
                piece(k, g, &pa, &pe);
                if (k->gather) { /* the owner's values, in its piece (send) or in place */
                        for (size_t j = pa; j < pe; j++)
                                put(k, k->in_place ? cl.recv[r] : cl.send[r],
                                    k->in_place ? j : j - pa, value(j, -1));
                } else {
                        for (size_t j = 0; j < k->count; j++)
                                put(k, cl.send[r], j, value(j, g));
                }
        }
        if (strata__workers_run(w, one, &cl) != STRATA_OK)
                return 2;
        for (int r = 0; r < n; r++) {
                int g = strata_comm_rank(c, r);
                size_t pa, pe;

                shared->rc[i][g] = cl.rc[r];
                piece(k, g, &pa, &pe);
                if (k->gather)
                        memcpy(shared->data + shared->off[i] + (size_t)g * span, cl.recv[r], span);
                else if (pe > pa)
                        memcpy(shared->data + shared->off[i] + pa * es,
                               k->in_place && mode == BLOCKS ? cl.send[r] + pa * es : cl.recv[r],
                               (pe - pa) * es);
        }
        return strata_arena_reset(a) ? 3 : 0;
}

static int run_cases(int devices, int rank0, struct strata_net *net, enum mode mode)
{
        struct strata__workers_config wc = STRATA__WORKERS_CONFIG_INIT;
        struct strata_comm_config cc;
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
            strata_arena_map(&scratch, STRATA_MIB(64), NULL))
                return 10;
        if (strata__workers_start(&w, &arena, &wc))
                return 11;
        strata__workers_group(w, &g);
        cc.group = &g;
        if (strata_comm_init(&c, &arena, &cc))
                rc = 12;
        for (int i = 0; i < ncases && !rc; i++)
                rc = run_case(c, w, &scratch, i, mode);
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
        rc = run_cases(world / size, rank * (world / size), &net, BLOCKS);
        net.ops->close(&net);
        return rc;
}

static struct result *map_result(void)
{
        size_t end = 0;
        struct result *r;

        for (int i = 0; i < ncases; i++)
                end = (end + 63) / 64 * 64 + out_bytes(&cases[i]);
        data_bytes = end;
        r = mmap(NULL, sizeof(*r) + data_bytes, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        cr_assert_neq(r, MAP_FAILED);
        end = 0;
        for (int i = 0; i < ncases; i++) {
                r->off[i] = (end + 63) / 64 * 64;
                end = r->off[i] + out_bytes(&cases[i]);
        }
        return r;
}

static void clear(struct result *r)
{
        size_t off[MAX_CASES];

        memcpy(off, r->off, sizeof(off));
        memset(r, 0, sizeof(*r) + data_bytes);
        memcpy(r->off, off, sizeof(off));
}

/* Every case returned OK and left what @p ref holds (a gather: the owners' values). */
static void same(const struct result *ref, const char *what)
{
        for (int i = 0; i < ncases; i++) {
                const struct kase *k = &cases[i];

                for (int g = 0; g < world; g++)
                        cr_assert_eq(shared->rc[i][g], STRATA_OK, "%s, case %d rank %d: %d",
                                     what, i, g, shared->rc[i][g]);
                if (k->gather) {
                        unsigned char want[8];

                        for (int g = 0; g < world; g++)
                                for (size_t j = 0; j < k->count; j++) {
                                        put(k, want, 0, value(j, -1));
                                        cr_assert_eq(memcmp(shared->data + shared->off[i] +
                                                                    ((size_t)g * k->count + j) *
                                                                            es_of(k),
                                                            want, es_of(k)),
                                                     0, "%s, gather case %d: rank %d element %zu",
                                                     what, i, g, j);
                                }
                        continue;
                }
                cr_assert_eq(memcmp(shared->data + shared->off[i], ref->data + ref->off[i],
                                    out_bytes(k)),
                             0, "%s, case %d (dtype %d op %d count %zu lo %zu block %zu, in "
                             "place %d): not the bits of one reduce per piece", what, i, k->dt,
                             k->op, k->count, k->lo, k->block, k->in_place);
        }
}

/* World @p w: one reduce per piece in one process is the reference; the blocks in one
 * process, then split into each of @p procs (0-terminated) processes, give its bits. */
static void layouts(int w, const int *procs)
{
        struct result *ref;
        char what[64];

        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan (fork of a threaded runner, see processes.c)");
        world = w;
        make_cases();
        shared = map_result();
        ref = map_result();
        clear(shared);
        cr_assert_eq(run_cases(world, 0, NULL, PIECES), 0, "%s", shared->why);
        memcpy(ref, shared, sizeof(*shared) + data_bytes);
        clear(shared);
        cr_assert_eq(run_cases(world, 0, NULL, BLOCKS), 0, "%s", shared->why);
        same(ref, "one process");
        for (; *procs; procs++) {
                struct strata_spawn_result res;
                int rc;

                clear(shared);
                rc = strata_spawn(*procs, child, NULL, 120.0, NULL, 0, &res);
                cr_assert_eq(rc, STRATA_OK, "%d processes: %s (%s)", *procs, res.why,
                             shared->why);
                snprintf(what, sizeof(what), "%d x %d", *procs, w / *procs);
                same(ref, what);
        }
        munmap(ref, sizeof(*ref) + data_bytes);
        munmap(shared, sizeof(*shared) + data_bytes);
}

Test(comm_blocks, world4, .timeout = 600)
{
        static const int procs[] = { 2, 4, 0 };

        layouts(4, procs);
}

Test(comm_blocks, world8, .timeout = 600)
{
        static const int procs[] = { 8, 2, 0 };

        layouts(8, procs);
}

Test(comm_blocks, world6, .timeout = 600)
{
        static const int procs[] = { 6, 3, 0 };

        layouts(6, procs);
}

Test(comm_blocks, world10_pairs_apart, .timeout = 600)
{
        static const int procs[] = { 5, 10, 0 };

        layouts(10, procs);
}

/* ---- Bad arguments (shm, 3 ranks): every rank refuses, nothing written, the next call runs ---- */

enum bad { B_NONE, B_BLOCK0, B_PAST, B_NULL_SEND, B_NULL_RECV, B_OVERLAP, B_LO_DIFFERS,
           B_OP, B_PUBLIC };

struct bad_call {
        struct strata_comm *c;
        int gather, bad_rank;
        enum bad bad;
        float *send[3], *recv[3];
        int rc[3];
};

/* Span [10, 10 + 40) of blocks of 16: pieces 6, 16, 16, 2 of ranks 0..3 (3 has none here:
 * 3 ranks own [0, 48), so the span ends at 48: pieces 6, 16, 16). */
#define BAD_LO 10
#define BAD_COUNT 38
#define BAD_BLOCK 16

static int bad_one(int rank, void *arg)
{
        struct bad_call *b = arg;
        size_t lo = BAD_LO, block = BAD_BLOCK, count = BAD_COUNT;
        const float *send = b->send[rank];
        float *recv = b->recv[rank];
        int op = STRATA_OP_SUM;

        if (rank == b->bad_rank) {
                switch (b->bad) {
                case B_BLOCK0:
                        block = 0;
                        break;
                case B_PAST:
                        count = BAD_COUNT + 1;
                        break;
                case B_NULL_SEND:
                        send = NULL;
                        break;
                case B_NULL_RECV:
                        recv = NULL;
                        break;
                case B_OVERLAP: /* not the piece's own place */
                        if (b->gather)
                                send = recv + 1;
                        else
                                recv = b->send[rank] + 1;
                        break;
                case B_LO_DIFFERS:
                        lo = BAD_LO - 1;
                        break;
                case B_OP:
                        op = STRATA_OP_COUNT;
                        break;
                case B_PUBLIC: {
                        struct strata_coll o = { .kind = (enum strata_coll_kind)(STRATA_COLL_COUNT),
                                                 .send = send, .recv = recv, .count = count,
                                                 .dtype = STRATA_F32 };

                        b->rc[rank] = strata_comm_run(b->c, rank, &o);
                        return STRATA_OK;
                }
                default:
                        break;
                }
        }
        b->rc[rank] = b->gather ? strata__comm_all_gather_blocks(b->c, rank, send, recv, count, lo,
                                                                 block, STRATA_F32)
                                : strata__comm_reduce_scatter_blocks(b->c, rank, send, recv, count,
                                                                     lo, block, STRATA_F32, op);
        return STRATA_OK;
}

static void bad_case(struct pool *p, int gather, enum bad bad, int bad_rank)
{
        static struct bad_call b;

        memset(&b, 0, sizeof(b));
        b.c = p->c;
        b.gather = gather;
        b.bad = bad;
        b.bad_rank = bad_rank;
        for (int r = 0; r < 3; r++) {
                b.send[r] = pool_alloc(p, 64 * sizeof(float));
                b.recv[r] = pool_alloc(p, 64 * sizeof(float));
                for (int i = 0; i < 64; i++) {
                        b.send[r][i] = (float)(r + 1);
                        b.recv[r][i] = -7.0f;
                }
        }
        cr_assert_eq(strata__workers_run(p->w, bad_one, &b), STRATA_OK);
        for (int r = 0; r < 3; r++) {
                cr_assert_eq(b.rc[r], bad == B_NONE ? STRATA_OK : STRATA_EINVAL,
                             "gather %d bad %d on rank %d: rank %d returned %s", gather, bad,
                             bad_rank, r, strata_status_name(b.rc[r]));
                for (int i = 0; bad != B_NONE && i < 64; i++)
                        cr_assert_eq(b.recv[r][i], -7.0f, "bad %d: rank %d element %d written",
                                     bad, r, i);
        }
        if (bad != B_NONE)
                return;
        for (int r = 0; r < 3; r++) { /* pieces [0, 6), [6, 22), [22, 38) of the span */
                size_t a = r == 0 ? 0 : r == 1 ? 6 : 22, e = r == 0 ? 6 : r == 1 ? 22 : 38;

                for (size_t i = 0; i < (gather ? BAD_COUNT : e - a); i++)
                        cr_assert_eq(b.recv[r][i], gather ? 1.0f + (float)(i >= 6) + (float)(i >= 22)
                                                          : 6.0f,
                                     "gather %d: rank %d element %zu", gather, r, i);
        }
}

Test(comm_blocks, bad_arguments)
{
        struct pool p;

        pool_start(&p, 3, 10.0);
        for (int gather = 0; gather < 2; gather++)
                for (int bad = B_BLOCK0; bad <= B_PUBLIC; bad++) {
                        if (gather && bad == B_OP)
                                continue;
                        for (int r = 0; r < 3; r++) {
                                bad_case(&p, gather, (enum bad)bad, r);
                                pool_reset(&p);
                        }
                        bad_case(&p, gather, B_NONE, 0); /* the communicator goes on */
                        pool_reset(&p);
                }
        pool_stop(&p);
}
