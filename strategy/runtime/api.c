/*
 * The Strategy API's calls on a live runtime: the training, validation and predict steps
 * (each checks its batch, then dispatches the lifecycle's events), the stop request checked
 * between steps, and the collectives (reduce, all_gather, broadcast, barrier,
 * reduce_boolean_decision) built into one descriptor for the strategy. Checkpoints are
 * strategy/checkpoint/ (save.c, load.c, export.c).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernel/lifecycle.h"
#include "strata/status.h"
#include "base/base.h"
#include "data/gather.h"
#include "strategy/job.h"
#include "strategy/multi.h"

/*
 * The batch's form, before any of its values is read: one kind of inputs (rows of x; or an
 * index into the u8 images, or into x and t as whole sets of nimages rows) and at most one
 * kind of targets, labels (y) or float targets (t, tdim wide). @p targets: the step reads
 * them (the loss's kind); predict reads none, but a batch with both is refused there too.
 */
static int check_form(const struct strata_batch *b, const struct strata_model *m,
                      int targets)
{
        const struct strata_loss_ops *loss = strata__loss_of(m);
        int row = strata__float_row(m);

        if (b->images && b->x)
                return strata__fail(STRATA_EINVAL, "batch has both x and images: one kind of "
                                                   "inputs (images with index, or x)");
        if (b->images && !b->index)
                return strata__fail(STRATA_EINVAL, "batch has images without index (the rows' "
                                                   "indices into them)");
        if (!b->x && !b->images)
                return strata__fail(STRATA_EINVAL, "batch has no inputs (x, or images with "
                                                   "index)");
        if (b->index && !b->nimages)
                return strata__fail(STRATA_EINVAL, "batch has index without nimages (the rows "
                                                   "of the set it indexes)");
        if (!b->index && b->nimages)
                return strata__fail(STRATA_EINVAL, "batch has nimages %u without index",
                                    b->nimages);
        if (b->t && b->y)
                return strata__fail(STRATA_EINVAL, "batch has both labels (y) and float "
                                                   "targets (t): one kind of targets");
        if (targets && row && !b->t && m->noutputs > 1)
                return strata__fail(STRATA_EINVAL, "the model's %d outputs take a row of float "
                                    "targets (t, tdim; a label output's class index one float "
                                    "of it); the batch has %s", m->noutputs,
                                    b->y ? "labels (y)" : "none");
        if (targets && row && !b->t)
                return strata__fail(STRATA_EINVAL, "the loss (%s) takes float targets (t, "
                                                   "tdim); the batch has %s", loss->name,
                                    b->y ? "labels (y)" : "none");
        if (targets && !row && !b->y)
                return strata__fail(STRATA_EINVAL, "the loss (%s) takes labels (y); the batch "
                                                   "has %s", loss->name,
                                    b->t ? "float targets (t)" : "none");
        if (!b->t && b->tdim)
                return strata__fail(STRATA_EINVAL, "batch has tdim %d without float targets "
                                                   "(t)", b->tdim);
        if (b->x && b->xtype != STRATA_F32 && b->xtype != STRATA_F64)
                return strata__fail(STRATA_EINVAL, "inputs of type %d: STRATA_F32 or "
                                                   "STRATA_F64", (int)b->xtype);
        return STRATA_OK;
}

/* Rows [0, b->rows) of @p b index the set they index. */
static int check_index(const struct strata_batch *b)
{
        for (int i = 0; b->index && i < b->rows; i++)
                if (b->index[i] >= b->nimages)
                        return strata__fail(STRATA_EINVAL, "row %d indexes %s %u of %u (set "
                                                           "nimages to the %s)",
                                            i, b->images ? "image" : "row", b->index[i],
                                            b->nimages,
                                            b->images ? "image count" : "rows of x and t");
        return STRATA_OK;
}

/*
 * Rows [lo, hi) of @p b as a batch of their own (x, t, y and index moved to row lo), for the
 * checks of the rows this process computes.
 */
static struct strata_batch rows_of(const struct strata_batch *b, int lo, int hi)
{
        struct strata_batch v = *b;
        size_t at = (size_t)lo;

        v.rows = hi - lo;
        if (b->index) {
                v.index = b->index + at;
        } else {
                v.x = strata__values_at(b->x, b->xtype, at * (size_t)b->dim);
                v.t = b->t ? strata__values_at(b->t, b->ttype, at * (size_t)b->tdim) : NULL;
        }
        v.y = b->y ? b->y + at : NULL;
        return v;
}

/* Refusal @p rc of rows numbered from this process's first row, @p lo, saying so. */
static int from_row(int rc, int lo)
{
        char msg[512];

        snprintf(msg, sizeof(msg), "%s", strata__last_reason(rc));
        return strata__fail(rc, "%s (row numbers from row %d, this process's first)", msg, lo);
}

/* A step's batch's form and sizes, no value of it read. */
static int check_sizes(const struct strata_runtime *rt, const struct strata_batch *b,
                       int targets)
{
        if (!b)
                return strata__fail(STRATA_EINVAL, "batch pointer is NULL");
        STRATA_TRY(check_form(b, rt->cfg.model, targets));
        /* Fewer rows than devices: the devices past the rows take part with none. */
        if (b->rows < 1 || b->rows > rt->cfg.batch)
                return strata__fail(STRATA_EINVAL, "batch has %d rows; allowed 1..%d", b->rows,
                                    rt->cfg.batch);
        if (b->dim != rt->cfg.model->in_features)
                return strata__fail(STRATA_EINVAL, "batch rows are %d wide; the model takes %d",
                                    b->dim, rt->cfg.model->in_features);
        return STRATA_OK;
}

/*
 * The checks of a step's batch on this process: its form and sizes, then its rows' indices
 * and values (the loss's check), over the rows this process computes (all of them in one
 * process; a job's other rows are its other processes' to check: decision 0033).
 */
static int check_local(const struct strata_runtime *rt, const struct strata_batch *b,
                       int targets)
{
        struct strata_batch own;
        int lo, hi, rc;

        STRATA_TRY(check_sizes(rt, b, targets));
        strata__own_rows(rt, b->rows, &lo, &hi);
        own = rows_of(b, lo, hi);
        rc = check_index(&own);
        if (rc == STRATA_OK && targets)
                rc = strata__targets_check(rt->cfg.model, &own, rt->cfg.classes,
                                           strata__replica_output_widths(strata__rep(rt, 0)));
        return rc != STRATA_OK && lo > 0 ? from_row(rc, lo) : rc;
}

/*
 * This process's verdict @p rc on a step's batch @p b, agreed with the job's other processes
 * before anything of the step runs: every process refuses it, with the same status, or none
 * does (one process: @p rc). An exchange that fails (a process hung or gone) ends the job as
 * a failed step does: the runtime enters ERROR, which aborts the others through the link.
 */
static int agreed_hold(struct strata_runtime *rt, int rc, const struct strata_batch *b,
                       int *hold)
{
        int comm = rt->job->agree_batch(rt, &rc, b ? b->rows : -1, hold);

        if (comm != STRATA_OK) {
                (void)strata__sm_dispatch(&rt->sm, STRATA__EV_EXCEPTION, NULL);
                return comm;
        }
        return rc;
}

static int agreed(struct strata_runtime *rt, int rc, const struct strata_batch *b)
{
        return agreed_hold(rt, rc, b, NULL);
}

static int need_ready(const struct strata_runtime *rt)
{
        int s = strata__sm_state(&rt->sm);

        if (s != STRATA_STATE_READY)
                return strata__fail(STRATA_EBADSTATE, "runtime is %s, not READY",
                                    strata_state_name(s));
        return STRATA_OK;
}

/* A stop request ends the run here: the process's own, or as the job's processes agree. */
static int stop_due(const struct strata_runtime *rt)
{
        return rt->job->stop_due(rt);
}

static int stopped(void)
{
        return strata__fail(STRATA_ESTOPPED, "stop requested (strata_request_stop): nothing "
                                             "was run; the runtime is ready to save or tear "
                                             "down");
}

static const struct strata__span span_train = { "train_step", "step", "step", 0 };
static const struct strata__span span_eval = { "eval_step", "step", "step", 0 };
static const struct strata__span span_predict = { "predict_step", "step", "step", 0 };
static const struct strata__span span_loss = { "train_loss", "counter", "loss", 1 };
static const struct strata__span span_arena = { "arena", "counter", "high_water_bytes", 1 };

/*
 * Start of a public step: every track is at this step with nothing open; buffers that are
 * half full are written out first (a write error is reported and stops tracing, not the
 * run); the step's span opens on device 0's track (*t), which is the caller's.
 */
static uint64_t step_begin(struct strata_runtime *rt, const struct strata__span *k,
                           struct strata__track **t)
{
        for (int d = 0; d < rt->nreplicas; d++)
                strata__track_restart(strata__repv(rt, d)->track, rt->step);
        if (strata__trace_due(rt->trace) && strata__trace_flush(rt->trace) != STRATA_OK)
                strata__log(STRATA_LOG_WARNING, "strata: %s", strata_last_error());
        *t = strata__repv(rt, 0)->track;
        return strata__track_begin(*t, k, NULL);
}

/*
 * The step just taken (rt->step - 1) as its caller learns it: refused because a gradient was
 * not finite (@p grads: the devices agreed before any update, so nothing changed), or taken
 * with a loss that is not finite; STRATA_OK otherwise or with allow_nonfinite.
 */
static int nonfinite(const struct strata_runtime *rt, int grads, double loss)
{
        unsigned long long s = (unsigned long long)(rt->step - 1);

        if (rt->cfg.train.allow_nonfinite)
                return STRATA_OK;
        if (grads)
                return strata__fail(STRATA_ENONFINITE,
                                    "step %llu: a gradient is NaN or infinite (the loss is %g); "
                                    "the step was refused, parameters and optimizer state are "
                                    "unchanged (check the batch for NaN or infinite values, "
                                    "lower the learning rate or clip gradients; "
                                    "allow_nonfinite goes on)", s, loss);
        if (!isfinite(loss))
                return strata__fail(STRATA_ENONFINITE,
                                    "step %llu: the loss is %g; training diverged (lower the "
                                    "learning rate or clip gradients; allow_nonfinite goes on)",
                                    s, loss);
        return STRATA_OK;
}

/*
 * One micro-batch. With accumulate = k, the first k-1 micro-batches end after backward
 * (BACKWARD_DONE -> batch_end: gradients accumulate locally, nothing is communicated); the
 * k-th reduces the gradients and steps the optimizer, as does a micro-batch that
 * strata_end_accumulation_window() marked (an epoch's last, partial window).
 */
int strata_train_step(struct strata_runtime *rt, const struct strata_batch *b,
                      struct strata_metrics *m)
{
        STRATA_TRY(strata__check_rt(rt));
        STRATA_TRY(strata__training_only(rt, "train_step"));
        STRATA_TRY(need_ready(rt));
        STRATA_TRY(agreed(rt, check_local(rt, b, 1), b));
        return strata__api_train(rt, b, m, 0, NULL);
}

int strata__api_train(struct strata_runtime *rt, const struct strata_batch *b,
                      struct strata_metrics *m, int hold, unsigned *held)
{
        static const int events[] = { STRATA__EV_BATCH_START, STRATA__EV_TRAINING_STEP,
                                      STRATA__EV_BACKWARD, STRATA__EV_OPTIMIZER_STEP,
                                      STRATA__EV_BATCH_END };
        struct strata__step_args a = { .batch = b };
        int k = rt->cfg.train.accumulate > 1 ? rt->cfg.train.accumulate : 1, nf = 0;
        struct strata_metrics own;
        struct strata__track *t;
        uint64_t t0;

        if (rt->micro == 0 && stop_due(rt))
                return stopped(); /* at an optimizer-step boundary only */
        t0 = step_begin(rt, &span_train, &t);
        a.metrics = m ? m : &own;
        a.sync = rt->micro == k - 1 || rt->end_window;
        a.nonfinite = &nf;
        a.hold = hold;
        a.held = held;
        /* in a row, nothing read between them: training_step's action may run backward's and
         * optimizer_step's device work in its job (strategy/multi.c) */
        for (size_t i = 0; i < sizeof(events) / sizeof(events[0]); i++) {
                if (events[i] == STRATA__EV_OPTIMIZER_STEP && !a.sync)
                        continue;
                STRATA_TRY(strata__sm_dispatch(&rt->sm, events[i], &a));
        }
        strata__track_end(t, t0, (int64_t)rt->step);
        if (t && t->ev) {
                strata__track_counter(t, &span_loss, a.metrics->loss);
                strata__track_counter(t, &span_arena, (double)strata_arena_high_water(&rt->root));
        }
        rt->micro = a.sync ? 0 : rt->micro + 1;
        rt->end_window = 0;
        rt->step++;
        return nonfinite(rt, nf, hold && !nf ? 0.0 : a.metrics->loss);
}

int strata_end_accumulation_window(struct strata_runtime *rt)
{
        STRATA_TRY(strata__check_rt(rt));
        STRATA_TRY(strata__training_only(rt, "end_accumulation_window"));
        STRATA_TRY(need_ready(rt));
        rt->end_window = 1;
        return STRATA_OK;
}

int strata_set_lr(struct strata_runtime *rt, float lr)
{
        STRATA_TRY(strata__check_rt(rt));
        STRATA_TRY(need_ready(rt));
        if (!(lr > 0.0f) || !isfinite(lr))
                return strata__fail(STRATA_EINVAL, "learning rate %g must be > 0", lr);
        rt->cfg.optim.lr = lr;
        return STRATA_OK;
}

/* An evaluation event on a checked batch: refused after a stop request, one span long. */
static int evaluate(struct strata_runtime *rt, int event, const struct strata__span *span,
                    struct strata__step_args *a)
{
        struct strata__track *t;
        uint64_t t0;
        int rc;

        if (stop_due(rt))
                return stopped();
        t0 = step_begin(rt, span, &t);
        rc = strata__sm_dispatch(&rt->sm, event, a);
        strata__track_end(t, t0, (int64_t)rt->step);
        return rc;
}

int strata_eval_step(struct strata_runtime *rt, const struct strata_batch *b,
                     struct strata_metrics *m)
{
        STRATA_TRY(strata__check_rt(rt));
        STRATA_TRY(need_ready(rt));
        STRATA_TRY(agreed(rt, check_local(rt, b, 1), b));
        return evaluate(rt, STRATA__EV_VALIDATION_STEP, &span_eval,
                        &(struct strata__step_args){ .batch = b, .metrics = m });
}

/* Predict's batch, and room for its outputs in @p out's @p capacity values. */
static int check_predict(const struct strata_runtime *rt, const struct strata_batch *b,
                         const float *out, size_t capacity)
{
        size_t need;

        if (!out)
                return strata__fail(STRATA_EINVAL, "predict: out is NULL");
        STRATA_TRY(check_local(rt, b, 0));
        need = (size_t)b->rows * (size_t)rt->cfg.classes;
        if (capacity < need)
                return strata__fail(STRATA_EINVAL, "predict: out holds %zu values; the "
                                                   "batch's %d rows x %d outputs need %zu",
                                    capacity, b->rows, rt->cfg.classes, need);
        return STRATA_OK;
}

int strata_predict_step(struct strata_runtime *rt, const struct strata_batch *b, float *out,
                        size_t capacity)
{
        STRATA_TRY(strata__check_rt(rt));
        STRATA_TRY(need_ready(rt));
        STRATA_TRY(agreed(rt, check_predict(rt, b, out, capacity), b));
        return strata__api_predict(rt, b, out);
}

int strata__api_predict(struct strata_runtime *rt, const struct strata_batch *b, float *out)
{
        return evaluate(rt, STRATA__EV_PREDICT_STEP, &span_predict,
                        &(struct strata__step_args){ .batch = b, .logits = out });
}

/* ---- the parts of a step, for the calls on several models (models_api.c) ---- */

int strata__api_ready(const struct strata_runtime *rt, int train)
{
        if (train)
                STRATA_TRY(strata__training_only(rt, "models_train_step"));
        return need_ready(rt);
}

int strata__api_check(const struct strata_runtime *rt, const struct strata_batch *b,
                      int predict, const float *out, size_t capacity)
{
        return predict ? check_predict(rt, b, out, capacity) : check_local(rt, b, 1);
}

int strata__api_check_sizes(const struct strata_runtime *rt, const struct strata_batch *b)
{
        return check_sizes(rt, b, 1);
}

int strata__api_agreed(struct strata_runtime *rt, int rc, const struct strata_batch *b,
                       int *hold)
{
        return agreed_hold(rt, rc, b, hold);
}

static const struct strata__span span_input_grad = { "input_grad", "step", "step", 0 };

/* input_grad's batch (its inputs) and room for the output and input gradients. */
static int check_input_grad(const struct strata_runtime *rt, const struct strata_batch *b,
                            const float *dout, size_t dout_count, const float *dx,
                            size_t capacity)
{
        size_t outs, ins;

        if (!dout || !dx)
                return strata__fail(STRATA_EINVAL, "input_grad: dout or dx is NULL");
        STRATA_TRY(check_local(rt, b, 0));
        outs = (size_t)b->rows * (size_t)rt->cfg.classes;
        ins = (size_t)b->rows * (size_t)rt->cfg.model->in_features;
        if (dout_count < outs)
                return strata__fail(STRATA_EINVAL, "input_grad: dout holds %zu values; the "
                                                   "batch's %d rows x %d outputs need %zu",
                                    dout_count, b->rows, rt->cfg.classes, outs);
        if (capacity < ins)
                return strata__fail(STRATA_EINVAL, "input_grad: dx holds %zu values; the "
                                                   "batch's %d rows x %d inputs need %zu",
                                    capacity, b->rows, rt->cfg.model->in_features, ins);
        return strata__replica_input_grad_check(strata__rep(rt, 0));
}

int strata_input_grad(struct strata_runtime *rt, const struct strata_batch *b,
                      const float *dout, size_t dout_count, float *dx, size_t capacity)
{
        return strata__api_input_grad(rt, b, dout, dout_count, dx, capacity, 1);
}

int strata__api_input_grad(struct strata_runtime *rt, const struct strata_batch *b,
                           const float *dout, size_t dout_count, float *dx, size_t capacity,
                           int agree)
{
        struct strata__step_args a = { .batch = b, .dout = dout, .dx = dx };
        struct strata__track *t;
        uint64_t t0;
        int rc;

        STRATA_TRY(strata__check_rt(rt));
        STRATA_TRY(need_ready(rt));
        if (!(strata__caps(rt->strategy) & STRATA__CAP_MODELS) || strata__own_memory(rt->dev))
                return strata__fail(STRATA_ENOTSUP, "input_grad runs under single, ddp, spawn, "
                                                   "mpi, zero1 and zero2, in host memory "
                                                   "(decisions 0069, 0116)");
        if (rt->micro)
                return strata__fail(STRATA_EBADSTATE, "input_grad: inside an accumulation "
                                                      "window (micro-batch %d)", rt->micro);
        rc = check_input_grad(rt, b, dout, dout_count, dx, capacity);
        STRATA_TRY(agree || (b && b->index) ? agreed(rt, rc, b) : rc);
        if (stop_due(rt))
                return stopped();
        t0 = step_begin(rt, &span_input_grad, &t);
        rc = strata__multi_input_grad(rt, &a);
        strata__track_end(t, t0, (int64_t)rt->step);
        return rc;
}

/* A Strategy-level collective: every device runs it on its thread (or inline on one device). */
static int collective(struct strata_runtime *rt, const struct strata_coll *op, void *const *bufs,
                      const void *const *send)
{
        STRATA_TRY(strata__check_rt(rt));
        STRATA_TRY(need_ready(rt));
        if ((op->count && !bufs) || (op->kind == STRATA_COLL_ALL_GATHER && op->count && !send))
                return strata__fail(STRATA_EINVAL, "collective: buffer list is NULL");
        return STRATA__INHERITED(rt->strategy, ops.collective)(rt, op, bufs, send);
}

int strata_reduce(struct strata_runtime *rt, void *const *bufs, size_t count,
                  enum strata_dtype dt, enum strata_reduce_op op)
{
        struct strata_coll c = { .kind = STRATA_COLL_ALL_REDUCE, .count = count, .dtype = dt,
                                 .op = op };

        return collective(rt, &c, bufs, NULL);
}

int strata_all_gather(struct strata_runtime *rt, const void *const *send, void *const *recv,
                      size_t count, enum strata_dtype dt)
{
        struct strata_coll c = { .kind = STRATA_COLL_ALL_GATHER, .count = count, .dtype = dt };

        return collective(rt, &c, recv, send);
}

int strata_broadcast(struct strata_runtime *rt, void *const *bufs, size_t count,
                     enum strata_dtype dt, int src)
{
        struct strata_coll c = { .kind = STRATA_COLL_BROADCAST, .count = count, .dtype = dt,
                                 .root = src };

        STRATA_TRY(strata__check_rt(rt));
        if (src < 0 || src >= rt->nreplicas)
                return strata__fail(STRATA_EINVAL, "broadcast: source %d not in [0, %d)", src,
                                    rt->nreplicas);
        return collective(rt, &c, bufs, NULL);
}

int strata_barrier(struct strata_runtime *rt)
{
        struct strata_coll c = { .kind = STRATA_COLL_BARRIER };

        return collective(rt, &c, NULL, NULL);
}

int strata_reduce_boolean_decision(struct strata_runtime *rt, const int *flags, int all,
                                   int *out)
{
        int32_t v[STRATA_MAX_DEVICES];
        void *bufs[STRATA_MAX_DEVICES];

        STRATA_TRY(strata__check_rt(rt));
        if (!flags || !out)
                return strata__fail(STRATA_EINVAL, "reduce_boolean_decision: NULL argument");
        for (int d = 0; d < rt->nreplicas; d++) {
                v[d] = flags[d] != 0;
                bufs[d] = &v[d];
        }
        STRATA_TRY(strata_reduce(rt, bufs, 1, STRATA_I32, all ? STRATA_OP_MIN : STRATA_OP_MAX));
        *out = v[0] != 0;
        return STRATA_OK;
}
