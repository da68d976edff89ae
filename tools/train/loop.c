/*
 * strata-train's loop: epochs of training steps, each epoch closed by an evaluation, its line,
 * its metrics row and its checkpoint; a stop signal honoured at the next optimizer step; the
 * end of the run (export, summary, teardown, exit status).
 */
#include <stdio.h>
#include <string.h>

#include "tools/heapcount.h"
#include "tools/timing.h"
#include "tools/train/train.h"

/* One epoch as it goes. */
struct epoch {
        int ep;                 /* from 0 */
        long s, s0;             /* batches trained; of them, by an earlier run (resumed) */
        double loss_sum;        /* of those s batches */
        double loss_sums[STRATA_MAX_OUTPUTS]; /* several outputs: each one's, the same */
        double t0, t_bar;       /* the epoch's start; the progress bar's last drawing */
};

/* Where the run stands after the epoch's batches so far (checkpoints, a stop). */
static struct position here(const struct run *r, const struct epoch *e)
{
        struct position p = { e->ep, e->s, e->loss_sum, r->train_loss, r->ev, { 0.0 }, { 0.0 },
                              r->plateau_on ? (float)r->plateau.lr : 0.0f,
                              (uint32_t)r->plateau.bad, r->plateau.best };

        memcpy(p.loss_sums, e->loss_sums, sizeof(p.loss_sums));
        memcpy(p.train_losses, r->train_losses, sizeof(p.train_losses));
        return p;
}

static int finish(struct run *r);
static int stopped(struct run *r, struct epoch *e);

/* A step or an evaluation failed: the library's message, the runtime down, exit status 1. */
static int fail(struct run *r)
{
        fprintf(stderr, "strata-train: %s\n", strata_last_error());
        strata_teardown(r->rt);
        return 1;
}

/* The epoch's order, and for a mid-epoch checkpoint the batches it already trained skipped. */
static void begin_epoch(struct run *r, struct epoch *e)
{
        struct strata_batch b;

        if (r->plateau_on) /* the rate this epoch uses, for its lines and logs */
                r->cfg.optim.lr = (float)r->plateau.lr;
        strata_sampler_set_epoch(&r->sampler, (uint64_t)e->ep);
        strata_loader_reset(&r->loader, r->sampler.indices, r->sampler.per_rank);
        if (e->ep == r->at.epoch && r->at.step) {
                for (; e->s < r->at.step && strata_loader_next_indexed(&r->loader, &b) > 0;
                     e->s++)
                        ;
                e->loss_sum = r->at.loss_sum;
                memcpy(e->loss_sums, r->at.loss_sums, sizeof(e->loss_sums));
        }
        e->s0 = e->s;
        csv_window(r->csv, e->t0);
}

/* On a terminal, the progress bar: redrawn every 0.1 s and at the epoch's last batch. */
static void show_progress(const struct run *r, struct epoch *e)
{
        double el, rate;
        char own[16 * STRATA_MAX_OUTPUTS];

        if (!r->tty || !(strata_tool_now() - e->t_bar > 0.1 || e->s == r->steps_per_epoch))
                return;
        el = strata_tool_now() - e->t0;
        rate = (double)(e->s - e->s0) / el;
        e->t_bar = strata_tool_now();
        progress(e->ep + 1, r->o.epochs, e->s, r->steps_per_epoch, e->loss_sum / e->s,
                 losses_short(r, e->loss_sums, (double)e->s, own, sizeof(own)),
                 rate * r->o.batch, (double)(r->steps_per_epoch - e->s) / rate,
                 eta_run(r, e->ep, e->s));
}

/* Whether the epoch's batch @p s (from 1) ended an accumulation window: every --accumulate
 * batches, and at the epoch's last batch (a partial window steps too, as in Lightning). */
static int window_end(const struct run *r, long s)
{
        return s % r->o.accumulate == 0 || s == r->steps_per_epoch;
}

/* Optimizer steps of the run once the epoch's batch @p s ended a window. */
static long optimizer_steps(const struct run *r, int ep, long s)
{
        long k = r->o.accumulate;

        return ep * ((r->steps_per_epoch + k - 1) / k) + (s + k - 1) / k;
}

/*
 * --max-steps or --max-time inside an epoch (@p why names it): the batches trained so far are
 * the epoch's, evaluated, logged and checkpointed where the run stands (a resume continues
 * from there), then the run ends as a finished one does (exit status 0).
 */
static int limit_end(struct run *r, struct epoch *e, const char *why)
{
        double t = strata_tool_now() - e->t0;
        long g = (long)e->ep * r->steps_per_epoch + e->s;
        int rc;

        r->ended = 1;
        if (e->s > e->s0) {
                r->train_loss = e->loss_sum / (double)e->s;
                for (int k = 0; k < STRATA_MAX_OUTPUTS; k++)
                        r->train_losses[k] = e->loss_sums[k] / (double)e->s;
        }
        if ((rc = eval_pass(r, &r->ev)))
                return fail(r);
        if (r->tty)
                printf("\r\033[K");
        if (strata_is_global_zero(r->rt))
                fprintf(stderr, "strata-train: %s reached at epoch %d, batch %ld: the run ends "
                                "there%s\n", why, e->ep + 1, e->s,
                        r->o.ckpt_dir ? " (checkpoint saved)" : "");
        csv_row(r, g, e->ep + 1, r->train_loss, epoch_lr(r, e->ep),
                (double)((e->s - e->s0) * r->o.batch) / t, &r->ev, r->train_losses);
        if (r->o.ckpt_dir && save_ckpt(r->rt, &r->o, here(r, e)))
                return fail(r);
        report_epoch(r, e->ep, e->s, t);
        return finish(r);
}

/*
 * After a step: --val-every-n-steps's evaluation; at the end of an accumulation window a
 * checkpoint every --ckpt-every-steps optimizer steps of the run (Lightning's
 * every_n_train_steps; the epoch's end has its own), --max-steps and --max-time.
 */
static int after_step(struct run *r, struct epoch *e)
{
        int rc;

        if ((rc = trainer_mid_eval(r, e->ep, e->s)))
                return rc == STRATA_ESTOPPED ? stopped(r, e) : fail(r);
        if (!window_end(r, e->s))
                return 0;
        if (r->o.ckpt_every && optimizer_steps(r, e->ep, e->s) % r->o.ckpt_every == 0 &&
            e->s < r->steps_per_epoch && save_ckpt(r->rt, &r->o, here(r, e)))
                return fail(r);
        if (e->s < r->steps_per_epoch &&
            trainer_steps_done(&r->o, optimizer_steps(r, e->ep, e->s)))
                return limit_end(r, e, "--max-steps");
        trainer_watch_time(r);
        return 0;
}

/*
 * A run whose loss grows by orders of magnitude while it stays finite (a learning rate far
 * too high) gets one warning on stderr: when the loss smoothed over steps (an exponential
 * moving average, weight 0.1 per step, from the run's first step) exceeds both GROWTH times
 * the loss of the run's first step and the floor FLOOR. The floor keeps a run that starts
 * near zero loss (resumed, nearly converged) from being warned about a small rise; a
 * non-finite loss is not this warning's (STRATA_ENONFINITE stops the run first).
 */
#define GROWTH 1e3
#define FLOOR 1e2

static void watch_loss(struct run *r, const struct epoch *e, double loss)
{
        double *f = &r->grow.first, *sm = &r->grow.smooth;

        if (r->nsteps == 1)
                *f = *sm = loss;
        *sm = 0.9 * *sm + 0.1 * loss;
        if (r->grow.warned || !(*sm > GROWTH * *f && *sm > FLOOR) ||
            !strata_is_global_zero(r->rt))
                return;
        r->grow.warned = 1;
        fprintf(stderr, "%sstrata-train: warning: the training loss has grown from %g (the "
                        "run's first step) to %g (smoothed; epoch %d, batch %ld): training is "
                        "diverging; lower --lr or clip gradients (--clip-norm)\n",
                r->tty ? "\n" : "", *f, *sm, e->ep + 1, e->s);
}

/*
 * A training step failed: where in the run, the library's message (for a non-finite gradient,
 * which step; nothing was applied, and no checkpoint is written after it), exit status 1.
 */
static int step_failed(struct run *r, const struct epoch *e)
{
        fprintf(stderr, "%sstrata-train: epoch %d, batch %ld: %s\n", r->tty ? "\n" : "",
                e->ep + 1, e->s + 1, strata_last_error());
        strata_teardown(r->rt);
        return 1;
}

/*
 * A stop signal, refused by the library at the next optimizer-step boundary (STRATA_ESTOPPED,
 * at the same step in every process of a job): the summary, then stop_run() where the run stands.
 */
static int stopped(struct run *r, struct epoch *e)
{
        stop_agree(r->rt);
        tb_flush();
        if (stop_limit()) /* --max-time, agreed by every process: no signal */
                return limit_end(r, e, "--max-time");
        stopped_summary(&r->o, e->ep, e->s, e->loss_sum / (double)(e->s ? e->s : 1),
                        r->step_times, r->nsteps, strata_tool_now() - r->t_start);
        return stop_run(r->rt, &r->o, here(r, e));
}

/* One training step, timed; its loss logged, watched and shown. */
static int step(struct run *r, struct epoch *e, const struct strata_batch *b)
{
        struct strata_metrics m;
        double t0 = strata_tool_now(), c0 = strata_tool_process_cpu_now();
        int rc;

        fault(r->rank, r->nsteps);
        if (e->s + 1 == r->steps_per_epoch && strata_end_accumulation_window(r->rt))
                return fail(r); /* the epoch's last batch closes its window */
        if ((rc = strata_train_step(r->rt, b, &m)))
                return rc == STRATA_ESTOPPED ? stopped(r, e) : step_failed(r, e);
        r->step_cpu[r->nsteps] = strata_tool_process_cpu_now() - c0;
        r->step_times[r->nsteps++] = strata_tool_now() - t0;
        e->loss_sum += m.loss;
        for (int k = 0; k < m.noutputs; k++)
                e->loss_sums[k] += m.losses[k];
        e->s++;
        watch_loss(r, e, m.loss);
        csv_step(r, e->ep, e->s, &m);
        show_progress(r, e);
        return after_step(r, e);
}

/* The epoch's end: the evaluation, the trace flushed, its metrics, checkpoint and line. */
static int end_epoch(struct run *r, struct epoch *e)
{
        double ep_time = strata_tool_now() - e->t0;
        char name[64];
        int rc;

        r->train_loss = e->loss_sum / (double)e->s;
        for (int k = 0; k < STRATA_MAX_OUTPUTS; k++)
                r->train_losses[k] = e->loss_sums[k] / (double)e->s;
        if ((rc = eval_pass(r, &r->ev)))
                return rc == STRATA_ESTOPPED ? stopped(r, e) : fail(r);
        if (trainer_plateau(r, e->ep))
                return fail(r);
        if (r->tty)
                printf("\r\033[K");
        if (r->o.trace && strata_flush_trace(r->rt))
                fprintf(stderr, "strata-train: %s\n", strata_last_error());
        csv_epoch(r, e->ep, e->s - e->s0, ep_time);
        if (r->o.ckpt_dir) { /* the next epoch, none of its batches trained */
                struct position next = here(r, e);

                next.epoch++;
                next.step = 0;
                next.loss_sum = 0.0;
                memset(next.loss_sums, 0, sizeof(next.loss_sums));
                if (save_ckpt(r->rt, &r->o, next))
                        return fail(r);
                ckpt_name(next, name, sizeof(name));
                if (trainer_top_k(r, name))
                        fprintf(stderr, "strata-train: --save-top-k: %s/topk could not be "
                                        "written\n", r->o.ckpt_dir);
        }
        report_epoch(r, e->ep, e->s, ep_time);
        if (stdout_failed()) {
                strata_teardown(r->rt);
                return 1;
        }
        return 0;
}

/* Epoch @p ep: 0, or the exit status once the run has ended (failed or stopped). */
static int epoch(struct run *r, int ep)
{
        struct epoch e = { .ep = ep, .t0 = strata_tool_now() };
        struct strata_batch b;
        int rc;

        begin_epoch(r, &e);
        while (e.s < r->steps_per_epoch && strata_loader_next_indexed(&r->loader, &b) > 0) {
                if ((rc = step(r, &e, &b)) || r->ended)
                        return rc;
        }
        return end_epoch(r, &e);
}

/*
 * The run's end: the weights exported, the summary, the runtime down. Heap allocations
 * during training fail the run (Open MPI's own under mpi and the CUDA libraries' on CUDA,
 * decision 0051: reported, not failed on), as does a failed write to stdout or to the
 * metrics log.
 */
static int finish(struct run *r)
{
        double t_total = strata_tool_now() - r->t_start;
        long heap = strata_heapcount_stop();
        int rc, csv_failed;

        if (sets_test(r, (long)r->o.epochs * r->steps_per_epoch) ||
            (r->o.export_st && export_weights(r, r->o.export_st)))
                return fail(r);
        if (r->at.epoch >= r->o.epochs)
                report_finished(r);
        else
                report_final(r, t_total, heap);
        /* Open MPI's and the CUDA libraries' own allocations are reported, not failed on. */
        rc = heap > 0 && r->o.strategy != STRATA_STRATEGY_MPI && r->o.accel != STRATA_ACCEL_CUDA;
        if (strata_teardown(r->rt)) {
                fprintf(stderr, "strata-train: %s\n", strata_last_error());
                rc = 1;
        }
        if (stdout_failed())
                rc = 1;
        csv_failed = csv_close(r->csv) | tb_close();
        strata_arena_release(&r->data);
        report_trace(&r->o);
        return rc || csv_failed ? 1 : 0;
}

/** @brief Every epoch from where the run stands, then its end: the exit status. */
int train_loop(struct run *r)
{
        int rc;

        strata_heapcount_start();
        r->t_start = strata_tool_now();
        for (int ep = r->at.epoch; ep < r->o.epochs; ep++) {
                if ((rc = epoch(r, ep)) || r->ended)
                        return rc;
                /* Lightning's EarlyStopping and max_steps at an epoch's end */
                if (trainer_early_stop(r, ep) ||
                    trainer_steps_done(&r->o, optimizer_steps(r, ep, r->steps_per_epoch)))
                        break;
        }
        return finish(r);
}
