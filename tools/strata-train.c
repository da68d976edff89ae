/*
 * strata-train: train an MLP on Fashion-MNIST (or synthetic data shaped by --model) with any
 * Strata strategy, printing progress per epoch and a summary. Exit status 2 on bad input.
 * This file wires the run; its parts are in tools/train/ (see train.h).
 */
#include <fcntl.h>
#include <stdio.h>

#include "tools/train/train.h"

/*
 * After the options and the job: --ckpt-dir, --export-safetensors, --init-weights and
 * --export-initial checked, the data (for --plan, its memory plan and the end), the runtime,
 * the loaders; the header; --resume or --init-weights, --export-initial; the metrics log; then
 * the loop. 0, or the exit status.
 */
static int train_start(struct run *r)
{
        int rc;

        if (r->o.plan) /* what training would refuse, then the plan */
                return (rc = ckpt_plan_check(&r->o)) || (rc = export_check(&r->o)) ||
                       (rc = data_load(r)) ? rc : trainer_check(r) ? 2 : plan_show(r);
        if ((rc = ckpt_check(&r->o, r->rank)) || (rc = export_check(&r->o)) ||
            (rc = weights_check(&r->o)) || (rc = predict_check(&r->o)) ||
            (rc = data_load(r)) || (rc = config_start(r)) ||
            (rc = data_loaders(r)))
                return rc;
        report_start(r);
        if (stdout_failed()) {
                strata_teardown(r->rt);
                return 1;
        }
        if (r->o.evaluate)
                return weights_evaluate(r);
        if (r->o.predict)
                return predict_run(r);
        if ((rc = ckpt_start(r)) || (rc = trainer_resume(r)) || (rc = weights_start(r)))
                return rc;
        if (trainer_check(r)) {
                strata_teardown(r->rt);
                return 2;
        }
        report_resumed(r);
        if (r->o.metrics_csv && strata_is_global_zero(r->rt) &&
            csv_open(r, r->o.metrics_csv, r->o.resume != NULL)) {
                strata_teardown(r->rt);
                return 2;
        }
        if (r->o.tensorboard && strata_is_global_zero(r->rt) && tb_open(r->o.tensorboard)) {
                strata_teardown(r->rt);
                return 2;
        }
        return train_loop(r);
}

/*
 * The whole run of one process: the tool's, with @p rank -1; a process that --strategy spawn
 * (or --processes) starts runs it again with its rank.
 */
static int train(int argc, char **argv, int rank)
{
        static char outbuf[1 << 14];
        static struct csvlog csv;
        struct run r = { .csv = &csv, .rank = rank };
        int rc;

        /* A closed stdout: the results would be lost, and the next file opened would take its
         * descriptor and receive them. */
        if (fcntl(1, F_GETFD) < 0) {
                fprintf(stderr, "strata-train: stdout is closed: the results could not be "
                                "written\n");
                return 2;
        }
        /* stdout's buffer is ours, so printing progress never allocates. */
        setvbuf(stdout, outbuf, _IOLBF, sizeof(outbuf));
        if ((rc = parse_args(argc, argv, &r.o)) || (rc = launcher_rule(&r.o, r.rank)))
                return rc;
        if ((r.o.strategy == STRATA_STRATEGY_SPAWN || r.o.processes > 1) && r.rank < 0)
                return spawn_parent(argc, argv, &r.o, train);
        if ((rc = job_setup(&r)))
                return rc;
        if (r.rank <= 0)
                warn_ignored(&r.o);
        catch_stop_signals(); /* acted on at the first step boundary */
        return train_start(&r);
}

int main(int argc, char **argv)
{
        return train(argc, argv, -1);
}
