/*
 * Typed parameter groups: every module's parameters and buffers are found by stable name
 * ("layers.1.running_mean") with their shape, role, gradient and optimizer-state slots,
 * without knowing the module; the trained groups tile the flat parameter vector exactly; the
 * walk gives every device's own memory; bad indices and bad group declarations are refused.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/rig.h"

/* linear(20->16), bn(16), relu, dropout, linear(16->4): what PyTorch would name them. */
static const struct {
        const char *name;
        size_t count, shape0, shape1;
        enum strata_param_role role;
} expect[] = {
        { "layers.0.weight", 16 * RIG_IN, 16, RIG_IN, STRATA_ROLE_WEIGHT },
        { "layers.0.bias", 16, 16, 1, STRATA_ROLE_BIAS },
        { "layers.1.weight", 16, 16, 1, STRATA_ROLE_WEIGHT },
        { "layers.1.bias", 16, 16, 1, STRATA_ROLE_BIAS },
        { "layers.1.running_mean", 16, 16, 1, STRATA_ROLE_RUNNING },
        { "layers.1.running_var", 16, 16, 1, STRATA_ROLE_RUNNING },
        { "layers.4.weight", RIG_CLASSES * 16, RIG_CLASSES, 16, STRATA_ROLE_WEIGHT },
        { "layers.4.bias", RIG_CLASSES, RIG_CLASSES, 1, STRATA_ROLE_BIAS },
};
#define NGROUPS ((int)(sizeof(expect) / sizeof(expect[0])))

static struct strata_runtime *start(struct rig *r, struct strata_config *c)
{
        struct strata_runtime *rt = NULL;

        cr_assert_eq(strata_init(&rt, c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        rig_steps(r, rt, 3, NULL);
        return rt;
}

Test(param_groups, names_shapes_and_tiling)
{
        struct strata_runtime *rt;
        struct strata_config c;
        const float *flat, *ost;
        size_t n, nopt, covered = 0;
        uint64_t t;
        struct rig r;
        int count;

        rig_init_full(&r);
        c = r.cfg;
        c.optim.kind = STRATA_OPTIM_ADAMW;
        c.optim.lr = 1e-3f;
        rt = start(&r, &c);
        cr_assert_eq(strata_parameter_count(rt, &count), STRATA_OK);
        cr_assert_eq(count, NGROUPS);
        cr_assert_eq(strata_parameters(rt, 0, &flat, &n), STRATA_OK);
        cr_assert_eq(strata_optimizer_state(rt, 0, &ost, &nopt, &t), STRATA_OK);
        for (int i = 0; i < NGROUPS; i++) {
                struct strata_param p;

                cr_assert_eq(strata_parameter(rt, 0, i, &p), STRATA_OK, "%s",
                             strata_last_error());
                cr_expect_str_eq(p.name, expect[i].name);
                cr_expect_eq(p.group.count, expect[i].count, "%s", p.name);
                cr_expect_eq(p.group.shape[0], expect[i].shape0, "%s", p.name);
                cr_expect_eq(p.group.shape[1], expect[i].shape1, "%s", p.name);
                cr_expect_eq(p.group.role, expect[i].role, "%s", p.name);
                cr_expect_eq(p.group.dtype, STRATA_F32);
                cr_expect_eq(p.shard_lo, 0);
                cr_expect_eq(p.shard_hi, p.group.count);
                cr_expect_null(p.master, "fp32: the values are the master copy");
                if (p.group.role == STRATA_ROLE_RUNNING) {
                        cr_expect_null(p.grad);
                        cr_expect_eq(p.opt_slots, 0);
                        continue;
                }
                /* Trained groups tile the flat vector in order, AdamW's two slots beside. */
                cr_expect_eq(p.offset, covered, "%s starts at %zu", p.name, p.offset);
                cr_expect_eq(p.value, flat + covered, "%s", p.name);
                cr_expect_eq(p.opt_slots, 2);
                cr_expect_eq(p.opt_state[0], ost + covered);
                cr_expect_eq(p.opt_state[1], ost + n + covered);
                covered += p.group.count;
        }
        cr_assert_eq(covered, n, "groups cover %zu of %zu parameters", covered, n);
        cr_assert_eq(nopt, 2 * n);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* The running statistics found by name are the ones BatchNorm updates: not the init values. */
Test(param_groups, buffers_are_live_running_statistics)
{
        struct strata_runtime *rt;
        struct strata_param mean, var;
        struct rig r;
        int moved = 0;

        rig_init_full(&r);
        rt = start(&r, &r.cfg);
        cr_assert_eq(strata_parameter(rt, 0, 4, &mean), STRATA_OK);
        cr_assert_eq(strata_parameter(rt, 0, 5, &var), STRATA_OK);
        cr_assert_str_eq(mean.name, "layers.1.running_mean");
        for (size_t j = 0; j < mean.group.count; j++)
                moved += mean.value[j] != 0.0f && var.value[j] != 1.0f;
        cr_assert_gt(moved, 8, "running statistics did not move in 3 steps (%d)", moved);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* Each device's walk points into its own replica; under ddp the values agree bitwise. */
Test(param_groups, every_device_has_its_own)
{
        struct strata_config c;
        struct strata_runtime *rt;
        struct rig r;

        rig_init(&r, 0);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        rt = start(&r, &c);
        for (int i = 0; i < 4; i++) {
                struct strata_param a, b;

                cr_assert_eq(strata_parameter(rt, 0, i, &a), STRATA_OK);
                cr_assert_eq(strata_parameter(rt, 1, i, &b), STRATA_OK);
                cr_assert_str_eq(a.name, b.name);
                cr_assert_neq(a.value, b.value);
                cr_assert_eq(memcmp(a.value, b.value, a.group.count * sizeof(float)), 0, "%s",
                             a.name);
                cr_assert_eq(a.opt_slots, 1, "SGD with momentum: one slot");
        }
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(param_groups, bad_arguments)
{
        struct strata_runtime *rt = NULL;
        struct strata_param p, before;
        struct rig r;
        int n;

        rig_init(&r, 0);
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_OK);
        cr_assert_eq(strata_parameter(rt, 0, 0, &p), STRATA_EBADSTATE, "before connect");
        cr_assert_eq(strata_parameter_count(rt, &n), STRATA_EBADSTATE);
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        memset(&p, 0x5a, sizeof(p));
        before = p;
        cr_assert_eq(strata_parameter(rt, 0, 4, &p), STRATA_EINVAL);
        cr_assert_eq(strata_parameter(rt, 0, -1, &p), STRATA_EINVAL);
        cr_assert_eq(strata_parameter(rt, 1, 0, &p), STRATA_EINVAL);
        cr_assert_eq(memcmp(&p, &before, sizeof(p)), 0, "a refused call wrote its output");
        cr_assert_eq(strata_parameter(rt, 0, 0, NULL), STRATA_EINVAL);
        cr_assert_eq(strata_parameter(NULL, 0, 0, &p), STRATA_EINVAL);
        cr_assert_eq(strata_parameter_count(rt, NULL), STRATA_EINVAL);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* An application module whose groups do not add up to its sizes is refused at plan time. */
static int bad_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        (void)l;
        strata_linear.shape(l, in, s);
        s->groups[1].count = 3; /* bias no longer matches */
        s->groups[1].shape[0] = 3;
        return STRATA_OK;
}

static int bad_name_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        strata_linear.shape(l, in, s);
        s->groups[0].name = "Weight.0";
        return STRATA_OK;
}

/* A module that declares no groups gets "param" and "state". */
static int plain_shape(const struct strata_layer *l, int in, struct strata_module_shape *s)
{
        strata_linear.shape(l, in, s);
        s->ngroups = 0;
        return STRATA_OK;
}

Test(param_groups, module_declarations_checked)
{
        struct strata_module_ops bad = strata_linear, badname = strata_linear;
        struct strata_module_ops plain = strata_linear;
        struct strata_plan_info pi;
        struct strata_runtime *rt;
        struct strata_param p;
        struct rig r;

        bad.shape = bad_shape;
        badname.shape = bad_name_shape;
        plain.shape = plain_shape;
        rig_init(&r, 0);
        r.mods[0].ops = &bad;
        cr_assert_eq(strata_plan(&r.cfg, &pi), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "groups hold"), "%s", strata_last_error());
        r.mods[0].ops = &badname;
        cr_assert_eq(strata_plan(&r.cfg, &pi), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "[a-z0-9_]"), "%s", strata_last_error());
        r.mods[0].ops = &plain;
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        cr_assert_eq(strata_parameter(rt, 0, 0, &p), STRATA_OK);
        cr_assert_str_eq(p.name, "layers.0.param");
        cr_assert_eq(p.group.count, 16 * RIG_IN + 16);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}
