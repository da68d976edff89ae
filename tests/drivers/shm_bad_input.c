/* Bad collective arguments on any rank: every rank gets a status, nothing is written. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "tests/support/pool.h"

struct job {
        struct strata_comm *c;
        struct strata_coll good, bad;
        int bad_rank;
        float *send[2], *recv[2];
        int rc[2];
};

static int go(int rank, void *arg)
{
        struct job *j = arg;
        struct strata_coll op = rank == j->bad_rank ? j->bad : j->good;

        if (op.send == (void *)1)
                op.send = j->send[rank];
        if (op.recv == (void *)1)
                op.recv = j->recv[rank];
        j->rc[rank] = strata_comm_run(j->c, rank, &op);
        return STRATA_OK; /* statuses are checked by the test */
}

static void expect_refused(struct pool *p, struct strata_coll bad, int want, size_t count)
{
        static struct job j;

        for (int bad_rank = 0; bad_rank < 2; bad_rank++) {
                memset(&j, 0, sizeof(j));
                j.c = p->c;
                j.bad_rank = bad_rank;
                j.good = (struct strata_coll){ .kind = bad.kind, .send = (void *)1,
                                               .recv = (void *)1, .count = count,
                                               .dtype = STRATA_F32, .op = STRATA_OP_SUM };
                j.bad = bad;
                for (int r = 0; r < 2; r++) {
                        j.send[r] = pool_alloc(p, count * 2 * 4 + 64);
                        j.recv[r] = pool_alloc(p, count * 2 * 4 + 64);
                        for (size_t i = 0; i < count * 2; i++) {
                                j.send[r][i] = 1.0f;
                                j.recv[r][i] = -7.0f;
                        }
                }
                cr_assert_eq(strata__workers_run(p->w, go, &j), STRATA_OK);
                cr_assert_eq(j.rc[bad_rank], want, "bad rank %d got %s", bad_rank,
                             strata_status_name(j.rc[bad_rank]));
                cr_assert_eq(j.rc[1 - bad_rank], STRATA_EINVAL, "the good rank must refuse too");
                for (int r = 0; r < 2; r++)
                        for (size_t i = 0; i < count * 2; i++)
                                cr_assert_eq(j.recv[r][i], -7.0f, "rank %d elem %zu written", r, i);
        }
}

static void all_cases(size_t count)
{
        struct pool p;
        struct strata_coll b;

        pool_start(&p, 2, 10.0);
        b = (struct strata_coll){ .kind = STRATA_COLL_ALL_REDUCE, .send = NULL, .recv = (void *)1,
                                  .count = count, .dtype = STRATA_F32 };
        expect_refused(&p, b, STRATA_EINVAL, count); /* NULL send */
        b.send = (void *)1;
        b.recv = NULL;
        expect_refused(&p, b, STRATA_EINVAL, count); /* NULL receive */
        b.recv = (void *)1;
        b.dtype = (enum strata_dtype)42;
        expect_refused(&p, b, STRATA_EINVAL, count); /* unknown dtype */
        b.dtype = STRATA_F32;
        b.op = (enum strata_reduce_op)9;
        expect_refused(&p, b, STRATA_EINVAL, count); /* unknown op */
        b.op = STRATA_OP_SUM_TREE;
        b.dtype = STRATA_BF16;
        expect_refused(&p, b, STRATA_EINVAL, count); /* the tree takes no halves */
        b.dtype = STRATA_F32;
        b.op = STRATA_OP_SUM;
        b.count = SIZE_MAX / 2;
        expect_refused(&p, b, STRATA_EOVERFLOW, count); /* count overflow */
        b = (struct strata_coll){ .kind = STRATA_COLL_REDUCE, .send = (void *)1,
                                  .recv = (void *)1, .count = count, .root = 2 };
        expect_refused(&p, b, STRATA_EINVAL, count); /* root out of range */
        b.kind = STRATA_COLL_BROADCAST;
        b.root = -1;
        expect_refused(&p, b, STRATA_EINVAL, count);
        b = (struct strata_coll){ .kind = (enum strata_coll_kind)77, .count = count };
        expect_refused(&p, b, STRATA_EINVAL, count); /* unknown kind */
        b = (struct strata_coll){ .kind = STRATA_COLL_ALL_REDUCE, .send = (void *)1,
                                  .recv = (void *)1, .count = count + 1 };
        expect_refused(&p, b, STRATA_EINVAL, count); /* ranks disagree on the count */
        pool_stop(&p);
}

Test(shm_bad_input, small_messages)
{
        all_cases(100);
}

Test(shm_bad_input, large_messages)
{
        all_cases(100000);
}

static int overlap(int rank, void *arg)
{
        struct job *j = arg;
        float *buf = j->send[rank];
        int rc[3];

        /* all_gather out of place with overlapping ranges (not the in-place layout). */
        rc[0] = strata_comm_all_gather(j->c, rank, buf + 1, buf, 10, STRATA_F32);
        /* reduce_scatter and scatter cannot run in place. */
        rc[1] = strata_comm_reduce_scatter(j->c, rank, buf, buf, 10, STRATA_F32, STRATA_OP_SUM);
        rc[2] = strata_comm_scatter(j->c, rank, buf, buf, 10, STRATA_F32, 0);
        for (int i = 0; i < 3; i++)
                if (rc[i] != STRATA_EINVAL)
                        return STRATA_EIO;
        return STRATA_OK;
}

Test(shm_bad_input, overlapping_buffers)
{
        static struct job j;
        struct pool p;

        pool_start(&p, 2, 10.0);
        j.c = p.c;
        for (int r = 0; r < 2; r++)
                j.send[r] = pool_alloc(&p, 4096);
        cr_assert_eq(strata__workers_run(p.w, overlap, &j), STRATA_OK);
        pool_stop(&p);
}

static int boolean(int rank, void *arg)
{
        struct job *j = arg;
        int all, any, none;

        STRATA_TRY(strata_comm_reduce_boolean(j->c, rank, rank == 1, 1, &all));
        STRATA_TRY(strata_comm_reduce_boolean(j->c, rank, rank == 1, 0, &any));
        STRATA_TRY(strata_comm_reduce_boolean(j->c, rank, 0, 0, &none));
        j->rc[rank] = all * 100 + any * 10 + none;
        return strata_comm_reduce_boolean(j->c, rank, 1, 1, NULL) == STRATA_EINVAL ? STRATA_OK
                                                                                  : STRATA_EIO;
}

Test(shm_bad_input, reduce_boolean_decision)
{
        static struct job j;
        struct pool p;

        pool_start(&p, 2, 10.0);
        j.c = p.c;
        cr_assert_eq(strata__workers_run(p.w, boolean, &j), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(j.rc[0], 10, "all=0 any=1 none=0");
        cr_assert_eq(j.rc[1], 10);
        pool_stop(&p);
}
