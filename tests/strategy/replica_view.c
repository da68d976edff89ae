/*
 * What strategies see of a replica (nn/replica.h, decision 0056): its view is the replica
 * itself (its first member, no copy), the runtime's array is indexed by strata__replica_bytes
 * as by the struct, the view's vectors and offsets are what the public getters report, and
 * the setters strategies use change what the view and the getters then say. After a training
 * step the replicas' metrics hold every row of the batch once.
 */
#include <criterion/criterion.h>

#include "nn/replica_private.h"
#include "strategy/internal.h"
#include "tests/support/skipnet.h"

static struct strata_runtime *open_cfg(const struct strata_config *c)
{
        struct strata_runtime *rt;

        cr_assert_eq(strata_init(&rt, c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        return rt;
}

Test(replica_view, is_the_replica_and_what_the_getters_report)
{
        struct strata_config c = skipnet_cfg(SKIPNET_RESNET, STRATA_STRATEGY_DDP, 2);
        struct strata_runtime *rt = open_cfg(&c);

        cr_assert_eq(strata__replica_bytes, sizeof(struct strata__replica));
        for (int d = 0; d < 2; d++) {
                struct strata__replica *r = strata__rep(rt, d);
                const struct strata__replica_view *v = strata__repv(rt, d);
                const float *p;
                size_t n;

                cr_assert_eq(r, &rt->replicas[d], "device %d: indexed as the struct", d);
                cr_assert_eq((const void *)v, (const void *)&r->v, "the view is no copy");
                cr_assert_eq(v->dev, d);
                cr_assert_eq(strata__replica_shard(r), r->v.shard);
                cr_assert_eq(strata_parameters(rt, d, &p, &n), STRATA_OK);
                cr_assert_eq(n, v->nparam, "device %d: %zu parameters, the view says %zu", d,
                             n, v->nparam);
                cr_assert_eq(p, v->params, "host memory: the getter's values are the view's");
                for (int i = 0; i < v->nlayers; i++)
                        cr_assert_eq(v->poff[i], strata__replica_param_offset(r, i));
        }
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(replica_view, setters_change_what_the_view_and_getters_say)
{
        struct strata_config c = skipnet_cfg(SKIPNET_RESNET, STRATA_STRATEGY_DDP, 2);
        struct strata_runtime *rt = open_cfg(&c);
        struct strata__replica *r = strata__rep(rt, 1);
        const struct strata__replica_view *v = strata__replica_view(r);
        const float *state;
        uint64_t step;
        size_t n;

        strata__replica_set_rows(r, 3, 5);
        cr_assert_eq(v->row0, 3);
        cr_assert_eq(v->rows, 5);
        strata__replica_set_steps(r, 7);
        cr_assert_eq(strata__replica_steps(r), 7);
        cr_assert_eq(strata_optimizer_state(rt, 1, &state, &n, &step), STRATA_OK);
        cr_assert_eq(step, 7, "the getter reads the step the setter wrote (%llu)",
                     (unsigned long long)step);
        for (int i = 0; i < v->nlayers; i++)
                v->layers[i].grad_fresh = 0;
        strata__replica_skip(r);
        for (int i = 0; i < v->nlayers; i++)
                cr_assert_eq(v->layers[i].grad_fresh, 1, "layer %d: the next backward writes", i);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(replica_view, metrics_hold_every_row_once)
{
        struct strata_config c = skipnet_cfg(SKIPNET_RESNET, STRATA_STRATEGY_DDP, 2);
        struct strata_runtime *rt = open_cfg(&c);
        struct skipnet_run run;
        struct strata_metrics m;
        int rows = 0;

        skipnet_steps(rt, 0, 1, &run);
        for (int d = 0; d < 2; d++) {
                struct strata__replica_metrics rm;

                strata__replica_metrics(strata__rep(rt, d), &rm);
                rows += rm.rows;
        }
        strata__metrics(rt, &m);
        cr_assert_eq(rows, m.rows, "the devices' rows, %d, are the step's, %d", rows, m.rows);
        cr_assert_gt(rows, 0);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}
