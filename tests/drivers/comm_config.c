/*
 * The communicator is usable without Strata's worker pool: an application's own threads, a
 * failure domain of its own, ranks by number. Collectives sum in rank order; a failure one
 * rank reports through the group releases the others; configurations no transport can serve,
 * or that are inconsistent, are refused with a clear status and nothing allocated.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "strata/strata.h"
#include "drivers/comm_workers.h"

#define RANKS 3
#define N 1000

struct app_group {
        atomic_int aborted;
        atomic_int first;
};

static int app_aborted(void *h)
{
        return atomic_load(&((struct app_group *)h)->aborted);
}

static int app_fail(void *h, int member, int status)
{
        struct app_group *g = h;
        int zero = 0;

        (void)member;
        atomic_compare_exchange_strong(&g->first, &zero, status);
        atomic_store(&g->aborted, 1);
        return status;
}

static unsigned app_epoch(void *h)
{
        (void)h;
        return 0;
}

static struct app_group group_state;

struct job {
        struct strata_comm *c;
        int rank, rc, fail_rank;
        float buf[N];
};

static void *run(void *arg)
{
        struct job *j = arg;

        if (j->rank == j->fail_rank) {
                j->rc = app_fail(&group_state, j->rank, STRATA_EINJECTED);
                return NULL;
        }
        j->rc = strata_comm_all_reduce(j->c, j->rank, j->buf, j->buf, N, STRATA_F32,
                                       STRATA_OP_SUM);
        return NULL;
}

static struct strata_group start_group(double timeout_s)
{
        memset(&group_state, 0, sizeof(group_state));
        return (struct strata_group){ .h = &group_state, .aborted = app_aborted,
                                      .fail = app_fail, .epoch = app_epoch,
                                      .timeout_s = timeout_s, .oversubscribed = 1 };
}

static void run_all(struct strata_comm *c, struct job *j, int fail_rank)
{
        pthread_t t[RANKS];

        for (int r = 0; r < RANKS; r++) {
                j[r].c = c;
                j[r].rank = r;
                j[r].fail_rank = fail_rank;
                cr_assert_eq(pthread_create(&t[r], NULL, run, &j[r]), 0);
        }
        for (int r = 0; r < RANKS; r++)
                pthread_join(t[r], NULL);
}

static _Alignas(4096) unsigned char mem[1 << 20];
static struct strata_group group;

/* A communicator of RANKS ranks in this process over the application's own group. */
static struct strata_comm *open_comm(double timeout_s)
{
        struct strata_comm_config cfg = STRATA_COMM_CONFIG_INIT;
        struct strata_comm *c = NULL;
        struct strata_arena a;

        group = start_group(timeout_s);
        cr_assert_eq(strata_arena_init(&a, mem, sizeof(mem), NULL), STRATA_OK);
        cfg.world_size = cfg.local_size = RANKS;
        cfg.group = &group;
        cr_assert_eq(strata_comm_init(&c, &a, &cfg), STRATA_OK, "%s", strata_last_error());
        return c;
}

Test(comm_config, application_threads_and_group)
{
        static struct job j[RANKS];
        struct strata_comm *c = open_comm(5.0);

        cr_assert_str_eq(strata_comm_transport(c), "shm");
        cr_assert_eq(strata_comm_world_size(c), RANKS);
        cr_assert_eq(strata_comm_local_size(c), RANKS);
        cr_assert_eq(strata_comm_rank(c, 2), 2);
        cr_assert_eq(strata_comm_rank(c, RANKS), -1);
        for (int r = 0; r < RANKS; r++)
                for (int i = 0; i < N; i++)
                        j[r].buf[i] = (float)(r + 1) * 0.1f + (float)i;
        run_all(c, j, -1);
        for (int r = 0; r < RANKS; r++) {
                cr_assert_eq(j[r].rc, STRATA_OK, "rank %d: %d", r, j[r].rc);
                for (int i = 0; i < N; i++) {
                        /* rank 0 + rank 1 first, then rank 2: global rank order */
                        float want = ((0.1f + (float)i) + (0.2f + (float)i)) + (0.3f + (float)i);

                        cr_assert_eq(j[r].buf[i], want, "rank %d element %d", r, i);
                }
        }
}

/* One rank reports a failure through the group instead of joining: the others return. */
Test(comm_config, failure_through_the_group_releases_peers, .timeout = 20)
{
        static struct job j[RANKS];
        struct strata_comm *c = open_comm(30.0);

        run_all(c, j, 1);
        cr_assert_eq(j[0].rc, STRATA_EABORTED);
        cr_assert_eq(j[2].rc, STRATA_EABORTED);
        cr_assert_eq(atomic_load(&group_state.first), STRATA_EINJECTED);
}

static void refused(struct strata_comm_config cfg, int want, const char *why)
{
        struct strata_comm *c = NULL;
        struct strata_arena a;

        cr_assert_eq(strata_arena_init(&a, mem, sizeof(mem), NULL), STRATA_OK);
        cr_assert_eq(strata_comm_init(&c, &a, &cfg), want, "%s", why);
        cr_assert_null(c, "%s: the output was written", why);
        cr_assert_eq(strata_arena_used(&a), 0, "%s: memory was taken", why);
        cr_assert_gt(strlen(strata_last_error()), 10, "%s: no message", why);
}

Test(comm_config, bad_configurations)
{
        struct strata_comm_config base = STRATA_COMM_CONFIG_INIT, cfg;
        struct strata_group g = start_group(1.0), nofail = g;
        struct strata_comm *c = NULL;
        struct strata_arena a;

        base.world_size = base.local_size = 2;
        base.group = &g;
        nofail.fail = NULL;
        cfg = base, cfg.group = NULL;
        refused(cfg, STRATA_EINVAL, "no group");
        cfg = base, cfg.group = &nofail;
        refused(cfg, STRATA_EINVAL, "group without fail");
        cfg = base, cfg.local_size = 0;
        refused(cfg, STRATA_EINVAL, "no local rank");
        cfg = base, cfg.local_size = cfg.world_size = STRATA_MAX_DEVICES + 1;
        refused(cfg, STRATA_EINVAL, "too many local ranks");
        cfg = base, cfg.world_size = 1;
        refused(cfg, STRATA_EINVAL, "world smaller than the local ranks");
        cfg = base, cfg.world_size = 4, cfg.rank0 = 3;
        refused(cfg, STRATA_EINVAL, "local ranks past the world");
        cfg = base, cfg.rank0 = -1;
        refused(cfg, STRATA_EINVAL, "negative rank0");
        cfg = base, cfg.world_size = 4, cfg.rank0 = 2;
        refused(cfg, STRATA_ENOTSUP, "ranks in another process: no transport yet");
        cr_assert(strstr(strata_last_error(), "shm joins ranks of one process only"), "%s",
                  strata_last_error());
        cr_assert_eq(strata_arena_init(&a, mem, sizeof(mem), NULL), STRATA_OK);
        cr_assert_eq(strata_comm_init(NULL, &a, &base), STRATA_EINVAL);
        cr_assert_eq(strata_comm_init(&c, NULL, &base), STRATA_EINVAL);
        cr_assert_eq(strata_comm_init(&c, &a, NULL), STRATA_EINVAL);
        cr_assert_eq(strata__comm_init_workers(&c, &a, NULL, NULL), STRATA_EINVAL);
        cr_assert_eq(strata_comm_world_size(NULL), 0);
        cr_assert_str_eq(strata_comm_transport(NULL), "?");
}
