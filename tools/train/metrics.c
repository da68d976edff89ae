/*
 * strata-train's metrics log (--metrics-csv, the columns of Lightning's CSVLogger): a row
 * every --log-every batches and one per epoch, through a buffer of its own. A failed write is
 * reported once; the run goes on and its exit status says so.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/timing.h"
#include "tools/train/train.h"

/* --metrics-csv: a failed write is reported once; the run goes on, the exit status says it. */
static void csv_check(struct csvlog *l, int rc)
{
        if (rc >= 0 || l->failed)
                return;
        l->failed = 1;
        fprintf(stderr, "strata-train: --metrics-csv %s: write failed: %s; metrics logging "
                        "stopped\n", l->path, strerror(errno));
}

void csv_row(struct csvlog *l, long step, int epoch, double loss, double lr, double sps,
                    double acc)
{
        if (!l->f || l->failed)
                return;
        if (acc >= 0.0)
                csv_check(l, fprintf(l->f, "%ld,%d,%.6f,%.6g,%.1f,%.4f\n", step, epoch, loss, lr,
                                     sps, acc));
        else
                csv_check(l, fprintf(l->f, "%ld,%d,%.6f,%.6g,%.1f,\n", step, epoch, loss, lr,
                                     sps));
}

void csv_flush(struct csvlog *l)
{
        if (l->f && !l->failed)
                csv_check(l, fflush(l->f) == 0 && !ferror(l->f) ? 0 : -1);
}

/* Create or (resuming) append to the log; a new file starts with the header. */
int csv_open(struct csvlog *l, const char *path, int append)
{
        struct stat st;

        l->path = path;
        l->f = fopen(path, append ? "a" : "w");
        if (!l->f)
                return bad("--metrics-csv %s: %s", path, strerror(errno));
        setvbuf(l->f, l->buf, _IOFBF, sizeof(l->buf));
        if (fstat(fileno(l->f), &st) == 0 && st.st_size == 0)
                csv_check(l, fprintf(l->f, "step,epoch,train_loss,lr,samples_per_s,test_acc\n"));
        csv_flush(l);
        if (l->failed)
                return 2;
        return 0;
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

        if (!l->f || (l->loss_sum += loss, ++l->rows_steps != r->o.log_every))
                return;
        now = strata_tool_now();
        g = (long)ep * r->steps_per_epoch + s;
        lr = strata_optim_lr(&r->cfg.optim,
                             (uint64_t)(g / r->o.accumulate > 0 ? g / r->o.accumulate : 1));
        csv_row(l, g, ep + 1, l->loss_sum / (double)l->rows_steps, lr,
                (double)(l->rows_steps * r->o.batch) / (now - l->t0), -1.0);
        csv_window(l, now);
}

/** @brief Epoch @p ep's row (@p done batches trained in @p ep_time), flushed. */
void csv_epoch(const struct run *r, int ep, long done, double ep_time)
{
        long g = (long)(ep + 1) * r->steps_per_epoch;
        double lr = strata_optim_lr(&r->cfg.optim, (uint64_t)(g / r->o.accumulate));

        csv_row(r->csv, g, ep + 1, r->train_loss, lr,
                (double)(done * r->o.batch) / ep_time, r->acc);
        csv_flush(r->csv);
}

/** @brief Close the log; 1 when any write failed. */
int csv_close(struct csvlog *l)
{
        if (l->f && fclose(l->f) != 0 && !l->failed)
                csv_check(l, -1);
        return l->failed;
}
