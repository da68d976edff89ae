/*
 * What the plan holds for skip connections: a gradient buffer only for a module some merge
 * module reads, rows x its width, shared by sources whose spans in the reverse pass do not
 * overlap (the ResNet's two blocks) and apart where they nest; a source's output stays f32
 * under bf16-mixed where the modules on both sides would store it in bf16; and the plan of a
 * model grows by exactly its skip buffers when its merge modules read earlier outputs.
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

Test(skip_buffers, only_sources_and_shared_when_apart)
{
        struct strata_config c = skipnet_cfg(SKIPNET_RESNET, STRATA_STRATEGY_DDP, 2);
        struct strata_runtime *rt = open_cfg(&c);

        for (int d = 0; d < 2; d++) {
                const struct strata__replica *r = strata__rep(rt, d);

                for (int i = 0; i < r->v.nlayers; i++)
                        cr_assert_eq(r->gskip[i] != NULL, i == 1 || i == 6,
                                     "module %d: a buffer only for the sources 1 and 6", i);
                cr_assert_eq(r->gskip[1], r->gskip[6], "apart in the reverse pass: one buffer");
                cr_assert_eq(r->v.layers[5].dskip, r->gskip[1]);
                cr_assert_eq(r->v.layers[10].dskip, r->gskip[6]);
                cr_assert_eq(r->v.layers[5].dskip_add + r->v.layers[10].dskip_add, 0);
        }
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* 0: linear, 1: relu (read by 4 and 6), 2: linear, 3: relu (read by 5), 4-6 merges. */
static const struct strata_module nested[] = {
        { .ops = &strata_linear, .out = 8 }, { .ops = &strata_relu },
        { .ops = &strata_linear, .out = 8 }, { .ops = &strata_relu },
        { .ops = &strata_add, .from = 1 },   { .ops = &strata_add, .from = 3 },
        { .ops = &strata_concat, .from = 1 }, { .ops = &strata_linear, .out = 4 },
};

Test(skip_buffers, nested_spans_apart_and_readers_in_order)
{
        struct strata_model m = { .in_features = 8, .nmodules = 8, .modules = nested };
        struct strata_config c = STRATA_CONFIG_INIT;
        struct strata_runtime *rt;
        const struct strata__replica *r;

        c.model = &m;
        c.batch = 8;
        c.classes = 4;
        rt = open_cfg(&c);
        r = strata__rep(rt, 0);
        cr_assert_not_null(r->gskip[1]);
        cr_assert_not_null(r->gskip[3]);
        cr_assert_neq(r->gskip[1], r->gskip[3], "nested spans: two buffers");
        cr_assert_eq(r->v.layers[6].dskip, r->gskip[1]);
        cr_assert_eq(r->v.layers[6].dskip_add, 0, "the last reader writes");
        cr_assert_eq(r->v.layers[4].dskip, r->gskip[1]);
        cr_assert_eq(r->v.layers[4].dskip_add, 1, "an earlier reader adds");
        cr_assert_eq(r->v.layers[5].dskip, r->gskip[3]);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* linear relu linear relu add(from=1) linear: relu 1's output would be bf16, but 4 reads it. */
Test(skip_buffers, a_source_stays_f32_under_bf16_mixed)
{
        static const struct strata_module mods[] = {
                { .ops = &strata_linear, .out = 8 }, { .ops = &strata_relu },
                { .ops = &strata_linear, .out = 8 }, { .ops = &strata_relu },
                { .ops = &strata_add, .from = 1 },   { .ops = &strata_linear, .out = 4 },
        };
        struct strata_model m = { .in_features = 8, .nmodules = 6, .modules = mods };
        struct strata_config c = STRATA_CONFIG_INIT;
        struct strata_runtime *rt;
        const struct strata__replica *r;

        c.model = &m;
        c.batch = 8;
        c.classes = 4;
        c.precision.kind = STRATA_PRECISION_BF16_MIXED;
        rt = open_cfg(&c);
        r = strata__rep(rt, 0);
        cr_assert_eq(r->ytype[0], STRATA_BF16, "linear -> relu: bf16 as without skips");
        cr_assert_eq(r->ytype[1], STRATA_F32, "relu -> linear, read by add: f32");
        cr_assert_eq(r->ytype[2], STRATA_BF16);
        cr_assert_eq(r->ytype[3], STRATA_F32, "relu -> add: add declares no bf16_io");
        cr_assert_eq(r->ytype[4], STRATA_F32);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* The same widths with from=-1 (no buffer) and from=1: the plan differs by rows x 8 floats. */
Test(skip_buffers, the_plan_counts_each_buffer)
{
        static struct strata_module mods[] = {
                { .ops = &strata_linear, .out = 8 }, { .ops = &strata_relu },
                { .ops = &strata_add, .from = -1 }, { .ops = &strata_linear, .out = 4 },
        };
        struct strata_model m = { .in_features = 8, .nmodules = 4, .modules = mods };
        struct strata_config c = STRATA_CONFIG_INIT;
        struct strata_plan_info input, earlier;

        c.model = &m;
        c.batch = 64;
        c.classes = 4;
        cr_assert_eq(strata_plan(&c, &input), STRATA_OK, "%s", strata_last_error());
        mods[2].from = 0;
        cr_assert_eq(strata_plan(&c, &earlier), STRATA_OK, "%s", strata_last_error());
        cr_assert_geq(earlier.per_device, input.per_device + 64 * 8 * sizeof(float));
        cr_assert_leq(earlier.per_device, input.per_device + 64 * 8 * sizeof(float) + 64,
                      "one buffer of 64 rows x 8 (and its alignment): %zu vs %zu",
                      earlier.per_device, input.per_device);
}
