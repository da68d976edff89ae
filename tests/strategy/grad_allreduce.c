/*
 * ddp's bf16 gradient all-reduce (cfg.strategy.grad_allreduce). Each device's gradients,
 * computed here by single-device runtimes on its half of the batch, are rounded to bf16 by an
 * independent reference (frexp/nearbyint), summed and rounded again; ddp's reduced gradients
 * must be exactly that, on every device, where the f32 sum gives the exact f32 sum. In f32,
 * where ddp splits its optimizer step (decision 0086), each device's part of the sum lands in
 * its own replica only (decision 0096): outside its part a device's gradient is its own share
 * (the buckets' sum, and invariant mode's tree over the devices' blocks).
 * Also: runs repeat bitwise, the staging is in the plan (plan = used), and bad input is
 * refused.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "tests/support/devsim.h"
#include "tests/support/rig.h"

#define NP (RIG_IN * 16 + 16 + 16 * RIG_CLASSES + RIG_CLASSES)

/*
 * The first element of device 1's part of ddp's split step over NP parameters at 2 devices
 * (strata__dev_part(): blocks of ceil(NP / 2) elements rounded up to a cache line of floats).
 */
#define PART ((NP / 2 + NP % 2 + 15) / 16 * 16)

/* x rounded to bf16, nearest even, computed without the library's bit tricks. */
static float bf16_ref(float x)
{
        int e;
        double m;

        if (x == 0.0f || !isfinite(x))
                return x;
        m = frexp(x, &e); /* the rig's gradients are normal numbers: 8 significant bits */
        return (float)ldexp(nearbyint(ldexp(m, 8)), e - 8);
}

/* Device @p dev's flat gradient vector after one training step of @p c on @p b. */
static void one_step_grads(const struct strata_config *c, const struct strata_batch *b,
                           int dev, float *out)
{
        struct strata_runtime *rt;
        struct strata_param p;
        const float *v;
        size_t n;

        cr_assert_eq(strata_init(&rt, c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_train_step(rt, b, NULL), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_parameters(rt, dev, &v, &n), STRATA_OK);
        cr_assert_eq(n, NP);
        cr_assert_eq(strata_parameter(rt, dev, 0, &p), STRATA_OK);
        cr_assert_eq(p.offset, 0); /* trained groups tile the flat vector from group 0 */
        memcpy(out, p.grad, sizeof(float) * NP);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* The rig's first batch, and its halves (the rows each of two ddp devices gets). */
static void batches(struct rig *r, struct strata_batch *all, struct strata_batch *half)
{
        strata_loader_reset(&r->loader, r->idx, 256);
        cr_assert(strata_loader_next(&r->loader, all));
        cr_assert_eq(all->rows, RIG_BATCH);
        for (int h = 0; h < 2; h++) {
                int lo = h * RIG_BATCH / 2;

                half[h] = *all;
                half[h].rows = RIG_BATCH / 2;
                half[h].y = all->y + lo;
                if (all->x)
                        half[h].x = (const float *)all->x + (size_t)lo * (size_t)all->dim;
                else
                        half[h].index = all->index + lo;
        }
}

Test(grad_allreduce, bf16_sum_of_rounded_gradients_rounded_once, .timeout = 60)
{
        static float ga[NP], gb[NP], f32[2][NP], bf[2][NP];
        struct strata_batch all, half[2];
        struct strata_config c;
        struct rig r;
        int exact_f32 = 0, differ = 0;

        rig_init(&r, 0);
        batches(&r, &all, half);
        c = r.cfg;
        c.batch = RIG_BATCH / 2;
        one_step_grads(&c, &half[0], 0, ga);
        one_step_grads(&c, &half[1], 0, gb);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        one_step_grads(&c, &all, 0, f32[0]);
        one_step_grads(&c, &all, 1, f32[1]);
        c.strategy.grad_allreduce = STRATA_BF16;
        one_step_grads(&c, &all, 0, bf[0]);
        one_step_grads(&c, &all, 1, bf[1]);
        for (int i = 0; i < NP; i++) {
                /* A device's share of the mean is half its half-batch mean: exact in f32. */
                float a = ga[i] * 0.5f, b = gb[i] * 0.5f;
                float want = bf16_ref(bf16_ref(a) + bf16_ref(b)), sum = f32[i >= PART][i];

                cr_assert_eq(sum, a + b, "f32 sum, element %d of device %d's part: %a, want %a",
                             i, i >= PART, (double)sum, (double)(a + b));
                cr_assert_eq(bf[0][i], want, "bf16 all-reduce, element %d: %a, want %a", i,
                             (double)bf[0][i], (double)want);
                cr_assert_eq(bf[1][i], bf[0][i], "device 1 differs at element %d", i);
                exact_f32 += bf16_ref(sum) == sum;
                differ += bf[0][i] != sum;
        }
        cr_assert_lt(exact_f32, NP / 2, "the f32 sums are mostly bf16 values: a weak test");
        cr_assert_gt(differ, NP / 2, "bf16 all-reduce changed only %d of %d gradients", differ,
                     NP);
}

/*
 * The split step's f32 sum: each device's part into its own replica, nothing into the other's,
 * which keeps its own share of the mean there (the old all-reduce wrote the sum into both);
 * with one bucket for the model, and with a bucket a layer (@p bucket_bytes 64: the last
 * layer's bucket lies in device 1's part alone, the first layer's straddles both).
 */
static void split_sum(size_t bucket_bytes)
{
        static float ga[NP], gb[NP], g[2][NP];
        struct strata_batch all, half[2];
        struct strata_config c;
        struct rig r;
        int kept = 0;

        rig_init(&r, 0);
        batches(&r, &all, half);
        c = r.cfg;
        c.batch = RIG_BATCH / 2;
        one_step_grads(&c, &half[0], 0, ga);
        one_step_grads(&c, &half[1], 0, gb);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        c.strategy.bucket_bytes = bucket_bytes;
        one_step_grads(&c, &all, 0, g[0]);
        one_step_grads(&c, &all, 1, g[1]);
        for (int i = 0; i < NP; i++) {
                int owner = i >= PART, other = !owner;
                float a = ga[i] * 0.5f, b = gb[i] * 0.5f, own = other ? b : a;

                cr_assert_eq(g[owner][i], a + b, "element %d, device %d's part: %a, want %a", i,
                             owner, (double)g[owner][i], (double)(a + b));
                cr_assert_eq(g[other][i], own, "element %d on device %d (not its part): %a, "
                             "want its own share %a", i, other, (double)g[other][i],
                             (double)own);
                kept += own != a + b;
        }
        cr_assert_gt(kept, NP / 2, "only %d of %d elements tell the shares from the sum", kept,
                     NP);
}

Test(grad_allreduce, f32_split_step_sums_each_part_into_its_own_replica, .timeout = 60)
{
        split_sum(0);
        split_sum(64);
}

/*
 * Invariant mode's tree variant at 2 devices splits its step too: each device's part of the
 * pairwise sum over the devices' blocks lands in its own replica only. The reduced gradient is
 * one device's (invariant mode: the same on any device count); outside its part a device
 * keeps its own block's sum.
 */
Test(grad_allreduce, tree_split_step_sums_each_part_into_its_own_replica, .timeout = 60)
{
        static float one[NP], g[2][NP];
        struct strata_batch all, half[2];
        struct strata_config c;
        struct rig r;
        int kept = 0;

        rig_init(&r, 0);
        batches(&r, &all, half);
        c = r.cfg;
        c.strategy.invariant = 1;
        one_step_grads(&c, &all, 0, one);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        c.strategy.invariant = 1;
        one_step_grads(&c, &all, 0, g[0]);
        one_step_grads(&c, &all, 1, g[1]);
        for (int i = 0; i < NP; i++) {
                int owner = i >= PART;

                cr_assert_eq(g[owner][i], one[i], "element %d, device %d's part: %a, want %a",
                             i, owner, (double)g[owner][i], (double)one[i]);
                kept += g[!owner][i] != one[i];
        }
        cr_assert_gt(kept, NP / 2, "only %d of %d elements outside a device's part differ from "
                     "the sum: the other replica got it too", kept, NP);
}

Test(grad_allreduce, runs_repeat_bitwise_and_plan_is_used, .timeout = 60)
{
        static float a[NP], b[NP], f[NP];
        struct strata_plan_info p32, p16;
        struct strata_memory_info m;
        struct strata_runtime *rt;
        struct rig r;
        struct strata_config c;

        rig_init(&r, 0);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        rig_train_cfg(&r, &c, 20, f, NP);
        cr_assert_eq(strata_plan(&c, &p32), STRATA_OK);
        c.strategy.grad_allreduce = STRATA_BF16;
        rig_train_cfg(&r, &c, 20, a, NP);
        rig_train_cfg(&r, &c, 20, b, NP);
        cr_assert_eq(memcmp(a, b, sizeof(a)), 0, "bf16 all-reduce runs differ");
        cr_assert_neq(memcmp(a, f, sizeof(a)), 0, "bf16 all-reduce trained as f32 does");
        cr_assert_leq(rig_rel_diff(a, f, NP), 0.05, "bf16 all-reduce drifted from f32");
        cr_assert_eq(strata_plan(&c, &p16), STRATA_OK);
        /* per device: the region rounds each device's arena to its alignment */
        cr_assert_geq(p16.per_device - p32.per_device, NP * sizeof(uint16_t),
                      "the plan lacks a device's bf16 staging (%zu, then %zu bytes)",
                      p32.per_device, p16.per_device);
        cr_assert_geq(p16.bytes, p32.bytes);
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        rig_steps(&r, rt, 3, NULL);
        cr_assert_eq(strata_memory(rt, &m), STRATA_OK);
        cr_assert_eq(m.used, m.planned, "used %zu, planned %zu", m.used, m.planned);
        cr_assert_eq(m.planned, p16.bytes);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(grad_allreduce, bad_input_refused, .timeout = 30)
{
        struct strata_plan_info p;
        struct strata_config c;
        struct rig r;

        rig_init(&r, 0);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        c.strategy.grad_allreduce = STRATA_F16;
        cr_assert_eq(strata_plan(&c, &p), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "grad_allreduce"), "%s", strata_last_error());
        c.strategy.grad_allreduce = (enum strata_dtype)-1;
        cr_assert_eq(strata_plan(&c, &p), STRATA_EINVAL);
        c.strategy.grad_allreduce = STRATA_BF16;
        c.strategy.kind = STRATA_STRATEGY_DP;
        cr_assert_eq(strata_plan(&c, &p), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "not under dp"), "%s", strata_last_error());
        c.strategy.kind = STRATA_STRATEGY_SINGLE;
        c.strategy.devices = 1;
        cr_assert_eq(strata_plan(&c, &p), STRATA_EINVAL);
        c.strategy.kind = STRATA_STRATEGY_DDP;
        c.strategy.devices = 2;
        c.device.driver = devsim_driver(); /* gradients in device memory */
        cr_assert_eq(strata_plan(&c, &p), STRATA_ENOTSUP);
        cr_assert(strstr(strata_last_error(), "host memory"), "%s", strata_last_error());
        c.device.driver = NULL;
        cr_assert_eq(strata_config_set(&c, "grad_allreduce", STRATA_F32), STRATA_OK);
        cr_assert_eq(c.strategy.grad_allreduce, STRATA_F32);
        cr_assert_eq(strata_plan(&c, &p), STRATA_OK);
}
