/*
 * The job as a component beside the strategy (decision 0063): every strategy kind names one
 * job (none, spawn, mpi, auto) and a strategy table whose chain is the synchronisation axis
 * alone; spawn and mpi are ddp under their names, with nothing of their own. Every job table
 * is complete; the job of one process (none) counts one process, agrees with itself, keeps a
 * checkpoint piece where it is and sees this process's stop request; a job over a link refuses
 * a driver with memory of its own, naming the strategy, where its processes are several.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "strata/strata.h"
#include "strategy/job.h"
#include "tests/support/devsim.h"

Test(job_table, every_kind_names_its_job)
{
        static const struct {
                enum strata_strategy_kind k;
                const char *job;
        } want[] = {
                { STRATA_STRATEGY_SINGLE, "none" }, { STRATA_STRATEGY_DP, "none" },
                { STRATA_STRATEGY_DDP, "none" },    { STRATA_STRATEGY_SPAWN, "spawn" },
                { STRATA_STRATEGY_MPI, "mpi" },     { STRATA_STRATEGY_ZERO1, "auto" },
                { STRATA_STRATEGY_ZERO2, "auto" },  { STRATA_STRATEGY_FSDP, "auto" },
        };

        cr_assert_eq(sizeof(want) / sizeof(want[0]), STRATA_STRATEGY_COUNT);
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
                const struct strata__job_ops *j = strata__strategy_job(want[i].k);

                cr_assert_not_null(j, "%s: no job", strata_strategy_name(want[i].k));
                cr_assert_str_eq(j->name, want[i].job, "%s", strata_strategy_name(want[i].k));
        }
        cr_assert_null(strata__strategy_job(STRATA_STRATEGY_COUNT));
        cr_assert_null(strata__strategy_job((enum strata_strategy_kind)-1));
}

Test(job_table, every_job_complete)
{
        const struct strata__job_ops *jobs[] = { &strata__job_none, &strata__job_spawn,
                                                 &strata__job_mpi, &strata__job_auto };

        for (size_t i = 0; i < sizeof(jobs) / sizeof(jobs[0]); i++) {
                const struct strata__job_ops *j = jobs[i];

                cr_assert(j->name && j->validate && j->processes && j->layout && j->join &&
                          j->agree_batch && j->stop_due && j->to_zero && j->agree && j->abort &&
                          j->close, "job %s: incomplete table", j->name ? j->name : "?");
        }
}

/* The chains: multi -> single, dp, ddp; ddp -> zero1 -> zero2; zero1 -> fsdp; spawn, mpi: ddp. */
Test(job_table, chains_on_the_synchronisation_axis)
{
        const struct strata__strategy *ddp = strata__strategy_get(STRATA_STRATEGY_DDP);
        const struct strata__strategy *zero1 = strata__strategy_get(STRATA_STRATEGY_ZERO1);
        const struct strata__strategy *root = ddp->parent;
        static const enum strata_strategy_kind named[] = { STRATA_STRATEGY_SPAWN,
                                                           STRATA_STRATEGY_MPI };

        cr_assert_not_null(root);
        cr_assert_null(root->parent, "ddp's parent is the root");
        cr_assert_eq(strata__strategy_get(STRATA_STRATEGY_SINGLE)->parent, root);
        cr_assert_eq(strata__strategy_get(STRATA_STRATEGY_DP)->parent, root);
        cr_assert_eq(zero1->parent, ddp);
        cr_assert_eq(strata__strategy_get(STRATA_STRATEGY_ZERO2)->parent, zero1);
        cr_assert_eq(strata__strategy_get(STRATA_STRATEGY_FSDP)->parent, zero1);
        for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
                const struct strata__strategy *st = strata__strategy_get(named[i]);
                static const struct strata__strategy_ops no_ops;
                static const struct strata__strategy_hooks no_hooks;

                cr_assert_eq(st->parent, ddp, "%s is ddp", st->name);
                cr_assert(!st->states && !st->caps && !st->drops, "%s: states or caps", st->name);
                cr_assert_eq(memcmp(&st->ops, &no_ops, sizeof(no_ops)), 0, "%s: ops", st->name);
                cr_assert_eq(memcmp(&st->hooks, &no_hooks, sizeof(no_hooks)), 0, "%s: hooks",
                             st->name);
        }
}

static void take(void *arg, const void *p, size_t n)
{
        memcpy(arg, p, n);
}

/* One process: no exchange, no state; what each operation means alone. */
Test(job_table, none_is_one_process)
{
        const struct strata__job_ops *j = &strata__job_none;
        struct strata_config c = STRATA_CONFIG_INIT;
        int procs = 0, status = STRATA_EINVAL;
        char piece[8] = "piece", got[8] = "";

        c.process.count = 5; /* not a job's: ddp runs in this process whatever it says */
        cr_assert_eq(j->processes(&c, &procs), STRATA_OK);
        cr_assert_eq(procs, 1);
        cr_assert_eq(j->validate("ddp", &c, devsim_driver()), STRATA_OK);
        cr_assert_eq(j->agree_batch(NULL, &status, 3, NULL), STRATA_OK);
        cr_assert_eq(status, STRATA_EINVAL, "its own verdict stands");
        cr_assert_eq(j->agree(NULL, &status), STRATA_OK);
        cr_assert_eq(status, STRATA_EINVAL);
        cr_assert_eq(j->to_zero(NULL, 0, piece, sizeof(piece), take, got), STRATA_OK);
        cr_assert_str_eq(got, "piece");
        strata_clear_stop();
        cr_assert_eq(j->stop_due(NULL), 0);
        strata_request_stop();
        cr_assert_neq(j->stop_due(NULL), 0, "this process's request, at once");
        strata_clear_stop();
}

/* Bad input: a driver with memory of its own across processes, refused naming the strategy. */
Test(job_table, link_refuses_device_memory)
{
        struct strata_config c = STRATA_CONFIG_INIT;

        cr_assert_eq(strata__job_spawn.validate("spawn", &c, devsim_driver()), STRATA_ENOTSUP);
        cr_assert(strstr(strata_last_error(), "strategy spawn on devsim: device memory across "
                                              "processes is not supported"),
                  "%s", strata_last_error());
        cr_assert_eq(strata__job_mpi.validate("mpi", &c, devsim_driver()), STRATA_ENOTSUP);
        cr_assert_eq(strata__job_auto.validate("zero1", &c, devsim_driver()), STRATA_OK,
                     "one process: its own device memory");
        c.process.count = 2;
        cr_assert_eq(strata__job_auto.validate("zero1", &c, devsim_driver()), STRATA_ENOTSUP);
        cr_assert(strstr(strata_last_error(), "strategy zero1 across 2 processes on devsim"),
                  "%s", strata_last_error());
        c.process.count = -1;
        cr_assert_eq(strata__job_auto.validate("zero1", &c, devsim_driver()), STRATA_EINVAL);
        cr_assert_eq(strata__job_mpi.processes(&c, &(int){ 0 }), STRATA_EINVAL);
}
