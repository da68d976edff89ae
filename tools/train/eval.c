/*
 * strata-train's evaluation: one pass over the evaluation set in order, and the figures that
 * fit the loss. Every loss reports itself on the evaluation rows (the validation loss); ce adds
 * the argmax accuracy; bce the accuracy of its probabilities at 0.5 (sigmoid(z) >= 0.5 exactly
 * when z >= 0, against target >= 0.5, over every output), from the outputs strata_predict_step()
 * gives, since the library's MSE and MAE are of the raw logits; mse, l1 and huber the MSE and
 * MAE of the outputs. The set is named for what it is: "test" (a test split or --test-data),
 * "val" (--val-fraction; beside a test set, sets.c) or "train_eval" (the training samples).
 * BCE's targets are checked to be probabilities where the data is loaded (data.c, h5data.c).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tools/train/train.h"

/* A value no computation writes (a NaN with this payload): marks outputs not of this process. */
#define UNWRITTEN 0x7fa5a5a5u

/* A number for JSON: non-finite values are null (JSON has no NaN or Infinity). */
const char *json_num(double v, const char *fmt, char *buf)
{
        if (!isfinite(v))
                return "null";
        snprintf(buf, 32, fmt, v);
        return buf;
}

/* A number for a text line: as JSON's, but a non-finite value is nan, inf or -inf (what
 * --allow-nonfinite runs show), not JSON's null. */
static const char *field_num(int json, double v, const char *fmt, char *buf)
{
        if (json || isfinite(v))
                return json_num(v, fmt, buf);
        return isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
}

/** @brief A number for a text line (nan, inf, -inf when not finite). */
const char *text_num(double v, const char *fmt, char *buf)
{
        return field_num(0, v, fmt, buf);
}

/** @brief The loss is BCE: its metric is computed here from the outputs. */
int eval_fits_bce(const struct run *r)
{
        /* a line whose targets row is not its outputs' values (a class index) has none */
        return r->o.loss == &strata_bce_with_logits &&
               !(r->layered && r->model.noutputs > 1 && r->tvals != r->widths[r->nw - 1]);
}

/**
 * @brief --loss bce: every target a probability, in [0, 1]; the first that is not is named
 *        with @p what (the file and dataset), its sample and its place in the sample. 0, or 2.
 */
int bce_targets(const struct run *r, const void *t, enum strata_dtype type, uint32_t n,
                int width, const char *what)
{
        size_t count = (size_t)n * width;

        if (!eval_fits_bce(r))
                return 0;
        for (size_t i = 0; i < count; i++) {
                double v = type == STRATA_F64 ? ((const double *)t)[i] : ((const float *)t)[i];

                if (v >= 0.0 && v <= 1.0)
                        continue;
                return bad("%s: sample %zu holds %g (value %zu of the sample): --loss bce takes "
                           "targets in [0, 1] (probabilities)", what, i / (size_t)width, v,
                           i % (size_t)width);
        }
        return 0;
}

/**
 * @brief Whether the model takes a row of float targets: a float-target loss, or a line of
 *        several outputs (a label output's class index one value of the row).
 */
int float_row(const struct run *r)
{
        const struct strata_model *m = &r->model;
        const struct strata_loss_ops *loss = r->o.loss;

        if (r->layered && m->noutputs > 1)
                return 1;
        if (r->layered && m->noutputs == 1 && m->outputs[0].loss)
                loss = m->outputs[0].loss;
        return loss && loss->float_targets;
}

/**
 * @brief A line of several outputs: each label output's value of every sample of @p t (@p n
 *        rows of r->tvals) a class index, an integer in [0, its width); the first that is not
 *        named with @p what, its sample and its place in the sample. 0, or 2.
 */
int label_targets(const struct run *r, const void *t, enum strata_dtype type, uint32_t n,
                  const char *what)
{
        if (!r->layered || r->model.noutputs < 2)
                return 0;
        for (int k = 0; k < r->model.noutputs; k++) {
                for (size_t i = 0; r->out_label[k] && i < n; i++) {
                        size_t at = i * (size_t)r->tvals + (size_t)r->out_col[k];
                        double v = type == STRATA_F64 ? ((const double *)t)[at]
                                                      : ((const float *)t)[at];

                        if (v >= 0.0 && v < r->out_w[k] && v == floor(v))
                                continue;
                        return bad("%s: sample %zu holds %g (value %d of the sample): output "
                                   "%d (cross-entropy) takes a class index, an integer in "
                                   "[0, %d)", what, i, v, r->out_col[k], k, r->out_w[k]);
                }
        }
        return 0;
}

/*
 * mse, l1, huber: MSE and MAE of the outputs (the library's), where some output takes float
 * targets: a line whose outputs all take class indices (cross-entropy) has float target rows
 * but no float output, so its figures are the accuracy's.
 */
static int regression(const struct run *r)
{
        int labels = 0;

        if (!r->train.t || eval_fits_bce(r))
                return 0;
        if (!r->layered || r->model.noutputs < 2)
                return 1;
        for (int k = 0; k < r->model.noutputs; k++)
                labels += r->out_label[k] != 0;
        return labels < r->model.noutputs;
}

/** @brief bce: one batch of outputs in the tool's arena (data_map() counted it). 0, or 2. */
int eval_outputs(struct run *r)
{
        void *p;

        if (!eval_fits_bce(r))
                return 0;
        if (strata_arena_alloc(&r->data, sizeof(float) * (size_t)r->o.batch * r->train.tdim, 0,
                               &p))
                return bad("%s", strata_last_error());
        r->outs = p;
        return 0;
}

/* Target value j of the batch's row i (arrays: the row is b->index[i] of the set). */
static double target(const struct strata_batch *b, int i, int j)
{
        size_t at = (size_t)b->index[i] * b->tdim + j;

        return b->ttype == STRATA_F64 ? ((const double *)b->t)[at] : ((const float *)b->t)[at];
}

/*
 * bce: the outputs of the batch's rows that this process computed (under several processes
 * each writes its own rows; the others keep UNWRITTEN) agreeing with their targets at 0.5.
 */
static int bce_agree(struct run *r, const struct strata_batch *b, double *agree)
{
        const uint32_t mark = UNWRITTEN;
        size_t n = (size_t)b->rows * b->tdim;

        for (size_t i = 0; i < n; i++)
                memcpy(&r->outs[i], &mark, sizeof(mark));
        if (strata_predict_step(r->rt, b, r->outs, (size_t)r->o.batch * r->train.tdim))
                return 1;
        for (int i = 0; i < b->rows; i++) {
                const float *o = r->outs + (size_t)i * b->tdim;

                if (!memcmp(o, &mark, sizeof(mark)))
                        continue;
                for (int j = 0; j < b->tdim; j++)
                        *agree += (o[j] >= 0.0f) == (target(b, i, j) >= 0.5);
        }
        return 0;
}

/** @brief Output @p k of a line of several outputs takes a class index (cross-entropy). */
int out_labelled(const struct run *r, int k)
{
        return r->layered && r->model.noutputs > 1 && k < r->model.noutputs && r->out_label[k];
}

/* The sum of every process's @p v (each process's device 0 holds it, the others 0). */
static int job_sum(struct strata_runtime *rt, double *v)
{
        double all[STRATA_MAX_DEVICES] = { 0 };
        void *bufs[STRATA_MAX_DEVICES];

        all[0] = *v;
        for (int d = 0; d < STRATA_MAX_DEVICES; d++)
                bufs[d] = &all[d];
        if (strata_reduce(rt, bufs, 1, STRATA_F64, STRATA_OP_SUM))
                return 1;
        *v = all[0];
        return 0;
}

/**
 * @brief The evaluation set in order into @p ev: the loss, and the metric that fits it.
 *        0, or the failed call's status (its message in strata_last_error()).
 */
int eval_pass(struct run *r, struct evaluation *ev)
{
        struct strata_batch b;
        struct strata_metrics m;
        double loss = 0.0, se = 0.0, ae = 0.0, agree = 0.0, rows = 0.0;
        double own[STRATA_MAX_OUTPUTS] = { 0.0 };
        long correct = 0, right[STRATA_MAX_OUTPUTS] = { 0 };
        int val = r->val.n && !r->testing, rc;
        struct strata_loader *ld = val ? &r->vloader : &r->tloader;
        uint32_t n = val ? r->val.n : r->test.n;
        long left = ((long)n + r->o.batch - 1) / r->o.batch;

        if (!r->testing) /* --limit-val-batches: the test set is evaluated whole */
                left = trial_val_batches(r, left);
        strata_loader_reset(ld, val ? r->val_idx : r->test_idx, n);
        while (left-- > 0 && strata_loader_next_indexed(ld, &b) > 0) {
                if ((rc = strata_eval_step(r->rt, &b, &m)) ||
                    (eval_fits_bce(r) && (rc = bce_agree(r, &b, &agree))))
                        return rc ? rc : 1;
                correct += m.correct;
                rows += m.rows;
                loss += m.loss * m.rows;
                se += m.mse * m.rows;
                ae += m.mae * m.rows;
                for (int k = 0; k < m.noutputs; k++) {
                        own[k] += m.losses[k] * m.rows;
                        right[k] += m.corrects[k];
                }
        }
        if (eval_fits_bce(r) && (rc = job_sum(r->rt, &agree)))
                return rc;
        *ev = (struct evaluation){ .loss = loss / rows, .acc = NAN, .mse = NAN, .mae = NAN,
                                   .rows = rows };
        for (int k = 0; k < STRATA_MAX_OUTPUTS; k++) {
                ev->losses[k] = own[k] / rows;
                ev->accs[k] = out_labelled(r, k) ? (double)right[k] / rows : NAN;
                ev->rights[k] = out_labelled(r, k) ? right[k] : -1;
        }
        if (regression(r)) {
                ev->mse = se / rows;
                ev->mae = ae / rows;
        } else {
                ev->acc = eval_fits_bce(r) ? agree / (rows * r->train.tdim) : correct / rows;
        }
        return 0;
}

/**
 * @brief A model of several outputs: each one's loss @p v as a field after the others, JSON
 *        (",\"val_losses\":[0.1,0.2]") or text ("  val_losses 0.1000,0.2000"), @p set naming
 *        whose; "" for a model of fewer than two outputs (its output is what it was).
 */
const char *losses_field(const struct run *r, const char *set, const double *v, int json,
                         char *buf, size_t n)
{
        int nout = r->cfg.model ? r->cfg.model->noutputs : 0;
        size_t at;
        char num[32];

        buf[0] = '\0';
        if (nout < 2)
                return buf;
        at = (size_t)snprintf(buf, n, json ? ",\"%s_losses\":[" : "  %s_losses ", set);
        for (int k = 0; k < nout && at < n; k++)
                at += (size_t)snprintf(buf + at, n - at, "%s%s", k ? "," : "",
                                       json ? json_num(v[k], "%.17g", num)
                                            : field_num(0, v[k], "%.4f", num));
        if (json && at < n)
                snprintf(buf + at, n - at, "]");
        return buf;
}

/*
 * A line of several outputs with a cross-entropy one: each output's accuracy as a field, JSON
 * (",\"val_accs\":[null,0.9]") or text ("  val_accs -,0.9000"), a float output's none; "".
 */
static const char *accs_field(const struct run *r, const char *set, const double *v, int json,
                              char *buf, size_t n)
{
        int nout = r->layered ? r->model.noutputs : 0, any = 0;
        size_t at;
        char num[32];

        buf[0] = '\0';
        for (int k = 0; k < nout; k++)
                any |= out_labelled(r, k);
        if (!any)
                return buf;
        at = (size_t)snprintf(buf, n, json ? ",\"%s_accs\":[" : "  %s_accs ", set);
        for (int k = 0; k < nout && at < n; k++)
                at += (size_t)snprintf(buf + at, n - at, "%s%s", k ? "," : "",
                                       json ? json_num(v[k], "%.17g", num)
                                       : out_labelled(r, k) && isfinite(v[k])
                                               ? json_num(v[k], "%.4f", num) : "-");
        if (json && at < n)
                snprintf(buf + at, n - at, "]");
        return buf;
}

/**
 * @brief The progress bar's short form of a model of several outputs: each one's mean loss so
 *        far, @p sums over @p n batches, as " (0.1234,0.5678)"; "" for fewer than two outputs.
 */
const char *losses_short(const struct run *r, const double *sums, double n, char *buf,
                         size_t size)
{
        int nout = r->cfg.model ? r->cfg.model->noutputs : 0;
        size_t at;

        buf[0] = '\0';
        if (nout < 2 || size < 4)
                return buf;
        at = (size_t)snprintf(buf, size, " (");
        for (int k = 0; k < nout && at < size; k++)
                at += (size_t)snprintf(buf + at, size - at, "%s%.4f", k ? "," : "", sums[k] / n);
        if (at < size)
                snprintf(buf + at, size - at, ")");
        return buf;
}

/**
 * @brief The figures of @p ev as text ("val_loss 0.1  val_acc 0.9") or JSON fields; a model
 *        of several outputs adds each one's loss (losses_field()).
 */
const char *eval_fields(const struct run *r, const struct evaluation *ev, int json, char *buf,
                        size_t n)
{
        const char *s = r->set, *f = json ? "\"%s_%s\":%s" : "%s_%s %s";
        const char *sep = json ? "," : "  ";
        char v[3][32], a[3][96], own[320], accs[320];

        snprintf(a[0], sizeof(a[0]), f, s, "loss", field_num(json, ev->loss, "%.6g", v[0]));
        if (regression(r)) {
                snprintf(a[1], sizeof(a[1]), f, s, "mse", field_num(json, ev->mse, "%.6g", v[1]));
                snprintf(a[2], sizeof(a[2]), f, s, "mae", field_num(json, ev->mae, "%.6g", v[2]));
                snprintf(buf, n, "%s%s%s%s%s%s%s", a[0], sep, a[1], sep, a[2],
                         losses_field(r, s, ev->losses, json, own, sizeof(own)),
                         accs_field(r, s, ev->accs, json, accs, sizeof(accs)));
        } else {
                snprintf(a[1], sizeof(a[1]), f, s, "acc", field_num(json, ev->acc, "%.4f", v[1]));
                snprintf(buf, n, "%s%s%s%s%s", a[0], sep, a[1],
                         losses_field(r, s, ev->losses, json, own, sizeof(own)),
                         accs_field(r, s, ev->accs, json, accs, sizeof(accs)));
        }
        return buf;
}

/** @brief The metrics CSV's evaluation columns ("val_loss,val_acc"). */
const char *eval_header(const struct run *r, char *buf, size_t n)
{
        if (regression(r))
                snprintf(buf, n, "%s_loss,%s_mse,%s_mae", r->set, r->set, r->set);
        else
                snprintf(buf, n, "%s_loss,%s_acc", r->set, r->set);
        return buf;
}

/* A CSV value: empty when unknown. */
static const char *csv_num(double v, const char *fmt, char *buf)
{
        const char *s = json_num(v, fmt, buf);

        return strcmp(s, "null") ? s : "";
}

/** @brief The evaluation columns of a metrics row: empty ones for a step row (@p ev NULL). */
const char *eval_row(const struct run *r, const struct evaluation *ev, char *buf, size_t n)
{
        char v[3][32];

        if (!ev)
                snprintf(buf, n, regression(r) ? ",," : ",");
        else if (regression(r))
                snprintf(buf, n, "%s,%s,%s", csv_num(ev->loss, "%.6f", v[0]),
                         csv_num(ev->mse, "%.6f", v[1]), csv_num(ev->mae, "%.6f", v[2]));
        else
                snprintf(buf, n, "%s,%s", csv_num(ev->loss, "%.6f", v[0]),
                         csv_num(ev->acc, "%.4f", v[1]));
        return buf;
}
