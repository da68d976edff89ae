/*
 * strata-train's metrics log (--metrics-csv, the columns of Lightning's CSVLogger): a row
 * every --log-every batches and one per epoch, through a buffer of its own. The evaluation's
 * columns are those that fit the loss (eval.c: SET_loss and SET_acc, or SET_loss, SET_mse and
 * SET_mae), empty on step rows; a model of several outputs adds each output's training loss
 * (train_loss_0, train_loss_1, ...), then its evaluation loss (SET_loss_0, ...), then each
 * cross-entropy output's evaluation accuracy (SET_acc_K, K its output: none for a float
 * output), those empty on step rows. A failed write is reported once; the run goes on and its exit
 * status says so.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/timing.h"
#include "tools/train/train.h"

/* --metrics-csv: a failed write is reported once; the run goes on, the exit status says it. */
static void csv_check(struct csvlog *l, int rc)
{
        if (rc == STRATA_OK || l->failed)
                return;
        l->failed = 1;
        fprintf(stderr, "strata-train: --metrics-csv %s: write failed (%s); metrics logging "
                        "stopped\n", l->path, strata_last_error());
}

void csv_flush(struct csvlog *l)
{
        if (l->on && !l->failed && l->fill)
                csv_check(l, strata__out_write(&l->out, l->buf, l->fill));
        l->fill = 0;
}

/* One row into the buffer, which is written first when the row might not fit. */
__attribute__((format(printf, 2, 3))) static void csv_put(struct csvlog *l, const char *fmt,
                                                          ...)
{
        va_list ap;
        int n;

        if (sizeof(l->buf) - l->fill < 2048) /* a row's most: several outputs' columns */
                csv_flush(l);
        va_start(ap, fmt);
        n = vsnprintf(l->buf + l->fill, sizeof(l->buf) - l->fill, fmt, ap);
        va_end(ap);
        if (n > 0 && (size_t)n < sizeof(l->buf) - l->fill)
                l->fill += (size_t)n;
}

/* Outputs of the model with a column each (several outputs), else 0. */
static int csv_outputs(const struct run *r)
{
        int n = r->cfg.model ? r->cfg.model->noutputs : 0;

        return n > 1 ? n : 0;
}

/*
 * Several outputs: each one's training loss @p own (a step row's window mean, an epoch row's
 * epoch mean), then on an epoch row its evaluation loss (@p ev; a step row leaves them empty),
 * then each cross-entropy output's evaluation accuracy (empty the same).
 */
static const char *own_cols(const struct run *r, const double *own, const struct evaluation *ev,
                            char *buf, size_t n)
{
        size_t at = 0;
        char num[32];

        buf[0] = '\0';
        for (int k = 0; k < csv_outputs(r) && at < n; k++)
                at += (size_t)snprintf(buf + at, n - at, ",%s",
                                       isfinite(own[k]) ? json_num(own[k], "%.6f", num) : "");
        for (int k = 0; k < csv_outputs(r) && at < n; k++)
                at += (size_t)snprintf(buf + at, n - at, ",%s",
                                       !ev || !isfinite(ev->losses[k]) ? ""
                                       : json_num(ev->losses[k], "%.6f", num));
        for (int k = 0; k < csv_outputs(r) && at < n; k++)
                if (out_labelled(r, k))
                        at += (size_t)snprintf(buf + at, n - at, ",%s",
                                               !ev || !isfinite(ev->accs[k]) ? ""
                                               : json_num(ev->accs[k], "%.4f", num));
        return buf;
}

/** @brief An evaluation's loss and metrics for TensorBoard, by their names, at @p step. */
void tb_eval(const struct run *r, const struct evaluation *ev, long step)
{
        char tag[64];

        if (!tb_on())
                return;
        snprintf(tag, sizeof(tag), "%s_loss", r->set);
        tb_scalar(tag, ev->loss, step);
        snprintf(tag, sizeof(tag), "%s_acc", r->set);
        tb_scalar(tag, ev->acc, step);
        snprintf(tag, sizeof(tag), "%s_mse", r->set);
        tb_scalar(tag, ev->mse, step);
        snprintf(tag, sizeof(tag), "%s_mae", r->set);
        tb_scalar(tag, ev->mae, step);
}

/*
 * The row's scalars for TensorBoard too: a step row's train_loss_step; an epoch row's
 * train_loss_epoch, the learning rate, and the evaluation's.
 */
static void tb_row(const struct run *r, long step, double loss, double lr,
                   const struct evaluation *ev)
{
        if (!tb_on())
                return;
        tb_scalar(ev ? "train_loss_epoch" : "train_loss_step", loss, step);
        if (!ev)
                return;
        tb_scalar("lr", lr, step);
        tb_eval(r, ev, step);
}

/**
 * @brief One row: the evaluation's columns empty without @p ev (a step row); a model of
 *        several outputs adds each one's training loss @p own and evaluation loss.
 */
void csv_row(const struct run *r, long step, int epoch, double loss, double lr, double sps,
             const struct evaluation *ev, const double *own)
{
        struct csvlog *l = r->csv;
        char cols[128], per[40 * 3 * STRATA_MAX_OUTPUTS + 1];

        tb_row(r, step, loss, lr, ev);
        if (!l->on || l->failed)
                return;
        csv_put(l, "%ld,%d,%.6f,%.6g,%.1f,%s%s\n", step, epoch, loss, lr, sps,
                eval_row(r, ev, cols, sizeof(cols)), own_cols(r, own, ev, per, sizeof(per)));
}

/*
 * Create or (resuming) append to the log through the safe output: a new log (or one replacing
 * a file) appears at its path, header written, at once and then grows in place.
 */
int csv_open(const struct run *r, const char *path, int append)
{
        struct csvlog *l = r->csv;
        struct stat st;
        char cols[96];

        l->path = path;
        l->out = (struct strata__out){ .fd = -1, .path = l->opath, .tmp = l->otmp,
                                       .what = "--metrics-csv" };
        if ((append ? strata__out_append(&l->out, path) : strata__out_open(&l->out, path)) != 0)
                return bad("%s", strata_last_error());
        l->on = 1;
        if (fstat(l->out.fd, &st) == 0 && st.st_size == 0) {
                csv_put(l, "step,epoch,train_loss,lr,samples_per_s,%s",
                        eval_header(r, cols, sizeof(cols)));
                for (int k = 0; k < csv_outputs(r); k++) /* several outputs: each one's */
                        csv_put(l, ",train_loss_%d", k);
                for (int k = 0; k < csv_outputs(r); k++)
                        csv_put(l, ",%s_loss_%d", r->set, k);
                for (int k = 0; k < csv_outputs(r); k++)
                        if (out_labelled(r, k))
                                csv_put(l, ",%s_acc_%d", r->set, k);
                csv_put(l, "\n");
        }
        csv_flush(l);
        if (!l->failed)
                csv_check(l, strata__out_publish(&l->out));
        return l->failed ? 2 : 0;
}

/** @brief A new logging window from @p t0 (each epoch starts one). */
void csv_window(struct csvlog *l, double t0)
{
        l->t0 = t0;
        l->rows_steps = 0;
        l->loss_sum = 0.0;
        memset(l->loss_sums, 0, sizeof(l->loss_sums));
}

/** @brief Batch @p s of epoch @p ep trained with metrics @p m: a row at the window's end. */
void csv_step(const struct run *r, int ep, long s, const struct strata_metrics *m)
{
        struct csvlog *l = r->csv;
        double now, lr, own[STRATA_MAX_OUTPUTS];
        long g;

        if (!l->on && !tb_on())
                return;
        l->loss_sum += m->loss;
        for (int k = 0; k < m->noutputs; k++)
                l->loss_sums[k] += m->losses[k];
        if (++l->rows_steps != r->o.log_every)
                return;
        for (int k = 0; k < STRATA_MAX_OUTPUTS; k++)
                own[k] = l->loss_sums[k] / (double)l->rows_steps;
        now = strata_tool_now();
        g = (long)ep * r->steps_per_epoch + s;
        lr = strata_optim_lr(&r->cfg.optim,
                             (uint64_t)(g / r->o.accumulate > 0 ? g / r->o.accumulate : 1));
        csv_row(r, g, ep + 1, l->loss_sum / (double)l->rows_steps, lr,
                (double)(l->rows_steps * r->o.batch) / (now - l->t0), NULL, own);
        csv_window(l, now);
}

/** @brief The learning rate at the end of epoch @p ep (from 0). */
double epoch_lr(const struct run *r, int ep)
{
        long g = (long)(ep + 1) * r->steps_per_epoch;

        return strata_optim_lr(&r->cfg.optim, (uint64_t)(g / r->o.accumulate));
}

/** @brief Epoch @p ep's row (@p done batches trained in @p ep_time), flushed. */
void csv_epoch(const struct run *r, int ep, long done, double ep_time)
{
        csv_row(r, (long)(ep + 1) * r->steps_per_epoch, ep + 1, r->train_loss, epoch_lr(r, ep),
                (double)(done * r->o.batch) / ep_time, &r->ev, r->train_losses);
        csv_flush(r->csv);
        tb_flush();
}

/** @brief Close the log (its rows made durable); 1 when any write failed. */
int csv_close(struct csvlog *l)
{
        csv_flush(l);
        if (l->on && !l->failed)
                csv_check(l, strata__out_commit(&l->out));
        else if (l->on)
                strata__out_abort(&l->out);
        l->on = 0;
        return l->failed;
}
