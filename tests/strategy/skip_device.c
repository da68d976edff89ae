/*
 * Skip connections on a device whose memory the host does not address (the simulated device
 * of tests/support/devsim.c): the merge modules and the skip gradients run through the
 * driver's kernels on device buffers, the model's input a skip reads is the device's staged
 * copy, and single, ddp and dp (2 devices) reach bitwise the parameters and logits they reach
 * on host memory.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/devsim.h"
#include "tests/support/rig.h"

#define STEPS 12
#define NP (20 * 16 + 16 + 16 * 16 + 16 + 36 * 4 + 4)

/* linear relu linear add(from=1) concat(from=-1) linear: both merges, and the input read. */
static const struct strata_module mods[] = {
        { .ops = &strata_linear, .out = 16 }, { .ops = &strata_relu },
        { .ops = &strata_linear, .out = 16 }, { .ops = &strata_add, .from = 1 },
        { .ops = &strata_concat, .from = -1 }, { .ops = &strata_linear, .out = RIG_CLASSES },
};

struct outcome {
        float p[NP];
        float logits[RIG_BATCH * RIG_CLASSES];
};

static void run(struct rig *r, const struct strata_config *c, struct outcome *o)
{
        struct strata_runtime *rt = rig_open(c);
        struct strata_batch b;
        const float *p;
        size_t n;

        rig_steps(r, rt, STEPS, &b);
        cr_assert_eq(strata_predict_step(rt, &b, o->logits, RIG_BATCH * RIG_CLASSES), STRATA_OK,
                     "%s", strata_last_error());
        cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
        cr_assert_eq(n, (size_t)NP);
        memcpy(o->p, p, sizeof(o->p));
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

static void same_as_host(enum strata_strategy_kind kind, int devices)
{
        static struct outcome host, dev;
        struct strata_config c;
        struct rig r;
        long up;

        rig_init(&r, 0);
        r.model.modules = mods;
        r.model.nmodules = 6;
        c = rig_cfg(&r, kind, devices, 0);
        run(&r, &c, &host);
        up = devsim_uploaded();
        c.device.driver = devsim_driver();
        run(&r, &c, &dev);
        cr_assert_gt(devsim_uploaded(), up, "nothing was staged");
        cr_assert_eq(devsim_unbound(), 0, "device work on a thread with no device bound");
        cr_assert_eq(memcmp(dev.p, host.p, sizeof(host.p)), 0, "%s on %d: parameters differ",
                     strata_strategy_name(kind), devices);
        cr_assert_eq(memcmp(dev.logits, host.logits, sizeof(host.logits)), 0,
                     "%s on %d: logits differ", strata_strategy_name(kind), devices);
}

Test(skip_device, single_ddp_dp_as_on_host, .timeout = 120)
{
        same_as_host(STRATA_STRATEGY_SINGLE, 1);
        same_as_host(STRATA_STRATEGY_DDP, 2);
        same_as_host(STRATA_STRATEGY_DP, 2);
}
