/*
 * An accumulation window that strata_end_accumulation_window() closes early (an epoch's last,
 * partial window) steps the optimizer on the gradients of its micro-batches, each loss still
 * divided by accumulate, as PyTorch Lightning does; the next micro-batch opens a new window.
 *
 * The reference is derived independently of the window logic: with accumulate 2 the partial
 * window's gradient is exactly half the gradient of its one batch at accumulate 1 (the loss
 * scale 1/(rows*2) against 1/rows, a power of two, so every product and sum scales exactly),
 * and plain SGD (no momentum, no weight decay) takes lr * g. So the partial step from the
 * state after the first full window equals, bit for bit, one step at accumulate 1 and lr / 2
 * from that state (loaded from a checkpoint), on single and on ddp with 2 devices.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/rig.h"

#define NP (RIG_IN * 16 + 16 + 16 * RIG_CLASSES + RIG_CLASSES)

static struct strata_config plain(const struct rig *r, enum strata_strategy_kind kind, int k,
                                  float lr)
{
        struct strata_config c = rig_cfg(r, kind, kind == STRATA_STRATEGY_SINGLE ? 1 : 2, 0);

        c.optim.momentum = 0.0f;
        c.optim.weight_decay = 0.0f;
        c.optim.lr = lr;
        c.train.accumulate = k;
        return c;
}

/* Every device's parameters equal device 0's, which go to @p out; the optimizer's steps. */
static uint64_t params(struct strata_runtime *rt, float *out)
{
        const float *p, *q, *st;
        size_t n, m, ns;
        uint64_t t;

        cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
        cr_assert_eq(n, (size_t)NP);
        memcpy(out, p, n * sizeof(float));
        for (int d = 1; d < strata_world_size(rt); d++) {
                cr_assert_eq(strata_parameters(rt, d, &q, &m), STRATA_OK);
                cr_assert_eq(memcmp(out, q, n * sizeof(float)), 0, "device %d differs", d);
        }
        cr_assert_eq(strata_optimizer_state(rt, 0, &st, &ns, &t), STRATA_OK);
        return t;
}

static void partial_equals_half_step(enum strata_strategy_kind kind)
{
        static float a[NP], b[NP];
        char path[64], after[80];
        struct strata_config c;
        struct strata_runtime *rt;
        struct strata_batch batch[3];
        struct rig r;

        snprintf(path, sizeof(path), "/tmp/strata-partial-%d.ckpt", (int)getpid());
        rig_init(&r, 0);
        strata_loader_reset(&r.loader, r.idx, 256);
        for (int i = 0; i < 3; i++)
                cr_assert(strata_loader_next_indexed(&r.loader, &batch[i]));
        /* accumulate 2: a full window of two batches, then a window of one, closed early. */
        c = plain(&r, kind, 2, 0.1f);
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        cr_assert_eq(strata_train_step(rt, &batch[0], NULL), STRATA_OK);
        cr_assert_eq(strata_train_step(rt, &batch[1], NULL), STRATA_OK);
        cr_assert_eq(strata_save_checkpoint(rt, path, NULL, 0), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_end_accumulation_window(rt), STRATA_OK);
        cr_assert_eq(strata_train_step(rt, &batch[2], NULL), STRATA_OK);
        cr_assert_eq(params(rt, a), 2u, "the partial window stepped the optimizer");
        snprintf(after, sizeof(after), "%s.after", path);
        cr_assert_eq(strata_save_checkpoint(rt, after, NULL, 0), STRATA_OK,
                     "at a window's end (a new window opens): %s", strata_last_error());
        unlink(after);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        /* The reference: one step of batch 2 at accumulate 1 and lr / 2 from that state. */
        c = plain(&r, kind, 1, 0.05f);
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        cr_assert_eq(strata_load_checkpoint(rt, path, NULL, 0, NULL, NULL), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_train_step(rt, &batch[2], NULL), STRATA_OK);
        cr_assert_eq(params(rt, b), 2u);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        unlink(path);
        cr_assert_eq(memcmp(a, b, sizeof(a)), 0, "strategy %s: the partial window's step is "
                     "not the half-gradient step", strata_strategy_name(kind));
}

Test(accumulate_partial_window, single_steps_on_the_partial_window, .timeout = 60)
{
        partial_equals_half_step(STRATA_STRATEGY_SINGLE);
}

Test(accumulate_partial_window, ddp_reduces_and_steps_on_the_partial_window, .timeout = 60)
{
        partial_equals_half_step(STRATA_STRATEGY_DDP);
}

Test(accumulate_partial_window, dp_steps_on_the_partial_window, .timeout = 60)
{
        partial_equals_half_step(STRATA_STRATEGY_DP);
}

/* Without a mark the window runs its full length; bad calls are refused. */
Test(accumulate_partial_window, unmarked_windows_and_bad_calls)
{
        struct strata_config c;
        struct strata_runtime *rt;
        struct strata_batch b;
        struct rig r;
        float p[NP];

        rig_init(&r, 0);
        cr_assert_eq(strata_end_accumulation_window(NULL), STRATA_EINVAL);
        c = plain(&r, STRATA_STRATEGY_SINGLE, 3, 0.1f);
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_end_accumulation_window(rt), STRATA_EBADSTATE, "not connected");
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        strata_loader_reset(&r.loader, r.idx, 256);
        cr_assert(strata_loader_next_indexed(&r.loader, &b));
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK);
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK);
        cr_assert_eq(params(rt, p), 0u, "two of three micro-batches: no step yet");
        cr_assert_eq(strata_save_checkpoint(rt, "/tmp/never.ckpt", NULL, 0), STRATA_EBADSTATE);
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK);
        cr_assert_eq(params(rt, p), 1u);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}
