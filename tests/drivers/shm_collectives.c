/*
 * Every collective, dtype and reduction op on 1-4 devices, for counts 0, 1, odd, not divisible
 * by the device count, and large, in place and out of place: results must equal, bit for bit,
 * a serial reference that combines the ranks in rank order.
 */
#include <criterion/criterion.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "tests/support/pool.h"

#define MAXR 4

static float bf(uint16_t h)
{
        uint32_t u = (uint32_t)h << 16;
        float f;

        memcpy(&f, &u, 4);
        return f;
}

/* Half precision through the CPU's F16C instructions: an independent reference. */
__attribute__((target("f16c"))) static float hf(uint16_t h)
{
        return _cvtsh_ss(h);
}

__attribute__((target("f16c"))) static uint16_t to_hf(float f)
{
        return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}

static uint16_t to_bf(float f) /* round to nearest even */
{
        uint32_t u;

        memcpy(&u, &f, 4);
        return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* Element i of rank r's input: values whose float sums round differently in another order. */
static double input(int r, size_t i)
{
        double m = r % 2 ? 3e-4 : 1.7e3;

        return sin((double)i * 0.37 + (double)r * 1.3) * m + (double)((i + (size_t)r) % 5);
}

static void put(enum strata_dtype dt, void *p, size_t i, double v)
{
        switch (dt) {
        case STRATA_F32: ((float *)p)[i] = (float)v; break;
        case STRATA_F64: ((double *)p)[i] = v; break;
        case STRATA_I32: ((int32_t *)p)[i] = (int32_t)(v * 4); break;
        case STRATA_I64: ((int64_t *)p)[i] = (int64_t)(v * 4); break;
        case STRATA_BF16: ((uint16_t *)p)[i] = to_bf((float)v); break;
        case STRATA_F16: ((uint16_t *)p)[i] = to_hf((float)v); break;
        default: break;
        }
}

/* The pairwise tree over n values: the largest power of two below n first, then the rest. */
static double tree(const double *v, int n, int dbl)
{
        int h = 1;

        if (n == 1)
                return v[0];
        while (2 * h < n)
                h *= 2;
        if (dbl)
                return tree(v, h, 1) + tree(v + h, n - h, 1);
        return (double)((float)tree(v, h, 0) + (float)tree(v + h, n - h, 0));
}

/* STRATA_OP_SUM_TREE's reference for element i (f32 or f64: halves are refused). */
static int reference_tree(enum strata_dtype dt, int op, int n, const void *const *in, size_t i,
                          void *out, size_t oi)
{
        double v[MAXR];

        if (op != STRATA_OP_SUM_TREE || (dt != STRATA_F32 && dt != STRATA_F64))
                return 0;
        for (int r = 0; r < n; r++)
                v[r] = dt == STRATA_F32 ? ((const float *)in[r])[i] : ((const double *)in[r])[i];
        if (dt == STRATA_F32)
                ((float *)out)[oi] = (float)tree(v, n, 0);
        else
                ((double *)out)[oi] = tree(v, n, 1);
        return 1;
}

/* The reference for element i: ranks combined in order, in each dtype's accumulation type. */
static void reference(enum strata_dtype dt, int op, int n, const void *const *in, size_t i,
                      void *out, size_t oi)
{
        if (reference_tree(dt, op, n, in, i, out, oi))
                return;
#define COMB(acc, x) (op == STRATA_OP_MAX ? ((x) > (acc) ? (x) : (acc))                      \
                      : op == STRATA_OP_MIN ? ((x) < (acc) ? (x) : (acc)) : (acc) + (x))
        switch (dt) {
        case STRATA_F32: case STRATA_BF16: case STRATA_F16: {
                float acc = 0, x;

                for (int r = 0; r < n; r++) {
                        if (dt == STRATA_F32)
                                x = ((const float *)in[r])[i];
                        else if (dt == STRATA_BF16)
                                x = bf(((const uint16_t *)in[r])[i]);
                        else
                                x = hf(((const uint16_t *)in[r])[i]);
                        acc = r ? COMB(acc, x) : x;
                }
                if (op == STRATA_OP_MEAN)
                        acc = acc / (float)n;
                if (dt == STRATA_F32)
                        ((float *)out)[oi] = acc;
                else if (dt == STRATA_BF16)
                        ((uint16_t *)out)[oi] = to_bf(acc);
                else
                        ((uint16_t *)out)[oi] = to_hf(acc);
                break;
        }
        case STRATA_F64: {
                double acc = 0;

                for (int r = 0; r < n; r++)
                        acc = r ? COMB(acc, ((const double *)in[r])[i]) : ((const double *)in[r])[i];
                ((double *)out)[oi] = op == STRATA_OP_MEAN ? acc / n : acc;
                break;
        }
        case STRATA_I32: {
                int32_t acc = 0;

                for (int r = 0; r < n; r++)
                        acc = r ? COMB(acc, ((const int32_t *)in[r])[i]) : ((const int32_t *)in[r])[i];
                ((int32_t *)out)[oi] = op == STRATA_OP_MEAN ? acc / n : acc;
                break;
        }
        case STRATA_I64: {
                int64_t acc = 0;

                for (int r = 0; r < n; r++)
                        acc = r ? COMB(acc, ((const int64_t *)in[r])[i]) : ((const int64_t *)in[r])[i];
                ((int64_t *)out)[oi] = op == STRATA_OP_MEAN ? acc / n : acc;
                break;
        }
        default:
                break;
        }
#undef COMB
}

struct job {
        struct strata_comm *c;
        struct strata_coll op;
        int in_place;
        void *send[MAXR], *recv[MAXR];
        int rc[MAXR];
};

static int run_one(int rank, void *arg)
{
        struct job *j = arg;
        struct strata_coll op = j->op;

        op.send = j->send[rank];
        op.recv = j->recv[rank];
        j->rc[rank] = strata_comm_run(j->c, rank, &op);
        return j->rc[rank];
}

static const enum strata_dtype dtypes[] = { STRATA_F32, STRATA_F64, STRATA_BF16, STRATA_F16,
                                            STRATA_I32, STRATA_I64 };

static void check_kind(struct pool *p, enum strata_coll_kind kind, size_t count, int in_place)
{
        int n = p->n;

        for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); d++) {
                enum strata_dtype dt = dtypes[d];
                size_t es = strata_dtype_size(dt);
                int reduces = kind == STRATA_COLL_ALL_REDUCE || kind == STRATA_COLL_REDUCE ||
                              kind == STRATA_COLL_REDUCE_SCATTER;

                for (int op = 0; op < (reduces ? STRATA_OP_COUNT : 1); op++) {
                        static struct job j;
                        size_t ns = kind == STRATA_COLL_REDUCE_SCATTER || kind == STRATA_COLL_SCATTER
                                            ? count * n : count;
                        size_t nr = kind == STRATA_COLL_ALL_GATHER || kind == STRATA_COLL_GATHER
                                            ? count * n : count;
                        int root = n - 1;
                        unsigned char *expect = pool_alloc(p, nr * es + 64);
                        const void *in[MAXR];

                        if (op == STRATA_OP_SUM_TREE && (dt == STRATA_BF16 || dt == STRATA_F16))
                                continue; /* refused: shm_bad_input */
                        memset(&j, 0, sizeof(j));
                        j.c = p->c;
                        j.op = (struct strata_coll){ .kind = kind, .count = count, .dtype = dt,
                                                     .op = op, .root = root };
                        for (int r = 0; r < n; r++) {
                                j.recv[r] = pool_alloc(p, nr * es + 64);
                                memset(j.recv[r], 0xA5, nr * es);
                                if (in_place && kind != STRATA_COLL_REDUCE_SCATTER &&
                                    kind != STRATA_COLL_SCATTER) {
                                        j.send[r] = kind == STRATA_COLL_ALL_GATHER ||
                                                                    kind == STRATA_COLL_GATHER
                                                            ? (char *)j.recv[r] + r * count * es
                                                            : j.recv[r];
                                } else {
                                        j.send[r] = pool_alloc(p, ns * es + 64);
                                }
                                for (size_t i = 0; i < ns; i++)
                                        put(dt, kind == STRATA_COLL_BROADCAST ? j.recv[r] : j.send[r],
                                            i, input(r, i));
                                in[r] = kind == STRATA_COLL_BROADCAST ? j.recv[r] : j.send[r];
                        }
                        /* References, computed before the collective runs. */
                        for (size_t i = 0; i < nr; i++) {
                                switch (kind) {
                                case STRATA_COLL_ALL_REDUCE:
                                case STRATA_COLL_REDUCE:
                                        reference(dt, op, n, in, i, expect, i);
                                        break;
                                case STRATA_COLL_REDUCE_SCATTER:
                                        break;
                                case STRATA_COLL_BROADCAST:
                                        memcpy(expect + i * es, (char *)in[root] + i * es, es);
                                        break;
                                case STRATA_COLL_ALL_GATHER:
                                case STRATA_COLL_GATHER:
                                        memcpy(expect + i * es,
                                               (char *)in[i / (count ? count : 1)] + (i % count) * es, es);
                                        break;
                                default:
                                        break;
                                }
                        }
                        cr_assert_eq(strata__workers_run(p->w, run_one, &j), STRATA_OK,
                                     "kind %d dt %d op %d count %zu: %s", kind, dt, op, count,
                                     strata_last_error());
                        for (int r = 0; r < n; r++) {
                                int has = !((kind == STRATA_COLL_REDUCE || kind == STRATA_COLL_GATHER) && r != root);

                                if (!has)
                                        continue;
                                for (size_t i = 0; i < nr; i++) {
                                        unsigned char want[8];

                                        if (kind == STRATA_COLL_REDUCE_SCATTER) {
                                                const void *blk[MAXR];

                                                for (int q = 0; q < n; q++)
                                                        blk[q] = (const char *)j.send[q] + r * count * es;
                                                reference(dt, op, n, blk, i, want, 0);
                                        } else if (kind == STRATA_COLL_SCATTER) {
                                                memcpy(want, (char *)j.send[root] + (r * count + i) * es, es);
                                        } else {
                                                memcpy(want, expect + i * es, es);
                                        }
                                        cr_assert_eq(memcmp((char *)j.recv[r] + i * es, want, es), 0,
                                                     "n=%d kind %d dt %d op %d count %zu%s: rank %d elem %zu",
                                                     n, kind, dt, op, count, in_place ? " in place" : "", r, i);
                                }
                        }
                }
        }
}

static void all_kinds(int n)
{
        static const size_t counts[] = { 0, 1, 7, 33, 256, 1001, 40000 };
        static const enum strata_coll_kind kinds[] = {
                STRATA_COLL_ALL_REDUCE, STRATA_COLL_REDUCE,     STRATA_COLL_BROADCAST,
                STRATA_COLL_ALL_GATHER, STRATA_COLL_REDUCE_SCATTER, STRATA_COLL_GATHER,
                STRATA_COLL_SCATTER,
        };
        struct pool p;

        pool_start(&p, n, 30.0);
        for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
                for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
                        for (int ip = 0; ip < 2; ip++) {
                                check_kind(&p, kinds[k], counts[c], ip);
                                pool_reset(&p);
                        }
        pool_stop(&p);
}

Test(shm_collectives, one_device, .timeout = 120)
{
        all_kinds(1);
}

Test(shm_collectives, two_devices, .timeout = 120)
{
        all_kinds(2);
}

Test(shm_collectives, three_devices, .timeout = 120)
{
        all_kinds(3);
}

Test(shm_collectives, four_devices, .timeout = 120)
{
        all_kinds(4);
}

static int big_all_reduce(int rank, void *arg)
{
        struct job *j = arg;

        return strata_comm_all_reduce(j->c, rank, j->send[rank], j->send[rank], j->op.count,
                                      STRATA_F32, STRATA_OP_SUM);
}

Test(shm_collectives, streaming_stores_large_message, .timeout = 120)
{
        static struct job j;
        size_t count = (size_t)9 << 20; /* 36 MiB: past the streaming threshold */
        struct pool p;

        pool_start(&p, 2, 30.0);
        j.c = p.c;
        j.op.count = count;
        for (int r = 0; r < 2; r++) {
                float *x = j.send[r] = pool_alloc(&p, count * 4);

                for (size_t i = 0; i < count; i++)
                        x[i] = (float)input(r, i);
        }
        cr_assert_eq(strata__workers_run(p.w, big_all_reduce, &j), STRATA_OK, "%s",
                     strata_last_error());
        for (int r = 0; r < 2; r++)
                for (size_t i = 0; i < count; i += 4099) {
                        float want = (float)input(0, i) + (float)input(1, i);

                        cr_assert_eq(((float *)j.send[r])[i], want, "rank %d elem %zu", r, i);
                }
        pool_stop(&p);
}

/*
 * Back-to-back small all_reduces, each with new inputs, interleaved with large ones: ranks that
 * leave an eager (one-meeting) collective early must not overwrite inputs a slower peer has
 * not read yet. Every rank checks every result.
 */
struct race {
        struct strata_comm *c;
        float *buf[3];
        float *big[3];
        int bad[3];
};

#define RACE_SMALL 200
#define RACE_BIG 5000

static int race_go(int rank, void *arg)
{
        struct race *j = arg;

        for (int it = 0; it < 3000; it++) {
                int big = it % 7 == 6;
                float *x = big ? j->big[rank] : j->buf[rank];
                size_t count = big ? RACE_BIG : RACE_SMALL;

                for (size_t i = 0; i < count; i++)
                        x[i] = (float)(rank * 1000 + it + (int)i);
                STRATA_TRY(strata_comm_all_reduce(j->c, rank, x, x, count, STRATA_F32,
                                                  STRATA_OP_SUM));
                for (size_t i = 0; i < count; i++)
                        if (x[i] != (float)(3000 + 3 * (it + (int)i)) && !j->bad[rank])
                                j->bad[rank] = it + 1;
        }
        return STRATA_OK;
}

Test(shm_collectives, back_to_back_small_and_large, .timeout = 60)
{
        static struct race j;
        struct pool p;

        pool_start(&p, 3, 30.0);
        j.c = p.c;
        for (int r = 0; r < 3; r++) {
                j.buf[r] = pool_alloc(&p, RACE_SMALL * sizeof(float));
                j.big[r] = pool_alloc(&p, RACE_BIG * sizeof(float));
        }
        cr_assert_eq(strata__workers_run(p.w, race_go, &j), STRATA_OK, "%s", strata_last_error());
        for (int r = 0; r < 3; r++)
                cr_assert_eq(j.bad[r], 0, "rank %d: wrong sum at iteration %d", r, j.bad[r] - 1);
        pool_stop(&p);
}
