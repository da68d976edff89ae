/*
 * A message-passing step on a small mesh through the runtime: both ends of each edge gathered
 * (gather(src), gather(dst) on a branch from the input), joined (concat), an edge MLP
 * (conv1d(4,1)), averaged into the nodes (scatter(mean): its in-degrees in aux), a linear
 * head. Runs repeat bitwise; ddp on 2 devices is within 1e-5 of single; in invariant mode one
 * device and ddp on 2 are the same bits; zero2, fsdp and spawn on 2 are ddp's bits; training,
 * evaluation and prediction allocate nothing and use exactly the planned memory under single,
 * ddp, fsdp, bf16-mixed and invariant mode; a bad mesh is refused when the model is planned,
 * the edge and value named, and the modules on a device with memory of its own. The guide's
 * MeshGraphNet processor step (two inputs, 20 modules, scatter(sum)) trains the same way:
 * repeatable, ddp within 1e-5, invariant mode bitwise on 1 and 2 devices, no heap (single,
 * invariant ddp).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/devsim.h"
#include "tests/support/rig.h"
#include "tools/heapcount.h"

#define CH 4
#define NODES 5 /* CH * NODES == RIG_IN */
#define EDGES 8
#define STEPS 6

static int32_t src[EDGES] = { 0, 1, 2, 3, 4, 0, 2, 4 };
static int32_t dst[EDGES] = { 1, 2, 3, 4, 0, 2, 0, 2 };
static struct strata_mesh mesh = { NODES, EDGES, src, dst };

/* The rig's data and loader with the graph model over (CH, NODES) node samples. */
static void graph_rig(struct rig *r)
{
        rig_init(r, 0);
        r->mods[0] = (struct strata_module){ .ops = &strata_gather, .mesh = &mesh };
        r->mods[1] = (struct strata_module){ .ops = &strata_gather, .mesh = &mesh, .from = -1,
                                             .branch = 1, .graph = STRATA_GATHER_DST };
        r->mods[2] = (struct strata_module){ .ops = &strata_concat, .from = 0 };
        r->mods[3] = (struct strata_module){ .ops = &strata_conv1d, .out = CH, .kernel = { 1 } };
        r->mods[4] = (struct strata_module){ .ops = &strata_scatter, .mesh = &mesh,
                                             .graph = STRATA_SCATTER_MEAN };
        r->mods[5] = (struct strata_module){ .ops = &strata_linear, .out = RIG_CLASSES };
        r->model.nmodules = 6;
        r->model.in_dims = (struct strata_dims){ CH, 1, { NODES } };
}

/* conv1d(2CH -> CH, 1) and linear(RIG_IN -> RIG_CLASSES). */
#define NP (2 * CH * CH + CH + RIG_IN * RIG_CLASSES + RIG_CLASSES)

static void params_of(struct rig *r, float *out)
{
        struct strata_runtime *rt = rig_open(&r->cfg);
        const float *p;
        size_t n, at = 0;

        rig_steps(r, rt, STEPS, NULL);
        for (int d = 0; at < NP; d++) { /* fsdp's shards put together */
                cr_assert_eq(strata_parameters(rt, d, &p, &n), STRATA_OK);
                memcpy(out + at, p, sizeof(float) * (at + n > NP ? NP - at : n));
                at += n;
                if (r->cfg.strategy.kind != STRATA_STRATEGY_FSDP)
                        break;
        }
        cr_assert_geq(at, NP);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(graph_parallel, runs_repeat_ddp_matches_and_invariant_mode_is_the_same_bits,
     .timeout = 120)
{
        static float single[NP], again[NP], ddp[NP], other[NP], inv1[NP], inv2[NP];
        struct rig r;

        graph_rig(&r);
        params_of(&r, single);
        params_of(&r, again);
        cr_assert_eq(memcmp(single, again, sizeof(single)), 0, "single runs differ");
        r.cfg = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        params_of(&r, ddp);
        cr_assert_leq(rig_rel_diff(ddp, single, NP), 1e-5, "ddp on 2: %g",
                      rig_rel_diff(ddp, single, NP));
        params_of(&r, again);
        cr_assert_eq(memcmp(ddp, again, sizeof(ddp)), 0, "ddp runs differ");
        r.cfg.strategy.kind = STRATA_STRATEGY_ZERO2;
        params_of(&r, other);
        cr_assert_eq(memcmp(ddp, other, sizeof(ddp)), 0, "zero2 is not ddp's bits");
        r.cfg.strategy.kind = STRATA_STRATEGY_FSDP;
        params_of(&r, other);
        cr_assert_eq(memcmp(ddp, other, sizeof(ddp)), 0, "fsdp is not ddp's bits");
        r.cfg.strategy.kind = STRATA_STRATEGY_DDP;
        r.cfg.strategy.invariant = 1;
        params_of(&r, inv2);
        r.cfg.strategy.kind = STRATA_STRATEGY_SINGLE;
        r.cfg.strategy.devices = 1;
        params_of(&r, inv1);
        cr_assert_eq(memcmp(inv1, inv2, sizeof(inv1)), 0,
                     "invariant mode: one device and ddp on 2 differ (%g)",
                     rig_rel_diff(inv2, inv1, NP));
}

/*
 * A spawned process trains ddp over the processes; rank 0 returns its parameters. No
 * Criterion assertion here: a child's would be reported to the runner as the test's.
 */
static struct rig spawn_rig; /* set up by the parent: the children inherit it and the mesh */

static int graph_child(int rank, int size, void *arg)
{
        struct strata_config c = rig_cfg(&spawn_rig, STRATA_STRATEGY_SPAWN, 1, 0);
        struct strata_runtime *rt;
        struct strata_batch b;
        const float *p;
        size_t np;

        (void)rank, (void)size, (void)arg;
        if (strata_init(&rt, &c) || strata_connect(rt))
                return 10;
        strata_loader_reset(&spawn_rig.loader, spawn_rig.idx, 256);
        for (int s = 0; s < STEPS; s++)
                if (!strata_loader_next(&spawn_rig.loader, &b) ||
                    strata_train_step(rt, &b, NULL) != STRATA_OK)
                        return 11;
        if (strata_parameters(rt, 0, &p, &np) || strata_spawn_return(p, NP * sizeof(*p)))
                return 12;
        return strata_teardown(rt) == STRATA_OK ? 0 : 13;
}

Test(graph_parallel, spawn_on_2_processes_is_ddp_on_2, .timeout = 60)
{
        static float ref[NP], got[NP];
        struct strata_spawn_result res;

        if (!strcmp(STRATA_SAN, "tsan"))
                cr_skip_test("under TSan (forks after threads: tests/strategy/processes.c)");
        graph_rig(&spawn_rig);
        cr_assert_eq(strata_spawn(2, graph_child, NULL, 20.0, got, sizeof(got), &res),
                     STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(res.failed_rank, -1);
        spawn_rig.cfg = rig_cfg(&spawn_rig, STRATA_STRATEGY_DDP, 2, 0);
        params_of(&spawn_rig, ref);
        cr_assert_eq(memcmp(ref, got, sizeof(ref)), 0, "spawn 2 != ddp 2");
}

static void mgn_rig(struct rig *r);

static void no_heap(void (*setup)(struct rig *), enum strata_strategy_kind kind, int n,
                    enum strata_precision prec, int invariant)
{
        rig_no_heap(setup, kind, n, prec, invariant);
}

Test(graph_parallel, no_heap_and_plan_is_used, .timeout = 120)
{
        strata_heapcount_start();
        if (strata_heapcount_stop() < 0)
                cr_skip("the sanitizer owns malloc in this build; counted in the plain build");
        no_heap(graph_rig, STRATA_STRATEGY_SINGLE, 1, STRATA_PRECISION_32, 0);
        no_heap(graph_rig, STRATA_STRATEGY_DDP, 2, STRATA_PRECISION_32, 0);
        no_heap(graph_rig, STRATA_STRATEGY_FSDP, 2, STRATA_PRECISION_32, 0);
        no_heap(graph_rig, STRATA_STRATEGY_DDP, 2, STRATA_PRECISION_BF16_MIXED, 0);
        no_heap(graph_rig, STRATA_STRATEGY_DDP, 2, STRATA_PRECISION_32, 1);
        no_heap(mgn_rig, STRATA_STRATEGY_SINGLE, 1, STRATA_PRECISION_32, 0);
        no_heap(mgn_rig, STRATA_STRATEGY_DDP, 2, STRATA_PRECISION_32, 1);
}

/* A bad mesh is refused when the model is planned, before any memory is laid out. */
Test(graph_parallel, bad_mesh_refused_at_plan)
{
        static int32_t bad[EDGES] = { 0, 1, 2, 3, 4, 0, -3, 4 };
        struct strata_mesh g = { NODES, EDGES, bad, dst };
        struct rig r;

        graph_rig(&r);
        r.mods[0].mesh = &g;
        rig_plan_refused(&r, STRATA_EINVAL, "a negative source",
                         "gather (module 0): mesh edge 6 has source node -3");
        g = (struct strata_mesh){ NODES + 1, EDGES, src, dst };
        rig_plan_refused(&r, STRATA_EINVAL, "a mesh of 6 nodes on (4, 5) samples",
                         "with the mesh's 6 nodes");
        r.mods[0].mesh = &mesh;
        r.mods[4].mesh = NULL;
        rig_plan_refused(&r, STRATA_EINVAL, "no mesh", "scatter (module 4): no mesh");
}

/* The guide's processor step on 2-feature latents of this mesh's 5 nodes and 5 of its edges. */
static int32_t msrc[5] = { 0, 1, 2, 3, 0 }, mdst[5] = { 1, 2, 0, 0, 3 };
static struct strata_mesh mmesh = { 5, 5, msrc, mdst };
static struct strata_module mgn[24];

static void mgn_rig(struct rig *r)
{
        struct strata_model m = { 0 };

        rig_init(r, 0);
        cr_assert_eq(strata_model_parse("input(2,5) input(2,5) gather(src) "
                                        "gather(dst,from=input0) concat(from=0) "
                                        "concat(from=input1) conv1d(2,1) relu conv1d(2,1) "
                                        "tokens layernorm(dims=1) tokens add(from=input1) "
                                        "scatter(sum) concat(from=input0) conv1d(2,1) relu "
                                        "conv1d(2,1) tokens layernorm(dims=1) tokens "
                                        "add(from=input0) linear(4)", mgn, 24, &m),
                     STRATA_OK, "%s", strata_last_error());
        for (int i = 0; i < m.nmodules; i++)
                mgn[i].mesh = &mmesh;
        cr_assert_eq(m.in_features, RIG_IN);
        r->model = m;
}

static size_t mgn_params(struct rig *r, float *out)
{
        struct strata_runtime *rt = rig_open(&r->cfg);
        const float *p;
        size_t n;

        rig_steps(r, rt, STEPS, NULL);
        cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
        cr_assert_leq(n, 1024);
        memcpy(out, p, sizeof(float) * n);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        return n;
}

Test(graph_parallel, the_guides_processor_step_trains_the_same_bits, .timeout = 120)
{
        static float single[1024], again[1024], ddp[1024], inv1[1024], inv2[1024], init[1024];
        struct strata_runtime *rt;
        const float *p;
        struct rig r;
        size_t n, np;

        mgn_rig(&r);
        rt = rig_open(&r.cfg);
        cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
        memcpy(init, p, sizeof(float) * n);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        np = mgn_params(&r, single);
        cr_assert_eq(np, n);
        cr_assert_gt(rig_rel_diff(single, init, np), 1e-4, "training moved the weights");
        mgn_params(&r, again);
        cr_assert_eq(memcmp(single, again, np * sizeof(float)), 0, "single runs differ");
        r.cfg = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        mgn_params(&r, ddp);
        cr_assert_leq(rig_rel_diff(ddp, single, np), 1e-5, "ddp on 2: %g",
                      rig_rel_diff(ddp, single, np));
        r.cfg.strategy.invariant = 1;
        mgn_params(&r, inv2);
        r.cfg.strategy.kind = STRATA_STRATEGY_SINGLE;
        r.cfg.strategy.devices = 1;
        mgn_params(&r, inv1);
        cr_assert_eq(memcmp(inv1, inv2, np * sizeof(float)), 0,
                     "invariant mode: one device and ddp on 2 differ (%g)",
                     rig_rel_diff(inv2, inv1, np));
}

/* The graph modules compute on the host: refused on a device with memory of its own. */
Test(graph_parallel, refused_where_memory_is_the_devices)
{
        struct rig r;

        graph_rig(&r);
        r.cfg.device.driver = devsim_driver();
        rig_plan_refused(&r, STRATA_ENOTSUP, "gather on devsim",
                         "module 0 (gather) computes on the host");
        r.mods[0] = (struct strata_module){ .ops = &strata_relu }; /* on the kernels */
        rig_plan_refused(&r, STRATA_ENOTSUP, "gather on devsim",
                         "module 1 (gather) computes on the host");
}
