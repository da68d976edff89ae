/*
 * strata-train's Trainer features after Lightning's (issue 58): --max-steps N and
 * --max-time S end the run early (Trainer's max_steps, max_time), --val-every-n-steps N
 * evaluates inside epochs too (val_check_interval), --early-stop P stops once the monitored
 * metric (--monitor, default the evaluation's loss) has not improved for P evaluations
 * (EarlyStopping), and --save-top-k K keeps the K best epoch checkpoints of --ckpt-dir by it
 * (ModelCheckpoint's save_top_k). A run ended early evaluates where it stands, checkpoints
 * there (with --ckpt-dir) and ends with the usual summary, exit status 0.
 */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/timing.h"
#include "tools/train/train.h"

/** @brief The Trainer options: 0, 2 after the message, -1 for another option. */
int trainer_option(int c, const char *s, struct opts *o)
{
        float f = 0.0f;

        switch (c) {
        case OPT_MAX_STEPS:
                return parse_long_option("max-steps", s, 1, 1L << 40, &o->max_steps);
        case OPT_MAX_TIME:
                if (parse_float_option("max-time", s, 0.001, 1e9, &f))
                        return 2;
                o->max_time = f;
                return 0;
        case OPT_VAL_EVERY:
                return parse_long_option("val-every-n-steps", s, 1, 1L << 40, &o->val_every);
        case OPT_EARLY_STOP:
                return parse_long_option("early-stop", s, 1, 1L << 20, &o->patience);
        case OPT_MONITOR:
                o->monitor = s;
                return 0;
        case OPT_SAVE_TOP_K:
                return parse_long_option("save-top-k", s, 1, 64, &o->top_k);
        case OPT_TENSORBOARD:
                o->tensorboard = s;
                return 0;
        }
        return trial_option(c, s, o);
}

/* The metric --monitor names: which value, and whether larger is better. */
static int monitor_kind(const struct run *r, int *larger)
{
        static const char *const ends[] = { "loss", "acc", "mse", "mae" };
        const char *m = r->o.monitor, *us = m ? strrchr(m, '_') : NULL;
        size_t set = strlen(r->set);

        *larger = 0;
        if (!m)
                return 0; /* the evaluation's loss */
        if (!strcmp(m, "train_loss"))
                return 4;
        for (int k = 0; us && k < 4; k++)
                if (!strcmp(us + 1, ends[k]) && (size_t)(us - m) == set &&
                    !strncmp(m, r->set, set)) {
                        *larger = k == 1;
                        return k;
                }
        return -1;
}

/* The monitored value after an evaluation (NaN: not known). */
static double monitored(const struct run *r)
{
        int larger;

        switch (monitor_kind(r, &larger)) {
        case 0: return r->ev.loss;
        case 1: return r->ev.acc;
        case 2: return r->ev.mse;
        case 3: return r->ev.mae;
        default: return r->train_loss;
        }
}

/**
 * @brief Before training, once the evaluation set is known: --monitor names one of this run's
 *        metrics (train_loss, or SET_loss, SET_acc, SET_mse, SET_mae of the evaluation set
 *        SET, the ones its loss has), --save-top-k has a --ckpt-dir. 0, or 2 after the message.
 */
int trainer_check(const struct run *r)
{
        int larger, k = monitor_kind(r, &larger), regression = float_row(r);

        if (k < 0 || (k == 1 && regression) || ((k == 2 || k == 3) && !regression))
                return bad("--monitor: '%s' is not a metric of this run (train_loss, %s_loss, "
                           "%s)", r->o.monitor, r->set,
                           regression ? "SET_mse or SET_mae" : "SET_acc");
        if (r->o.monitor && !r->o.patience && !r->o.top_k && !r->plateau_on)
                return bad("--monitor names what --early-stop, --save-top-k and --lr-schedule "
                           "plateau watch: give one");
        if (r->o.top_k && !r->o.ckpt_dir)
                return bad("--save-top-k keeps the best checkpoints of --ckpt-dir: give "
                           "--ckpt-dir");
        return 0;
}

/** @brief --max-steps: the run's optimizer steps @p steps have reached it. */
int trainer_steps_done(const struct opts *o, long steps)
{
        return o->max_steps && steps >= o->max_steps;
}

/**
 * @brief --max-time: the run has trained that long. The job's processes agree through the stop
 *        the library coordinates (stop_for_limit()), so this only asks for it.
 */
void trainer_watch_time(const struct run *r)
{
        if (r->o.max_time > 0.0 && !stop_requested() &&
            strata_tool_now() - r->t_start >= r->o.max_time)
                stop_for_limit();
}

/**
 * @brief --val-every-n-steps: inside an epoch, after batch @p s (from 1), an evaluation and its
 *        line (an epoch's end has its own). 0, or the library's status.
 */
int trainer_mid_eval(struct run *r, int ep, long s)
{
        struct evaluation ev;
        char buf[512];
        int rc;

        if (!r->o.val_every || s % r->o.val_every || s == r->steps_per_epoch)
                return 0;
        if ((rc = eval_pass(r, &ev)))
                return rc;
        tb_eval(r, &ev, (long)ep * r->steps_per_epoch + s);
        if (r->tty)
                printf("\r\033[K");
        if (r->o.json)
                printf("{\"eval\":true,\"epoch\":%d,\"step\":%ld,%s}\n", ep + 1,
                       (long)ep * r->steps_per_epoch + s, eval_fields(r, &ev, 1, buf,
                                                                      sizeof(buf)));
        else if (!r->o.quiet)
                printf("  epoch %d, batch %ld: %s\n", ep + 1, s, eval_fields(r, &ev, 0, buf,
                                                                            sizeof(buf)));
        return 0;
}

/** @brief Whether a larger value of the monitored metric is better (an accuracy). */
int trainer_larger(const struct run *r)
{
        int larger;

        return monitor_kind(r, &larger) >= 0 && larger;
}

/*
 * The monitored value, the same in every process: the largest any device of the job holds
 * (they hold the same value, the evaluation being the job's; this makes it so by
 * construction, so every process's plateau decides alike).
 */
static int agreed_monitor(struct run *r, double *v)
{
        static double vals[STRATA_MAX_DEVICES];
        void *bufs[STRATA_MAX_DEVICES];

        for (int d = 0; d < STRATA_MAX_DEVICES; d++) {
                vals[d] = monitored(r);
                bufs[d] = &vals[d];
        }
        if (strata_reduce(r->rt, bufs, 1, STRATA_F64, STRATA_OP_MAX))
                return 1;
        *v = vals[0];
        return 0;
}

/**
 * @brief --lr-schedule plateau: after epoch @p ep's evaluation, ReduceLROnPlateau stepped on
 *        the monitored metric and its rate applied to the next steps (said on stderr when it
 *        drops; the lines and logs show it from the next epoch, the one that uses it). 0, or
 *        1 with the library's message.
 */
int trainer_plateau(struct run *r, int ep)
{
        double was = r->plateau.lr, v;
        float lr;

        if (!r->plateau_on)
                return 0;
        if (agreed_monitor(r, &v) || strata_plateau_step(&r->plateau, v, &lr) ||
            strata_set_lr(r->rt, lr))
                return 1;
        if (r->plateau.lr < was && strata_is_global_zero(r->rt) && !r->o.quiet)
                fprintf(stderr, "%sstrata-train: after epoch %d: %s has not improved for %d "
                                "evaluation%s: learning rate %g -> %g from epoch %d\n",
                        r->tty ? "\n" : "", ep + 1,
                        r->o.monitor ? r->o.monitor : "the evaluation loss",
                        r->plateau.patience + 1, r->plateau.patience ? "s" : "", was, (double)lr,
                        ep + 2);
        return 0;
}

/**
 * @brief After ckpt_start(): with --lr-schedule plateau, the checkpoint's plateau state (r->at)
 *        taken and its rate applied. 0, or 2 after the message and the teardown.
 */
int trainer_resume(struct run *r)
{
        if (!r->plateau_on || !(r->at.plateau_lr > 0.0f))
                return 0;
        r->plateau.lr = (double)r->at.plateau_lr;
        r->plateau.bad = (int)r->at.plateau_bad;
        r->plateau.best = r->at.plateau_best;
        r->cfg.optim.lr = r->at.plateau_lr;
        if (strata_set_lr(r->rt, r->at.plateau_lr)) {
                bad("--resume: %s", strata_last_error());
                strata_teardown(r->rt);
                return 2;
        }
        return 0;
}

/**
 * @brief --early-stop: after epoch @p ep's evaluation, whether the monitored metric has not
 *        improved for --early-stop evaluations (said on stderr then). The same in every
 *        process: the evaluation is the job's.
 */
int trainer_early_stop(struct run *r, int ep)
{
        int larger;
        double v = monitored(r);

        if (!r->o.patience)
                return 0;
        monitor_kind(r, &larger);
        if (isfinite(v) && (r->best.epoch == 0 || (larger ? v > r->best.value
                                                         : v < r->best.value))) {
                r->best.value = v;
                r->best.epoch = ep + 1;
                return 0;
        }
        if (ep + 1 - r->best.epoch < r->o.patience)
                return 0;
        if (strata_is_global_zero(r->rt))
                fprintf(stderr, "strata-train: early stop after epoch %d: %s has not improved "
                                "for %ld epoch%s (best %g, epoch %d)\n", ep + 1,
                        r->o.monitor ? r->o.monitor : "the evaluation loss", r->o.patience,
                        r->o.patience == 1 ? "" : "s", r->best.value, r->best.epoch);
        return 1;
}

/* DIR/topk's lines into @p vals and @p names (at most 64), other than @p skip's; how many. */
static int top_k_read(const char *path, const char *skip, double *vals, char (*names)[64])
{
        static char buf[64 * 96 + 1];
        ssize_t got = 0, k;
        int n = 0, fd = open(path, O_RDONLY | O_CLOEXEC);
        char *line, *save = NULL;

        if (fd < 0)
                return 0;
        while ((k = read(fd, buf + got, sizeof(buf) - 1 - (size_t)got)) > 0)
                got += k;
        close(fd);
        buf[got] = '\0';
        for (line = strtok_r(buf, "\n", &save); line && n < 64; line = strtok_r(NULL, "\n", &save))
                if (sscanf(line, "%lf %63s", &vals[n], names[n]) == 2 && strcmp(names[n], skip))
                        n++;
        return n;
}

/**
 * @brief --save-top-k: the monitored value of the epoch checkpoint just saved as DIR/@p name,
 *        kept in DIR/topk (one "value name" line each, best first, at most K) across runs; a
 *        checkpoint that falls out of the K best is removed, unless it is the one just saved
 *        (latest names it). No stdio: nothing allocates during training. 0, or 1 when DIR/topk
 *        could not be written.
 */
int trainer_top_k(const struct run *r, const char *name)
{
        static char names[65][64], out[65 * 96];
        double vals[65], v = monitored(r);
        char path[PATH_BUF], tmp[PATH_BUF + 8], swap[64];
        int n, larger, fd;
        size_t at = 0;

        if (!r->o.top_k || !strata_is_global_zero(r->rt))
                return 0;
        monitor_kind(r, &larger);
        snprintf(path, sizeof(path), "%s/topk", r->o.ckpt_dir);
        n = top_k_read(path, name, vals, names);
        vals[n] = isfinite(v) ? v : larger ? -INFINITY : INFINITY;
        snprintf(names[n++], sizeof(names[0]), "%s", name);
        for (int i = 1; i < n; i++) /* best first: insertion sort, the new one after equals */
                for (int j = i; j > 0 && (larger ? vals[j] > vals[j - 1]
                                                 : vals[j] < vals[j - 1]); j--) {
                        v = vals[j];
                        vals[j] = vals[j - 1];
                        vals[j - 1] = v;
                        memcpy(swap, names[j], sizeof(swap));
                        memcpy(names[j], names[j - 1], sizeof(swap));
                        memcpy(names[j - 1], swap, sizeof(swap));
                }
        for (int i = 0; i < n; i++) {
                if (i < (int)r->o.top_k) {
                        at += (size_t)snprintf(out + at, sizeof(out) - at, "%.17g %s\n", vals[i],
                                               names[i]);
                } else if (strcmp(names[i], name)) { /* out of the best: gone */
                        snprintf(tmp, sizeof(tmp), "%s/%s", r->o.ckpt_dir, names[i]);
                        unlink(tmp);
                }
        }
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
                return 1;
        if (write(fd, out, at) != (ssize_t)at || close(fd) != 0)
                return 1;
        return rename(tmp, path) != 0;
}
