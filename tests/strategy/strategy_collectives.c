/* The Strategy surface's collectives and properties through the runtime, on 1 and 3 devices. */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/rig.h"

static void surface(enum strata_strategy_kind kind, int n)
{
        struct strata_runtime *rt;
        struct rig r;
        struct strata_config c;
        float v[4][5], g[4][15];
        void *bufs[4];
        const void *send[4];
        void *recv[4];
        int flags[4], out = -1;

        rig_init(&r, 0);
        c = r.cfg;
        c.strategy.kind = kind;
        c.strategy.devices = n;
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_reduce(rt, NULL, 0, STRATA_F32, STRATA_OP_SUM), STRATA_EBADSTATE);
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        cr_assert(strata_is_global_zero(rt));
        cr_assert_eq(strata_root_device(rt), 0);
        cr_assert(strata_handles_gradient_accumulation(rt));
        cr_assert_eq(strata_world_size(rt), n);
        for (int op = 0; op < STRATA_OP_COUNT; op++) {
                for (int d = 0; d < n; d++) {
                        for (int i = 0; i < 5; i++)
                                v[d][i] = (float)(d * 10 + i);
                        bufs[d] = v[d];
                }
                cr_assert_eq(strata_reduce(rt, bufs, 5, STRATA_F32, op), STRATA_OK, "%s",
                             strata_last_error());
                for (int d = 0; d < n; d++)
                        for (int i = 0; i < 5; i++) {
                                float s = 0, mx = (float)i, mn = (float)i;

                                for (int k = 0; k < n; k++) {
                                        s += (float)(k * 10 + i);
                                        mx = (float)(k * 10 + i) > mx ? (float)(k * 10 + i) : mx;
                                }
                                /* integers: the pairwise tree's sum is exact too */
                                cr_assert_eq(v[d][i], op == STRATA_OP_SUM ||
                                                              op == STRATA_OP_SUM_TREE ? s
                                                      : op == STRATA_OP_MEAN ? s / (float)n
                                                      : op == STRATA_OP_MAX  ? mx
                                                                             : mn,
                                             "op %d device %d elem %d", op, d, i);
                        }
        }
        for (int d = 0; d < n; d++) {
                for (int i = 0; i < 5; i++)
                        v[d][i] = (float)(100 * d + i);
                send[d] = v[d];
                recv[d] = g[d];
        }
        cr_assert_eq(strata_all_gather(rt, send, recv, 5, STRATA_F32), STRATA_OK);
        for (int d = 0; d < n; d++)
                for (int k = 0; k < n; k++)
                        for (int i = 0; i < 5; i++)
                                cr_assert_eq(g[d][k * 5 + i], (float)(100 * k + i));
        cr_assert_eq(strata_broadcast(rt, bufs, 5, STRATA_F32, n - 1), STRATA_OK);
        for (int d = 0; d < n; d++)
                cr_assert_eq(v[d][4], (float)(100 * (n - 1) + 4));
        cr_assert_eq(strata_broadcast(rt, bufs, 5, STRATA_F32, n), STRATA_EINVAL);
        cr_assert_eq(strata_barrier(rt), STRATA_OK);
        for (int d = 0; d < n; d++)
                flags[d] = d == n - 1;
        cr_assert_eq(strata_reduce_boolean_decision(rt, flags, 0, &out), STRATA_OK);
        cr_assert_eq(out, 1, "any");
        cr_assert_eq(strata_reduce_boolean_decision(rt, flags, 1, &out), STRATA_OK);
        cr_assert_eq(out, n == 1, "all");
        cr_assert_eq(strata_reduce_boolean_decision(rt, NULL, 1, &out), STRATA_EINVAL);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(strategy_collectives, ddp_three_devices)
{
        surface(STRATA_STRATEGY_DDP, 3);
}

Test(strategy_collectives, dp_three_devices)
{
        surface(STRATA_STRATEGY_DP, 3);
}

Test(strategy_collectives, single_device)
{
        surface(STRATA_STRATEGY_SINGLE, 1);
}
