/*
 * The strategies on a device whose memory the host does not address (the simulated device of
 * tests/support/devsim.c: the CPU's math behind the driver interface a GPU uses). dp and ddp
 * must then stage batches, run their collectives through the driver and read results back,
 * and reach bitwise the parameters, metrics and logits they reach on host memory, also where
 * every micro-batch is reduced (accumulate_reduce each; zero2 too).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "tests/support/devsim.h"
#include "tests/support/pool.h"
#include "tests/support/rig.h"

#define NP_MAX 2048
#define STEPS 20

struct outcome {
        float params[NP_MAX];
        float logits[RIG_BATCH * RIG_CLASSES];
        struct strata_metrics eval;
        size_t n;
};

static void run(struct rig *r, const struct strata_config *cfg, struct outcome *o)
{
        struct strata_runtime *rt;
        struct strata_batch b;
        const float *p;

        memset(o, 0, sizeof(*o));
        cr_assert_eq(strata_init(&rt, cfg), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        rig_steps(r, rt, STEPS, &b);
        cr_assert_eq(strata_eval_step(rt, &b, &o->eval), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_predict_step(rt, &b, o->logits, RIG_BATCH * RIG_CLASSES), STRATA_OK,
                     "%s", strata_last_error());
        cr_assert_eq(strata_parameters(rt, 0, &p, &o->n), STRATA_OK);
        cr_assert_leq(o->n, NP_MAX);
        memcpy(o->params, p, o->n * sizeof(float));
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

static int each; /* accumulate 2, every micro-batch reduced (accumulate_reduce each) */

static void same_as_host(enum strata_strategy_kind kind)
{
        static struct outcome host, dev;
        struct rig r;

        rig_init_full(&r);
        for (int n = 1; n <= (kind == STRATA_STRATEGY_SINGLE ? 1 : 3); n++) {
                struct strata_config c = rig_cfg(&r, kind, n, 1);
                long up = devsim_uploaded();

                c.train.clip_norm = 0.5f;
                c.train.accumulate = each ? 2 : 0;
                c.train.accumulate_reduce = each ? STRATA_ACCUMULATE_REDUCE_EACH
                                                 : STRATA_ACCUMULATE_REDUCE_WINDOW;
                run(&r, &c, &host);
                c.device.driver = devsim_driver();
                run(&r, &c, &dev);
                cr_assert_gt(devsim_uploaded(), up, "%d devices: nothing was staged", n);
                cr_assert_eq(devsim_unbound(), 0, "device work on a thread with no device bound");
                cr_assert_eq(dev.n, host.n);
                cr_assert_eq(memcmp(dev.params, host.params, host.n * sizeof(float)), 0,
                             "%d devices: parameters differ from host memory", n);
                cr_assert_eq(memcmp(dev.logits, host.logits, sizeof(host.logits)), 0,
                             "%d devices: predicted logits differ", n);
                cr_assert_eq(dev.eval.correct, host.eval.correct);
                cr_assert_eq(dev.eval.rows, host.eval.rows);
                cr_assert_eq(dev.eval.loss, host.eval.loss, "eval loss %g vs %g", dev.eval.loss,
                             host.eval.loss);
        }
}

Test(device_memory, ddp_same_as_host_memory, .timeout = 120)
{
        same_as_host(STRATA_STRATEGY_DDP);
}

Test(device_memory, dp_same_as_host_memory, .timeout = 120)
{
        same_as_host(STRATA_STRATEGY_DP);
}

Test(device_memory, single_same_as_host_memory)
{
        same_as_host(STRATA_STRATEGY_SINGLE);
}

/*
 * Every micro-batch reduced: each layer's buffer reduced through the driver's collectives and
 * added into the window's sum with its add kernel, in device memory; zero2's reduce-scatter
 * into its shard too.
 */
Test(device_memory, each_same_as_host_memory, .timeout = 120)
{
        each = 1;
        same_as_host(STRATA_STRATEGY_DDP);
        same_as_host(STRATA_STRATEGY_DP);
        same_as_host(STRATA_STRATEGY_SINGLE);
        same_as_host(STRATA_STRATEGY_ZERO2);
        each = 0;
}

Test(device_memory, multi_device_needs_device_collectives)
{
        struct strata_runtime *rt = NULL;
        struct strata_plan_info pl;
        struct rig r;

        rig_init(&r, 0);
        r.cfg.device.driver = devsim_driver_no_comm();
        cr_assert_eq(strata_plan(&r.cfg, &pl), STRATA_OK, "single needs no collectives");
        r.cfg.strategy.kind = STRATA_STRATEGY_DDP;
        r.cfg.strategy.devices = 2;
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_ENOTSUP);
        cr_assert_null(rt);
        cr_assert(strstr(strata_last_error(), "reduce_many"), "%s", strata_last_error());
        r.cfg.device.driver = devsim_driver();
        cr_assert_eq(strata_plan(&r.cfg, &pl), STRATA_OK, "%s", strata_last_error());
        cr_assert_gt(pl.device_bytes, 0);
}

Test(device_memory, application_driver_is_checked)
{
        static struct strata_device_ops broken;
        static struct driver_copy no_gemm;
        struct strata_runtime *rt = NULL;
        struct rig r;

        cr_assert_eq(strata_device_check(NULL), STRATA_EINVAL);
        driver_copy(&no_gemm, devsim_driver());
        no_gemm.k.gemm = NULL; /* a mandatory kernel */
        cr_assert_eq(strata_device_check(&no_gemm.dev), STRATA_EINVAL);
        cr_assert(strstr(strata_last_error(), "devsim"), "%s", strata_last_error());
        broken = *devsim_driver();
        broken.kernels = NULL;
        cr_assert_eq(strata_device_check(&broken), STRATA_EINVAL);
        broken = *devsim_driver();
        broken.unreserve = NULL; /* what it reserves it must give back */
        cr_assert_eq(strata_device_check(&broken), STRATA_EINVAL);
        broken = *devsim_driver();
        broken.to_host = NULL; /* copies are mandatory for every device */
        cr_assert_eq(strata_device_check(&broken), STRATA_EINVAL);
        rig_init(&r, 0);
        r.cfg.device.driver = &broken;
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_EINVAL);
        cr_assert_null(rt);
        cr_assert_eq(strata_device_check(devsim_driver()), STRATA_OK);
}

/* ---- the device communicator itself ---- */

struct cjob {
        struct strata_comm *c;
        float *buf[2];
        int32_t *ibuf[2];
        int rc[2][3]; /* per rank */
};

static int cgo(int rank, void *arg)
{
        struct cjob *j = arg;

        cr_assert_eq(devsim_driver()->bind(rank), STRATA_OK);
        j->rc[rank][0] = strata_comm_all_reduce(j->c, rank, j->buf[rank], j->buf[rank], 100,
                                          STRATA_F32, STRATA_OP_MEAN);
        j->rc[rank][1] = strata_comm_all_reduce(j->c, rank, j->ibuf[rank], j->ibuf[rank], 10,
                                          STRATA_I32, STRATA_OP_SUM);
        j->rc[rank][2] = strata_comm_all_reduce(j->c, rank, j->buf[rank], j->buf[rank], 100,
                                          STRATA_F32, STRATA_OP_MAX);
        return STRATA_OK;
}

Test(device_memory, device_comm_is_f32_sum_or_mean, .timeout = 30)
{
        static struct cjob j[1];
        struct strata_comm *c = NULL;
        struct pool p;

        pool_start(&p, 2, 5.0);
        cr_assert_eq(strata__comm_init_workers(&c, &p.arena, p.w, devsim_driver_no_comm()),
                     STRATA_EINVAL);
        cr_assert_null(c);
        cr_assert_eq(strata__comm_init_workers(&c, &p.arena, p.w, devsim_driver()), STRATA_OK,
                     "%s", strata_last_error());
        j[0].c = c;
        for (int r = 0; r < 2; r++) {
                j[0].buf[r] = pool_alloc(&p, 100 * sizeof(float));
                j[0].ibuf[r] = pool_alloc(&p, 10 * sizeof(int32_t));
                for (int i = 0; i < 100; i++)
                        j[0].buf[r][i] = (float)(r * 100 + i);
                for (int i = 0; i < 10; i++)
                        j[0].ibuf[r][i] = 7;
        }
        cr_assert_eq(strata__workers_run(p.w, cgo, &j[0]), STRATA_OK, "%s", strata_last_error());
        for (int r = 0; r < 2; r++)
                cr_assert_eq(j[0].rc[r][0], STRATA_OK, "rank %d", r);
        for (int r = 0; r < 2; r++)
                for (int i = 0; i < 100; i++)
                        cr_assert_eq(j[0].buf[r][i], (float)(50 + i), "rank %d [%d]", r, i);
        /* Other dtypes and ops are refused on every rank; nothing is written, nothing hangs. */
        for (int r = 0; r < 2; r++) {
                cr_assert_eq(j[0].rc[r][1], STRATA_ENOTSUP, "rank %d: i32", r);
                cr_assert_eq(j[0].rc[r][2], STRATA_ENOTSUP, "rank %d: max", r);
        }
        for (int r = 0; r < 2; r++)
                for (int i = 0; i < 10; i++)
                        cr_assert_eq(j[0].ibuf[r][i], 7);
        cr_assert_eq(devsim_unbound(), 0);
        pool_stop(&p);
}
