/*
 * ddp's split step (decision 0096) sums a bucket of at most 64 floats with the all-reduce,
 * whose eager path meets the devices once, not with the reduce-scatter, which meets them
 * twice: a model of 63 parameters (one Linear 20 -> 3) at 2 devices steps with no second
 * meeting on the device communicator. The sum has the bits of the reduce-scatter's (each
 * element device 0's share + device 1's) on both devices, and the replicas stay equal.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "drivers/comm_internal.h"
#include "strategy/internal.h"
#include "strategy/multi.h"
#include "tests/support/rig.h"

#define NP (RIG_IN * RIG_OUT + RIG_OUT)

/* The regression rig with one Linear 20 -> 3: NP parameters, one bucket. */
static void small_rig(struct rig *r)
{
        rig_init_regression(r, &strata_mse);
        r->mods[0] = (struct strata_module){ .ops = &strata_linear, .out = RIG_OUT };
        r->model.nmodules = 1;
}

/* Device 0's gradients of one step of the single strategy on @p b. */
static void share(struct rig *r, const struct strata_batch *b, float *out)
{
        struct strata_config c = r->cfg;
        struct strata_runtime *rt;
        struct strata_param p;

        c.batch = RIG_BATCH / 2;
        rt = rig_open(&c);
        cr_assert_eq(strata_train_step(rt, b, NULL), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_parameter(rt, 0, 0, &p), STRATA_OK);
        memcpy(out, p.grad, sizeof(float) * NP);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(split_small_bucket, one_meeting_and_the_sum_on_both_devices, .timeout = 60)
{
        static float ga[NP], gb[NP];
        struct strata_batch all, half[2];
        struct strata_runtime *rt;
        struct strata_config c;
        struct strata_comm *dc;
        struct rig r;

        small_rig(&r);
        strata_loader_reset(&r.loader, r.idx, 256);
        cr_assert(strata_loader_next(&r.loader, &all));
        for (int h = 0; h < 2; h++) { /* the rows each of two ddp devices gets */
                size_t lo = (size_t)h * RIG_BATCH / 2;

                half[h] = all;
                half[h].rows = RIG_BATCH / 2;
                if (all.index) {
                        half[h].index = all.index + lo;
                        continue;
                }
                half[h].x = (const float *)all.x + lo * (size_t)all.dim;
                half[h].t = (const float *)all.t + lo * RIG_OUT;
        }
        share(&r, &half[0], ga);
        share(&r, &half[1], gb);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        rt = rig_open(&c);
        cr_assert(strata__dev_split(rt, strata__multi(rt)), "ddp x 2 splits its step");
        dc = strata__multi(rt)->dcomm;
        for (int s = 0; s < 3; s++) {
                uint64_t seq = dc->flag[0].seq, done = dc->flag[0].done;
                const float *p0, *p1;
                struct strata_param g[2];
                size_t n;

                cr_assert_eq(strata_train_step(rt, &all, NULL), STRATA_OK, "%s",
                             strata_last_error());
                cr_assert_gt(dc->flag[0].seq, seq, "step %d: no collective", s);
                cr_assert_eq(dc->flag[0].done, done, "step %d: %llu collectives, a second "
                             "meeting", s, (unsigned long long)(dc->flag[0].seq - seq));
                for (int d = 0; s == 0 && d < 2; d++) {
                        cr_assert_eq(strata_parameter(rt, d, 0, &g[d]), STRATA_OK);
                        for (int i = 0; i < NP; i++) {
                                float a = ga[i] * 0.5f, b = gb[i] * 0.5f;

                                cr_assert_eq(g[d].grad[i], a + b, "device %d, element %d: %a, "
                                             "want %a", d, i, (double)g[d].grad[i],
                                             (double)(a + b));
                        }
                }
                cr_assert_eq(strata_parameters(rt, 0, &p0, &n), STRATA_OK);
                cr_assert_eq(n, NP);
                cr_assert_eq(strata_parameters(rt, 1, &p1, &n), STRATA_OK);
                cr_assert_eq(memcmp(p0, p1, sizeof(float) * NP), 0, "step %d: replicas differ",
                             s);
        }
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}
