/*
 * The checked reduce-scatter over blocks (drivers/comm_blocks.h, decision 0104: the split
 * step's non-finite check in the sum's pass): bitwise the unchecked one; one NaN, infinity or
 * overflowing sum anywhere in the span, in any rank's piece and at the pieces' and slices'
 * edges, is found by some rank (the ranks' records ORed, as the step's agreement ORs them),
 * and a finite span by none; each rank's record counts the span and is cleared when taken; a
 * refused call leaves the record marked unchecked (span 0), so the step reads its part again.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "drivers/comm_blocks.h"
#include "tests/support/pool.h"

#define MAXR 4
#define COUNT 1003

struct job {
        struct strata_comm *c;
        float *g[MAXR];   /* each rank's span, summed in place with the check */
        float *ref[MAXR]; /* the same inputs, the unchecked reduce-scatter */
        size_t lo, block;
        enum strata_reduce_op op;
        int nf[MAXR], rc[MAXR];
        size_t span[MAXR];
};

/* The first element of local rank @p rank's piece in the span, as ddp's reduce_parts() finds it. */
static size_t piece_at(const struct job *j, int rank)
{
        size_t x = (size_t)rank * j->block;

        return x < j->lo ? j->lo : x > j->lo + COUNT ? j->lo + COUNT : x;
}

static int run_one(int rank, void *arg)
{
        struct job *j = arg;
        size_t x = piece_at(j, rank) - j->lo;

        j->rc[rank] = strata__comm_reduce_scatter_checked(j->c, rank, j->g[rank],
                                                          j->g[rank] + x, COUNT, j->lo,
                                                          j->block, j->op);
        j->nf[rank] = strata__comm_checked(j->c, rank, &j->span[rank]);
        if (j->rc[rank] != STRATA_OK)
                return STRATA_OK;
        return strata__comm_reduce_scatter_blocks(j->c, rank, j->ref[rank], j->ref[rank] + x,
                                                  COUNT, j->lo, j->block, STRATA_F32, j->op);
}

static float input(int r, size_t i)
{
        return (float)(sin((double)i * 0.37 + (double)r * 1.3) * (r % 2 ? 3e-4 : 1.7e3));
}

enum bad { FINITE, NAN_ONE, INF_ONE, OVERFLOW };

/* One round: inputs with @p bad at element @p at (of rank at % n); the verdict ORed. */
static int round_with(struct pool *p, struct job *j, enum bad bad, size_t at)
{
        int any = 0;

        for (int r = 0; r < p->n; r++) {
                for (size_t i = 0; i < COUNT; i++)
                        j->g[r][i] = input(r, i);
                if (bad == NAN_ONE && r == (int)(at % (size_t)p->n))
                        j->g[r][at] = NAN;
                if (bad == INF_ONE && r == (int)(at % (size_t)p->n))
                        j->g[r][at] = at % 2 ? INFINITY : -INFINITY;
                if (bad == OVERFLOW) /* every input finite, their sum is not */
                        j->g[r][at] = 3e38f;
                memcpy(j->ref[r], j->g[r], COUNT * sizeof(float));
        }
        cr_assert_eq(strata__workers_run(p->w, run_one, j), STRATA_OK, "%s", strata_last_error());
        for (int r = 0; r < p->n; r++) {
                cr_assert_eq(j->rc[r], STRATA_OK, "%s", strata_last_error());
                cr_assert_eq(memcmp(j->g[r], j->ref[r], COUNT * sizeof(float)), 0,
                             "%d ranks, op %d, lo %zu: rank %d's sums differ from the unchecked "
                             "reduce-scatter's", p->n, (int)j->op, j->lo, r);
                cr_assert_eq(j->span[r], (size_t)COUNT, "rank %d's record counts the span", r);
                any |= j->nf[r];
        }
        return any;
}

static void ranks(int n)
{
        static const enum strata_reduce_op ops[] = { STRATA_OP_SUM, STRATA_OP_SUM_TREE };
        static struct job j;
        struct pool p;

        pool_start(&p, n, 30.0);
        j.c = p.c;
        for (int r = 0; r < n; r++) {
                j.g[r] = pool_alloc(&p, COUNT * sizeof(float));
                j.ref[r] = pool_alloc(&p, COUNT * sizeof(float));
        }
        for (int o = 0; o < 2; o++) {
                for (int l = 0; l < 2; l++) {
                        size_t at[4 * MAXR + 4];
                        int na = 0;

                        j.op = ops[o];
                        /* the split's geometry, and a span that starts inside block 0 */
                        j.lo = l ? 37 : 0;
                        j.block = (j.lo + COUNT + (size_t)n - 1) / (size_t)n;
                        j.block = (j.block + 15) / 16 * 16;
                        for (int r = 0; r < n; r++) {
                                size_t a = piece_at(&j, r) - j.lo;
                                size_t e = piece_at(&j, r + 1) - j.lo;

                                if (e > a) {
                                        at[na++] = a;
                                        at[na++] = e - 1;
                                        at[na++] = a + (e - a) / 2;
                                }
                                at[na++] = (size_t)COUNT * (size_t)r / (size_t)n; /* a slice */
                        }
                        at[na++] = COUNT - 1;
                        cr_assert_eq(round_with(&p, &j, FINITE, 0), 0,
                                     "%d ranks: a finite span was found not finite", n);
                        for (int k = 0; k < na; k++)
                                for (enum bad b = NAN_ONE; b <= OVERFLOW; b++)
                                        cr_assert_eq(round_with(&p, &j, b, at[k]), 1,
                                                     "%d ranks, op %d, lo %zu: kind %d at %zu "
                                                     "was missed", n, (int)j.op, j.lo, (int)b,
                                                     at[k]);
                }
        }
        pool_stop(&p);
}

Test(comm_checked, two_ranks, .timeout = 120)
{
        ranks(2);
}

Test(comm_checked, three_ranks, .timeout = 120)
{
        ranks(3);
}

Test(comm_checked, four_ranks_the_tree, .timeout = 120)
{
        ranks(4);
}

/* Records add up until taken; a take clears them; a refused call marks the record unchecked. */
static int twice_then_refused(int rank, void *arg)
{
        struct job *j = arg;
        size_t x = piece_at(j, rank) - j->lo, span;
        int nf;

        for (int k = 0; k < 2; k++)
                cr_assert_eq(strata__comm_reduce_scatter_checked(j->c, rank, j->g[rank],
                                                                 j->g[rank] + x, COUNT, j->lo,
                                                                 j->block, j->op),
                             STRATA_OK);
        nf = strata__comm_checked(j->c, rank, &span);
        cr_assert_eq(span, 2 * (size_t)COUNT, "rank %d: two calls' spans", rank);
        cr_assert_eq(nf, 0);
        nf = strata__comm_checked(j->c, rank, &span);
        cr_assert(span == 0 && nf == 0, "rank %d: the take cleared the record", rank);
        cr_assert_eq(strata__comm_reduce_scatter_checked(j->c, rank, j->g[rank], j->g[rank] + x,
                                                         COUNT, j->lo, 0, j->op),
                     STRATA_EINVAL, "a block of 0 elements is refused");
        cr_assert_eq(strata__comm_reduce_scatter_checked(j->c, rank, j->g[rank], j->g[rank] + x,
                                                         COUNT, j->lo, j->block, j->op),
                     STRATA_OK);
        nf = strata__comm_checked(j->c, rank, &span);
        cr_assert_eq(span, 0, "rank %d: a refused call leaves the record unchecked", rank);
        return STRATA_OK;
}

Test(comm_checked, records_add_clear_and_miss, .timeout = 60)
{
        static struct job j;
        struct pool p;
        size_t span;

        pool_start(&p, 2, 30.0);
        j.c = p.c;
        j.op = STRATA_OP_SUM;
        j.block = 512;
        for (int r = 0; r < 2; r++) {
                j.g[r] = pool_alloc(&p, COUNT * sizeof(float));
                for (size_t i = 0; i < COUNT; i++)
                        j.g[r][i] = input(r, i) * 1e-30f;
        }
        cr_assert_eq(strata__workers_run(p.w, twice_then_refused, &j), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata__comm_checked(NULL, 0, &span), 0);
        cr_assert_eq(span, 0, "no communicator: nothing checked");
        cr_assert_eq(strata__comm_checked(p.c, 2, &span), 0);
        cr_assert_eq(span, 0, "a rank out of range: nothing checked");
        pool_stop(&p);
}
