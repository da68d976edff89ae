/*
 * strata-train's quick trials, after Lightning's Trainer: --fast-dev-run [N] trains and
 * evaluates N batches (default 1) in one epoch and writes no file (checkpoints, metrics,
 * TensorBoard, exports, trace: none, and it says so); --limit-train-batches and
 * --limit-val-batches take a count (an integer: that many batches, at most the epoch's) or a
 * fraction (a number with a point: that share of the batches, rounded down, as Lightning's
 * int(batches * fraction)); --limit-val-batches 0 skips the evaluations.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tools/train/train.h"

/* A count ("10") or a fraction ("0.25", "1.0"): the limit, as count or -fraction. */
static int parse_limit(const char *name, const char *s, long lo, double *out)
{
        float f;
        long n;

        if (strpbrk(s, ".eE")) {
                if (parse_float_option(name, s, 0.0, 1.0, &f))
                        return 2;
                if (!(f > 0.0f) && lo > 0)
                        return bad("--%s %s: a fraction must be > 0", name, s);
                *out = -(double)f;
                return 0;
        }
        if (parse_long_option(name, s, lo, 1L << 40, &n))
                return 2;
        *out = (double)n;
        return 0;
}

/** @brief --fast-dev-run, --limit-train-batches, --limit-val-batches: 0, 2, or -1. */
int trial_option(int c, const char *s, struct opts *o)
{
        switch (c) {
        case OPT_FAST_DEV_RUN:
                o->fast_dev_run = 1;
                return s ? parse_long_option("fast-dev-run", s, 1, 1L << 20, &o->fast_dev_run)
                         : 0;
        case OPT_LIMIT_TRAIN:
                return parse_limit("limit-train-batches", s, 1, &o->limit_train);
        case OPT_LIMIT_VAL:
                o->limit_val_set = 1;
                return parse_limit("limit-val-batches", s, 0, &o->limit_val);
        }
        return -1;
}

/**
 * @brief After the command line: --fast-dev-run N sets one epoch, N batches of each kind, and
 *        no files. 0, or 2 after the message (options that contradict it).
 */
int trial_apply(struct opts *o)
{
        if (!o->fast_dev_run)
                return 0;
        if (o->limit_train != 0.0 || o->limit_val_set)
                return bad("--fast-dev-run sets the batches itself: give it without "
                           "--limit-train-batches and --limit-val-batches");
        if (o->resume || o->plan || o->evaluate)
                return bad("--fast-dev-run is a quick trial of training: not with --%s",
                           o->resume ? "resume" : o->plan ? "plan" : "evaluate");
        o->epochs = 1;
        o->limit_train = o->limit_val = (double)o->fast_dev_run;
        o->limit_val_set = 1;
        o->ckpt_dir = o->metrics_csv = o->tensorboard = o->export_st = o->export_initial = NULL;
        o->trace = NULL;
        o->max_steps = 0;
        o->top_k = o->ckpt_every = 0; /* the options of the files not written */
        o->overwrite = 0;
        return 0;
}

/** @brief --fast-dev-run's word on stderr (the job's first process). */
void trial_note(const struct opts *o)
{
        if (o->fast_dev_run)
                fprintf(stderr, "strata-train: --fast-dev-run: %ld training batch%s and %ld "
                                "evaluation batch%s in 1 epoch; no checkpoint, metrics, "
                                "TensorBoard, export or trace file is written\n",
                        o->fast_dev_run, o->fast_dev_run == 1 ? "" : "es", o->fast_dev_run,
                        o->fast_dev_run == 1 ? "" : "es");
}

/* @p limit (a count, or -fraction) of @p batches. */
static long limited(double limit, long batches)
{
        if (limit == 0.0)
                return batches;
        if (limit < 0.0)
                return (long)floor((double)batches * -limit);
        return (long)limit < batches ? (long)limit : batches;
}

/**
 * @brief --limit-train-batches: r->steps_per_epoch cut to the limit. 0, or 2 after the
 *        message when a fraction leaves no batch.
 */
int trial_limit_train(struct run *r)
{
        long n = limited(r->o.limit_train, r->steps_per_epoch);

        if (n < 1)
                return bad("--limit-train-batches %g of an epoch's %ld batches leaves none",
                           -r->o.limit_train, r->steps_per_epoch);
        r->steps_per_epoch = n;
        return 0;
}

/** @brief --limit-val-batches: the evaluation's batches of @p batches (0: none). */
long trial_val_batches(const struct run *r, long batches)
{
        if (!r->o.limit_val_set)
                return batches;
        if (r->o.limit_val == 0.0)
                return 0;
        return limited(r->o.limit_val, batches);
}
