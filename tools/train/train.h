/*
 * strata-train's private header: the options, the state of one run, and what its parts share.
 * tools/strata-train.c wires them; each file of tools/train/ holds one concern:
 *   options.c     the command line parsed and checked (usage.c: the --help text)
 *   data.c        the data sets in the tool's arena, the sampler and the loaders
 *   h5data.c      the data sets from an HDF5 file (h5.c reads it; only the tool links HDF5)
 *   arena.c       the tool's one mapping: the data and what the run keeps beside it
 *   config.c      the model, the runtime's configuration, its plan and its start
 *   loop.c        epochs, steps, the end of the run
 *   eval.c        the evaluation pass and the metrics that fit the loss
 *   plan.c        --plan: the memory plan, printed without training
 *   report.c      what stdout shows: header, progress bar, epoch lines, summaries
 *   metrics.c     the metrics CSV (--metrics-csv)
 *   checkpoint.c  checkpoints, --resume, stop signals
 *   weights.c     --init-weights[-partial], --export-initial, --evaluate
 *   predict.c     --predict FILE --predictions OUT.h5
 *   launch.c      how the job's processes start: spawn's parent, mpi's launcher, the rank
 *   fault.c       the job tests' fault injection (STRATA_TRAIN_FAULT)
 *   trainer.c     Lightning's Trainer options: max steps and time, early stop, top-k, plateau
 *   trial.c       --fast-dev-run, --limit-train-batches, --limit-val-batches
 *   tboard.c      --tensorboard: TensorBoard event files
 *   sets.c        --val-fraction beside a test set: validation each epoch, the test at the end
 * A function returning int returns 0 on success, else the exit status (its message printed).
 */
#ifndef STRATA_TOOLS_TRAIN_TRAIN_H
#define STRATA_TOOLS_TRAIN_TRAIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "strata/strata.h"
#include "base/output.h"

#define MAX_MODULES 64
#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"
#define PATH_BUF 4096

/* The command line, parsed and checked. */
struct opts {
        const char *data;
        const char *model;
        int bn;
        float dropout;
        int epochs, batch;
        float lr, momentum, wd;
        enum strata_optim_kind optim;
        uint64_t seed;
        enum strata_strategy_kind strategy;
        int devices;
        int json, quiet, verbose;
        int raw;
        int sync_bn, accumulate;
        enum strata_accumulate_reduce accumulate_reduce; /* --accumulate-reduce window|each */
        float clip_norm, clip_value;
        int strategy_set, devices_set;
        int processes;          /* zero1, zero2, fsdp: processes strata-train starts (spawn) */
        long synthetic;
        enum strata_accelerator accel;
        int tf32;
        const char *ckpt_dir;   /* save at every epoch end */
        int ckpt_keep;          /* checkpoints kept in ckpt_dir */
        const char *resume;     /* a checkpoint file, or a directory: its latest */
        int resume_auto;        /* --resume auto found no checkpoint: a new run */
        const char *export_st;  /* safetensors of the final weights */
        long ckpt_every;        /* also every N optimizer steps (0: epoch ends only) */
        const char *schedule;   /* constant, step:N:GAMMA, cosine[:MIN], multistep:..., onecycle,
                                 * plateau (config.c) */
        long warmup;            /* linear warm-up optimizer steps */
        const char *trace;      /* Chrome trace of every device */
        long trace_events;      /* trace events buffered per device */
        double stall_s;         /* report waits longer than this (0: default, <0: never) */
        double timeout_s;       /* bound on every wait between devices (0: default) */
        const char *metrics_csv; /* CSVLogger-style metrics */
        long log_every;         /* a metrics row every N batches */
        enum strata_bind bind;  /* --bind cores|none */
        int allow_nonfinite;    /* keep going when the loss is NaN or infinite */
        int mpi_allreduce;      /* mpi: MPI_Allreduce for gradients */
        enum strata_precision precision; /* --precision 32|bf16-mixed|16-mixed */
        enum strata_dtype grad_allreduce; /* --grad-allreduce 32|bf16 */
        int invariant;          /* --invariant: the same bits on any device count */
        enum strata_kernels kernels; /* --portable, --kernels: the CPU's kernel set */
        int no_fusion;               /* --no-fusion: every module on its own (same bits) */
        int chunks;             /* --chunks C: invariant mode's chunks (0: the library's 8) */
        const struct strata_loss_ops *loss; /* --loss (NULL: softmax cross-entropy) */
        float huber_beta;       /* --huber-beta (0: 1.0) */
        long synthetic_regression; /* --synthetic-regression N: float targets */
        const struct strata_module_ops *activation; /* --activation (NULL: none) */
        int model_set;          /* --model given (HDF5 data: else sized from the file) */
        const char *inputs;     /* --inputs, --targets: datasets of the HDF5 file --data */
        const char *targets;
        const char *test_data;  /* --test-data: the HDF5 file that evaluates */
        const char *mesh;       /* --mesh: a graph model's edge index (HDF5, mesh.c) */
        float val_fraction;     /* --val-fraction: the last fraction of --data evaluates */
        int overwrite;          /* --overwrite: a --ckpt-dir holding checkpoints starts afresh */
        int drop_last;          /* --drop-last: an epoch skips its last partial batch */
        int plan;               /* --plan: print the memory plan and exit */
        const char *init_weights; /* --init-weights[-partial]: safetensors loaded at start */
        int init_partial;       /* ...loading the tensors that fit (--init-weights-partial) */
        const char *export_initial; /* --export-initial: safetensors before the first step */
        int no_shuffle;         /* --shuffle off: every epoch in the data's order */
        const char *evaluate;   /* --evaluate: a checkpoint or safetensors file, evaluated */
        float beta1, beta2;     /* --betas: AdamW's (0: the library's 0.9, 0.999) */
        long max_steps;         /* --max-steps: optimizer steps of the run (0: no limit) */
        double max_time;        /* --max-time: seconds of training (0: no limit) */
        long val_every;         /* --val-every-n-steps: an evaluation every N batches too */
        long patience;          /* --early-stop: evaluations without improvement (0: off) */
        const char *monitor;    /* --monitor: the metric watched (NULL: the evaluation loss) */
        long top_k;             /* --save-top-k: the best K epoch checkpoints kept (0: off) */
        const char *tensorboard; /* --tensorboard DIR: TensorBoard event files (tboard.c) */
        long fast_dev_run;      /* --fast-dev-run [N]: N batches, one epoch, no files (trial.c) */
        double limit_train;     /* --limit-train-batches: a count, or -fraction (0: all) */
        double limit_val;       /* --limit-val-batches: the same (limit_val_set: given) */
        int limit_val_set;
        unsigned given;         /* GIVEN_*: options given whose default is also a value */
        const char *predict;    /* --predict: a checkpoint or safetensors file, predicted */
        const char *predictions; /* --predictions: the HDF5 file predict writes */
};

/* --predict's options' codes (predict.c parses them). */
enum { OPT_PREDICT = 0x5001, OPT_PREDICTIONS };

/* The Trainer options' codes (options.c's table; trainer.c parses them). */
enum { OPT_MAX_STEPS = 0x4e01, OPT_MAX_TIME, OPT_VAL_EVERY, OPT_EARLY_STOP, OPT_MONITOR,
       OPT_SAVE_TOP_K };
/* ...and those of the trials, the logger and the sets (trial.c, tboard.c, data.c) */
enum { OPT_TENSORBOARD = 0x5101, OPT_FAST_DEV_RUN, OPT_LIMIT_TRAIN, OPT_LIMIT_VAL };

/* Options given on the command line, for the warnings about ones a run ignores. */
enum { GIVEN_MOMENTUM = 1u << 0, GIVEN_ACTIVATION = 1u << 1, GIVEN_BETAS = 1u << 2 };

/*
 * What one evaluation pass found: the training loss function on the evaluation rows, and the
 * metric that fits the loss (ce: argmax accuracy; bce: accuracy of the sigmoid probability at
 * 0.5 against the target at 0.5, over every output; mse, l1, huber: MSE and MAE of the
 * outputs). NaN: not evaluated yet.
 */
struct evaluation {
        double loss;
        double acc;
        double mse, mae;
        double losses[STRATA_MAX_OUTPUTS]; /* several outputs: each one's own loss */
        /* several outputs: each cross-entropy output's accuracy (NaN: a float output, or not
         * kept by the checkpoint a finished run resumed from) */
        double accs[STRATA_MAX_OUTPUTS];
        /* what those accuracies are of, for the checkpoint: the rows evaluated and each
         * cross-entropy output's rows right (-1: a float output) */
        double rows;
        long rights[STRATA_MAX_OUTPUTS];
};

/* The metrics log (--metrics-csv): rows of the logging steps and of each epoch. */
struct csvlog {
        struct strata__out out; /* the file (base/output.h), open while `on` */
        int on;
        const char *path;
        int failed;             /* a write failed: reported once, the exit status says so */
        long rows_steps;        /* batches in the current logging window */
        double loss_sum, t0;    /* over the window */
        double loss_sums[STRATA_MAX_OUTPUTS]; /* several outputs: each one's, the same */
        size_t fill;            /* bytes of rows waiting in buf */
        char buf[1 << 14];      /* rows wait here: logging never allocates */
        char opath[STRATA__OUT_PATH], otmp[STRATA__OUT_PATH]; /* the output's paths */
};

/* Where a run stands, for checkpoints and resumes. */
struct position {
        int epoch;              /* epochs completed */
        long step;              /* batches of the next epoch trained */
        double loss_sum;
        double train_loss;      /* of the last epoch evaluated (NaN: none yet) */
        struct evaluation ev;   /* its evaluation */
        /* several outputs: each one's summed loss over those batches, and its train_loss */
        double loss_sums[STRATA_MAX_OUTPUTS];
        double train_losses[STRATA_MAX_OUTPUTS];
        /* --lr-schedule plateau: its state (plateau_lr 0: none) */
        float plateau_lr;
        uint32_t plateau_bad;
        double plateau_best;
};

/* One run of this process: everything train() sets up, then the loop uses. */
struct run {
        struct opts o;
        int rank;                       /* this process's in its job (job_setup()) */
        int widths[MAX_MODULES], nw;    /* --model (a line of modules: input and output) */
        int layered;                    /* --model is a line of modules: model is built */
        /* --model's outputs (layered): a row of targets' values; each output's width, its
         * column in that row, and whether its loss takes a class index */
        int tvals, out_w[STRATA_MAX_OUTPUTS], out_col[STRATA_MAX_OUTPUTS];
        unsigned char out_label[STRATA_MAX_OUTPUTS];
        struct strata_dims h5_dims;     /* an HDF5 input's sample layout (channels 0: none) */
        struct strata_module mods[MAX_MODULES];
        struct strata_model model;
        struct strata_config cfg;
        struct strata_runtime *rt;
        size_t data_bytes;              /* the tool's arena: data, indices, step times */
        size_t mem_limit;               /* what this process may use... */
        char why[224];                  /* ...and which limit that is */
        struct strata_arena data;
        struct strata_dataset train, test;
        struct strata_dataset val;      /* --val-fraction beside a test set (sets.c; n 0: none) */
        struct strata_loader vloader;
        uint32_t *val_idx;
        int testing;                    /* eval_pass() evaluates the test set (sets_test()) */
        struct strata_sampler sampler;
        struct strata_loader loader, tloader;
        uint32_t *test_idx;             /* the test set in order */
        double *step_times;             /* of every step of the run, for the median */
        double *step_cpu;               /* the process's CPU time of each, the same */
        long nsteps;                    /* steps this run trained */
        long steps_per_epoch;
        struct position at;             /* where a resumed run starts */
        struct csvlog *csv;
        int tty;                        /* stdout is a terminal: a progress bar */
        int launched;                   /* started by a launcher (mpirun, srun, torchrun) */
        double t_start;                 /* of the training loop */
        double train_loss;              /* of the last epoch */
        double train_losses[STRATA_MAX_OUTPUTS]; /* several outputs: each one's, the same */
        struct evaluation ev;           /* of the last epoch */
        const char *set;                /* what evaluates: "test", "val" or "train_eval" */
        float *outs;                    /* bce: one batch of outputs (eval.c) */
        char tpath[PATH_BUF];           /* this process's trace file */
        int ended;                      /* the run has ended early (its exit status given) */
        struct {                        /* --early-stop: the best monitored value so far */
                double value;
                int epoch;              /* its epoch (from 1; 0: none yet) */
        } best;
        struct strata_plateau plateau;  /* --lr-schedule plateau (plateau_on) */
        int plateau_on;
        struct {                        /* the loss's growth (loop.c: watch_loss) */
                double first, smooth;   /* the run's first step; smoothed since */
                int warned;
        } grow;
};

/* options.c, usage.c */
void usage(FILE *f);
int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int mesh_attach(struct run *r);
void bad_silent(void);
int parse_args(int argc, char **argv, struct opts *o);
void warn_ignored(const struct opts *o);

int parse_long_option(const char *name, const char *s, long lo, long hi, long *out);
int parse_float_option(const char *name, const char *s, double lo, double hi, float *out);

/* trainer.c: --max-steps, --max-time, --val-every-n-steps, --early-stop, --save-top-k */
int trainer_option(int c, const char *s, struct opts *o);
int trainer_check(const struct run *r);
int trainer_steps_done(const struct opts *o, long steps);
void trainer_watch_time(const struct run *r);
int trainer_mid_eval(struct run *r, int ep, long s);
int trainer_early_stop(struct run *r, int ep);
int trainer_top_k(const struct run *r, const char *name);
int trainer_larger(const struct run *r);
int trainer_plateau(struct run *r, int ep);
int trainer_resume(struct run *r);

/* trial.c: --fast-dev-run, --limit-train-batches, --limit-val-batches */
int trial_option(int c, const char *s, struct opts *o);
int trial_apply(struct opts *o);
void trial_note(const struct opts *o);
int trial_limit_train(struct run *r);
long trial_val_batches(const struct run *r, long batches);

/* sets.c: a validation set beside the test set */
int sets_split(struct run *r);
int sets_loaders(struct run *r);
int sets_test(struct run *r, long step);

/* tboard.c: --tensorboard DIR */
int tb_open(const char *dir);
void tb_scalar(const char *tag, double v, long step);
void tb_flush(void);
int tb_on(void);
int tb_close(void);

/* data.c */
int data_load(struct run *r);
int data_loaders(struct run *r);

/* arena.c */
int data_map(struct run *r, char (*p)[PATH_BUF], size_t samples);

/* h5data.c: --data FILE.h5 --inputs --targets (the reader is h5.c) */
int h5_data_load(struct run *r);
int layers_given(const char *spec);
int layers_model(struct run *r, const char *images);
void layers_h5_layout(struct run *r, int rank, const uint32_t *dims);

/* predict.c: --predict FILE --predictions OUT.h5 (an inference-only runtime) */
int predict_option(int c, const char *s, struct opts *o);
int predict_check(const struct opts *o);
int predict_run(struct run *r);
int weights_writable(const char *opt, const char *path);

/* config.c */
int config_fill(struct run *r);
int config_check(struct run *r);
int config_start(struct run *r);

/* plan.c */
int plan_show(struct run *r);

/* eval.c */
const char *json_num(double v, const char *fmt, char *buf);
const char *text_num(double v, const char *fmt, char *buf);
int eval_fits_bce(const struct run *r);
int bce_targets(const struct run *r, const void *t, enum strata_dtype type, uint32_t n,
                int width, const char *what);
int float_row(const struct run *r);
int label_targets(const struct run *r, const void *t, enum strata_dtype type, uint32_t n,
                  const char *what);
int out_labelled(const struct run *r, int k);
const char *losses_short(const struct run *r, const double *sums, double n, char *buf,
                         size_t size);
int eval_outputs(struct run *r);
int eval_pass(struct run *r, struct evaluation *ev);
const char *eval_fields(const struct run *r, const struct evaluation *ev, int json, char *buf,
                        size_t n);
const char *losses_field(const struct run *r, const char *set, const double *v, int json,
                         char *buf, size_t n);
const char *eval_header(const struct run *r, char *buf, size_t n);
const char *eval_row(const struct run *r, const struct evaluation *ev, char *buf, size_t n);

/* loop.c */
int train_loop(struct run *r);

/* report.c */
int stdout_failed(void);
void report_start(struct run *r);
void report_resumed(const struct run *r);
void progress(int epoch, int epochs, long step, long steps, double loss, const char *own,
              double sps, double eta, double eta_run);
double eta_run(const struct run *r, int ep, long s);
void report_epoch(const struct run *r, int ep, long s, double ep_time);
void report_final(const struct run *r, double t_total, long heap);
void report_finished(const struct run *r);
void report_trace(const struct opts *o);
void stopped_summary(const struct opts *o, int ep, long s, double loss, double *times,
                     long nsteps, double elapsed);

/* metrics.c */
int csv_open(const struct run *r, const char *path, int append);
void csv_row(const struct run *r, long step, int epoch, double loss, double lr, double sps,
             const struct evaluation *ev, const double *own);
void csv_flush(struct csvlog *l);
void csv_window(struct csvlog *l, double t0);
void csv_step(const struct run *r, int ep, long s, const struct strata_metrics *m);
void csv_epoch(const struct run *r, int ep, long done, double ep_time);
double epoch_lr(const struct run *r, int ep);
int csv_close(struct csvlog *l);
void tb_eval(const struct run *r, const struct evaluation *ev, long step);

/* checkpoint.c */
int ckpt_check(struct opts *o, int rank);

int agree_options(struct run *r);
int ckpt_plan_check(struct opts *o);
int export_check(const struct opts *o);
int ckpt_start(struct run *r);
int save_ckpt(struct strata_runtime *rt, const struct opts *o, struct position at);
void ckpt_name(struct position at, char *name, size_t n);
void catch_stop_signals(void);
int stop_requested(void);
void stop_for_limit(void);
int stop_limit(void);
void stop_agree(struct strata_runtime *rt);
int stop_run(struct strata_runtime *rt, const struct opts *o, struct position at);

/* weights.c: --init-weights[-partial], --export-initial, the exports' metadata */
int weights_check(const struct opts *o);
int weights_start(struct run *r);
int export_weights(struct run *r, const char *path);
int weights_evaluate(struct run *r);

/* launch.c: @p entry is the whole run of one process (strata-train.c's), which a spawned
 * process runs again with its rank. */
int spawn_parent(int argc, char **argv, const struct opts *o,
                 int (*entry)(int argc, char **argv, int rank));
int launcher_rule(struct opts *o, int spawned);
int job_size(void);
int job_setup(struct run *r);

/* fault.c */
void fault(int rank, long step);

#endif
