/*
 * strata-train's metrics log (--metrics-csv, the columns of Lightning's CSVLogger): a row
 * every --log-every batches and one per epoch, through a buffer of its own. The evaluation's
 * columns are those that fit the loss (eval.c: SET_loss and SET_acc, or SET_loss, SET_mse and
 * SET_mae), empty on step rows. A failed write is reported once; the run goes on and its exit
 * status says so.
 */
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

        if (sizeof(l->buf) - l->fill < 256)
                csv_flush(l);
        va_start(ap, fmt);
        n = vsnprintf(l->buf + l->fill, sizeof(l->buf) - l->fill, fmt, ap);
        va_end(ap);
        if (n > 0 && (size_t)n < sizeof(l->buf) - l->fill)
                l->fill += (size_t)n;
}

/** @brief One row: the evaluation's columns empty without @p ev (a step row). */
void csv_row(const struct run *r, long step, int epoch, double loss, double lr, double sps,
             const struct evaluation *ev)
{
        struct csvlog *l = r->csv;
        char cols[128];

        if (!l->on || l->failed)
                return;
        csv_put(l, "%ld,%d,%.6f,%.6g,%.1f,%s\n", step, epoch, loss, lr, sps,
                eval_row(r, ev, cols, sizeof(cols)));
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
        if (fstat(l->out.fd, &st) == 0 && st.st_size == 0)
                csv_put(l, "step,epoch,train_loss,lr,samples_per_s,%s\n",
                        eval_header(r, cols, sizeof(cols)));
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
}

/** @brief Batch @p s of epoch @p ep trained with @p loss: a row at the window's end. */
void csv_step(const struct run *r, int ep, long s, double loss)
{
        struct csvlog *l = r->csv;
        double now, lr;
        long g;

        if (!l->on || (l->loss_sum += loss, ++l->rows_steps != r->o.log_every))
                return;
        now = strata_tool_now();
        g = (long)ep * r->steps_per_epoch + s;
        lr = strata_optim_lr(&r->cfg.optim,
                             (uint64_t)(g / r->o.accumulate > 0 ? g / r->o.accumulate : 1));
        csv_row(r, g, ep + 1, l->loss_sum / (double)l->rows_steps, lr,
                (double)(l->rows_steps * r->o.batch) / (now - l->t0), NULL);
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
                (double)(done * r->o.batch) / ep_time, &r->ev);
        csv_flush(r->csv);
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
