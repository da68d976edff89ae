/*
 * strata-train's output: the header, the progress bar, one line (or JSON object) per epoch,
 * the final summary or a stopped run's, and stdout's write errors. Only the job's first
 * process prints (config_start() silences the others).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tools/timing.h"
#include "tools/train/train.h"

/* Flush stdout; on a write error (disk full, closed pipe) say so once. 1 when it failed. */
int stdout_failed(void)
{
        static int said;

        if (fflush(stdout) == 0 && !ferror(stdout))
                return 0;
        if (!said++)
                fprintf(stderr, "strata-train: writing the results to stdout failed: %s\n",
                        strerror(errno));
        return 1;
}

/* The kernels the run computes with, by name (strata_kernel_set()). */
static const char *kernels_name(const struct opts *o)
{
        const char *k;

        if (o->accel != STRATA_ACCEL_CPU)
                return "cublas";
        k = strata_kernel_set(o->kernels, o->precision == STRATA_PRECISION_BF16_MIXED
                                                  ? STRATA_BF16 : STRATA_F32);
        return k ? k : "refused";
}

/** @brief Whether a progress bar is drawn (a terminal, neither --quiet nor --json); the header. */
void report_start(struct run *r)
{
        const struct opts *o = &r->o;

        /* Under a launcher stdout may be a terminal of its own (Open MPI's pseudo-terminal)
         * while the job's output goes to a file: plain lines there. */
        char val[32] = "";

        r->tty = isatty(1) && !o->quiet && !o->json && !r->launched;
        if (r->val.n) /* a validation set beside the test set (sets.c) */
                snprintf(val, sizeof(val), "%u val / ", r->val.n);
        if (!o->quiet && !o->json)
                printf("strata-train: %s, %d device(s), model %s%s, %u train / %s%u %s samples, "
                       "batch %d, %ld steps/epoch, kernels %s\n",
                       strata_strategy_name(o->strategy), strata_world_size(r->rt), o->model,
                       o->bn ? " +bn" : "", r->train.n, val, r->test.n,
                       r->val.n ? "test" : r->set, o->batch, r->steps_per_epoch,
                       kernels_name(o));
}

/** @brief Where a resumed run starts. */
void report_resumed(const struct run *r)
{
        if (r->o.resume && !r->o.quiet && !r->o.json && r->at.epoch < r->o.epochs)
                printf("strata-train: resumed at epoch %d, step %ld\n", r->at.epoch + 1,
                       r->at.step);
}

/**
 * @brief The progress bar of a terminal: one line per epoch, rewritten in place (step/steps,
 *        mean loss so far and @p own, each output's of a model of several (losses_short()),
 *        samples/s, time left in the epoch and in the run).
 */
void progress(int epoch, int epochs, long step, long steps, double loss, const char *own,
              double sps, double eta, double eta_run)
{
        int width = 24, done = (int)(width * step / (steps ? steps : 1));
        char bar[32];

        for (int i = 0; i < width; i++)
                bar[i] = i < done ? '=' : (i == done ? '>' : ' ');
        bar[width] = '\0';
        printf("\repoch %d/%d [%s] %ld/%ld  loss %.4f%s  %.0f samples/s  ETA %.0fs (run %.0fs)"
               "\033[K", epoch, epochs, bar, step, steps, loss, own, sps, eta, eta_run);
        fflush(stdout);
}

/**
 * @brief Seconds left in the whole run after batch @p s of epoch @p ep: the batches left at
 *        the rate of this run so far (its evaluations included).
 */
double eta_run(const struct run *r, int ep, long s)
{
        long left = (long)(r->o.epochs - ep - 1) * r->steps_per_epoch + r->steps_per_epoch - s;
        double el = strata_tool_now() - r->t_start;

        return r->nsteps ? el / (double)r->nsteps * (double)left : 0.0;
}

/** @brief The epoch's line: text or JSON (the progress bar was cleared before it). */
void report_epoch(const struct run *r, int ep, long s, double ep_time)
{
        double sps = (double)(s * r->o.batch) / ep_time, eta = eta_run(r, ep, s);
        char num[32], lr[32], ev[512], own[320];

        if (r->o.json)
                printf("{\"epoch\":%d,\"train_loss\":%s%s,%s,"
                       "\"samples_per_s\":%.0f,\"epoch_s\":%.3f,\"lr\":%s,\"eta_s\":%.1f}\n",
                       ep + 1, json_num(r->train_loss, "%.6f", num),
                       losses_field(r, "train", r->train_losses, 1, own, sizeof(own)),
                       eval_fields(r, &r->ev, 1, ev, sizeof(ev)), sps, ep_time,
                       json_num(epoch_lr(r, ep), "%.6g", lr), eta);
        else if (!r->o.quiet)
                printf("epoch %3d  train_loss %s%s  %s  lr %.4g  %8.0f samples/s  %.2fs  "
                       "ETA %.0fs\n", ep + 1, text_num(r->train_loss, "%.4f", num),
                       losses_field(r, "train", r->train_losses, 0, own, sizeof(own)),
                       eval_fields(r, &r->ev, 0, ev, sizeof(ev)), epoch_lr(r, ep), sps, ep_time,
                       eta);
}

/* The job's summary: the last evaluation, time, the median step, memory planned and used,
 * the heap (--quiet: only --json's object). */
static void summary(const struct run *r, const struct strata_memory_info *mem, double t_total,
                    long heap)
{
        double med = strata_tool_median(r->step_times, (size_t)r->nsteps) * 1e6;
        double cpu = strata_tool_median(r->step_cpu, (size_t)r->nsteps) * 1e6;
        double sps = t_total > 0.0 ? (double)r->nsteps * r->o.batch / t_total : 0.0;
        char num[32], lr[32], tm[512], own[320];

        if (r->o.json)
                printf("{\"final\":true,\"epochs\":%d,\"batch\":%d,\"devices\":%d,"
                       "\"kernels\":\"%s\",\"train_loss\":%s%s,%s,\"lr\":%s,\"time_s\":%.3f,"
                       "\"samples_per_s\":%.0f,\"step_us_median\":%.1f,"
                       "\"step_cpu_us_median\":%.1f,\"arena_bytes_planned\":%zu,\"arena_bytes_used\":%zu,"
                       "\"arena_refusals\":%llu,\"heap_allocs\":%ld}\n",
                       r->o.epochs, r->o.batch, strata_world_size(r->rt), kernels_name(&r->o),
                       json_num(r->train_loss, "%.6f", num),
                       losses_field(r, "train", r->train_losses, 1, own, sizeof(own)),
                       eval_fields(r, &r->ev, 1, tm, sizeof(tm)),
                       json_num(epoch_lr(r, r->o.epochs - 1), "%.6g", lr), t_total, sps, med,
                       cpu, mem->planned, mem->used, (unsigned long long)mem->refusals, heap);
        else if (!r->o.quiet)
                printf("final: %s  time %.2fs  median step %.1f us  %.0f samples/s\n"
                       "memory: %zu bytes planned, %zu used, %llu refused; heap allocations "
                       "during training: %ld\n",
                       eval_fields(r, &r->ev, 0, tm, sizeof(tm)), t_total, med, sps, mem->planned,
                       mem->used,
                       (unsigned long long)mem->refusals, heap);
}

/**
 * @brief After the last epoch: the summary (the job's first process), another process's heap
 *        allocations, and 16-mixed's loss scale.
 */
void report_final(const struct run *r, double t_total, long heap)
{
        struct strata_memory_info mem;
        struct strata_grad_scaler gs;
        int first = strata_is_global_zero(r->rt);

        strata_memory(r->rt, &mem);
        if (!first && heap > 0) /* rank 0 prints its own in the summary */
                fprintf(stderr, "strata-train: process %d: %ld heap allocations during "
                                "training%s\n", r->rank, heap,
                        r->o.strategy == STRATA_STRATEGY_MPI ? " (Open MPI's)" : "");
        if (first)
                summary(r, &mem, t_total, heap);
        if (first && heap > 0 && r->o.accel == STRATA_ACCEL_CUDA)
                fprintf(stderr, "strata-train: warning: %ld heap allocations during training on "
                                "the CUDA accelerator, made inside the CUDA libraries (Strata's "
                                "CUDA driver calls no allocator; decision 0051): reported, not "
                                "failed on; STRATA_HEAPCOUNT_WHO=1 names their callers\n",
                        heap);
        if (r->o.precision == STRATA_PRECISION_16_MIXED && first && !r->o.json && !r->o.quiet &&
            strata_grad_scaler_state(r->rt, &gs) == STRATA_OK)
                printf("loss scale: %g, %llu optimizer steps skipped\n", gs.scale,
                       (unsigned long long)gs.skipped);
}

/**
 * @brief A resumed run that had already trained every epoch: the result its checkpoint kept
 *        (nothing was trained, so no time or throughput).
 */
void report_finished(const struct run *r)
{
        char num[32], lr[32], ev[512], own[320];

        if (!strata_is_global_zero(r->rt))
                return;
        if (r->o.json)
                printf("{\"final\":true,\"finished\":true,\"epochs\":%d,\"batch\":%d,"
                       "\"devices\":%d,\"train_loss\":%s%s,%s,\"lr\":%s}\n", r->at.epoch,
                       r->o.batch, strata_world_size(r->rt),
                       json_num(r->train_loss, "%.6f", num),
                       losses_field(r, "train", r->train_losses, 1, own, sizeof(own)),
                       eval_fields(r, &r->ev, 1, ev, sizeof(ev)),
                       json_num(epoch_lr(r, r->at.epoch - 1), "%.6g", lr));
        else if (!r->o.quiet)
                printf("final (from the checkpoint, %d epoch%s): train_loss %.4f  %s\n",
                       r->at.epoch, r->at.epoch == 1 ? "" : "s", r->train_loss,
                       eval_fields(r, &r->ev, 0, ev, sizeof(ev)));
}

/** @brief The last line, once the runtime is down: where the trace is. */
void report_trace(const struct opts *o)
{
        if (o->trace && !o->quiet && !o->json)
                printf("trace: %s (open it in Perfetto or chrome://tracing)\n", o->trace);
}

/* What a stopped run did up to its last step: the summary a completed run prints, without
 * the test pass it never reached. */
void stopped_summary(const struct opts *o, int ep, long s, double loss, double *times,
                     long nsteps, double elapsed)
{
        double med, sps = elapsed > 0.0 ? (double)nsteps * o->batch / elapsed : 0.0;
        char num[32];

        med = strata_tool_median(times, (size_t)nsteps) * 1e6;
        if (o->json)
                printf("{\"final\":true,\"stopped\":\"%s\",\"epoch\":%d,\"step\":%ld,"
                       "\"train_loss\":%s,\"time_s\":%.3f,\"samples_per_s\":%.0f,"
                       "\"step_us_median\":%.1f}\n",
                       sigabbrev_np(stop_requested()), ep + 1, s, json_num(loss, "%.6f", num),
                       elapsed, sps, med);
        else if (!o->quiet)
                printf("stopped: epoch %d step %ld  train_loss %.4f  time %.2fs  median step "
                       "%.1f us  %.0f samples/s\n", ep + 1, s, loss, elapsed, med, sps);
        fflush(stdout);
}
