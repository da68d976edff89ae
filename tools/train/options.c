/*
 * strata-train's command line: the options parsed and checked into struct opts (their usage
 * errors and number parsers are usage.c's, below every option file).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kernel/topology.h"
#include "tools/train/train.h"

/* A duration in seconds, in [lo, 1e6]. */
static int parse_seconds(const char *name, const char *s, double lo, double *out)
{
        float v = 0.0f; /* for the compiler: it cannot see that bad() returns 2 */

        if (parse_float_option(name, s, lo, 1e6, &v))
                return 2;
        *out = v;
        return 0;
}

/* An integer option that fits an int. */
static int parse_int(const char *name, const char *s, long lo, long hi, int *out)
{
        long v = 0; /* for the compiler: it cannot see that bad() returns 2 */

        if (parse_long_option(name, s, lo, hi, &v))
                return 2;
        *out = (int)v;
        return 0;
}

/* @p s as the first (0) or the second (1) of two words; -1 when it is neither. */
static int word(const char *s, const char *w0, const char *w1)
{
        if (!strcmp(s, w0))
                return 0;
        return !strcmp(s, w1) ? 1 : -1;
}

/* The HDF5 options' codes: beyond any letter, so they meet no other option's. */
enum { OPT_INPUTS = 0x4801, OPT_TARGETS, OPT_TEST_DATA, OPT_VAL_FRACTION };

/* --processes's code: zero1, zero2 and fsdp over processes strata-train starts. */
enum { OPT_PROCESSES = 0x4901 };

/* The loss options' codes, past every letter. */
enum { OPT_LOSS = 0x100, OPT_HUBER_BETA, OPT_SYNTH_REGRESSION };

/* Invariant mode's codes, past every letter and the others'. */
enum { OPT_INVARIANT = 0x4a01, OPT_CHUNKS };

/* The kernel set's codes, and --no-fusion's. */
enum { OPT_PORTABLE = 0x4c01, OPT_KERNELS, OPT_NO_FUSION };

/* What the tool is and needs, and a fresh --ckpt-dir: past every other code. */
enum { OPT_VERSION = 0x4b01, OPT_PLAN, OPT_OVERWRITE, OPT_ACCUMULATE_REDUCE, OPT_DROP_LAST };

/* Weights in and out (tools/train/weights.c), and --shuffle: past every other code. */
enum { OPT_INIT_WEIGHTS = 0x4d01, OPT_INIT_PARTIAL, OPT_EXPORT_INITIAL, OPT_SHUFFLE,
       OPT_EVALUATE };

/* --init-weights[-partial], --export-initial, --evaluate FILE, --shuffle on|off: 0, 2, -1. */
static int weights_option(int c, const char *s, struct opts *o)
{
        int w;

        switch (c) {
        case OPT_INIT_PARTIAL: o->init_partial = 1; /* fall through */
        case OPT_INIT_WEIGHTS: o->init_weights = s; return 0;
        case OPT_EXPORT_INITIAL: o->export_initial = s; return 0;
        case OPT_EVALUATE: o->evaluate = s; return 0;
        case OPT_SHUFFLE:
                if ((w = word(s, "on", "off")) < 0)
                        return bad("--shuffle: '%s' is not on or off", s);
                o->no_shuffle = w;
                return 0;
        }
        return -1;
}

/* AdamW's betas (issue 58, item 9). */
enum { OPT_BETAS = 0x4f01 };
/* A graph model's mesh (surrogates, decision 0072). */
enum { OPT_MESH = 0x5201 };

/* --invariant, --chunks C: 0, 2 after the message, -1 for another option. */
static int invariant_option(int c, const char *s, struct opts *o)
{
        if (c == OPT_INVARIANT) {
                o->invariant = 1;
                return 0;
        }
        if (c == OPT_CHUNKS)
                return parse_int("chunks", s, 1, 256, &o->chunks);
        return -1;
}

/*
 * --portable, --kernels native|portable|avx512|scalar, --no-fusion: 0, 2 after the message, -1
 * otherwise.
 */
static int kernels_option(int c, const char *s, struct opts *o)
{
        static const char *const names[STRATA_KERNELS_COUNT] = { "native", "portable", "avx512",
                                                                 "scalar" };

        if (c == OPT_PORTABLE) {
                o->kernels = STRATA_KERNELS_PORTABLE;
                return 0;
        }
        if (c == OPT_NO_FUSION) {
                o->no_fusion = 1;
                return 0;
        }
        if (c != OPT_KERNELS)
                return -1;
        for (int i = 0; i < STRATA_KERNELS_COUNT; i++)
                if (!strcmp(s, names[i])) {
                        o->kernels = (enum strata_kernels)i;
                        return 0;
                }
        return bad("--kernels: '%s' is not native, portable, avx512 or scalar", s);
}

/* --loss NAME: the loss table, NULL for ce; 0, or 2 after the message. */
static int loss_option(int c, const char *s, struct opts *o)
{
        static const struct { const char *name; const struct strata_loss_ops *ops; } t[] = {
                { "ce", NULL }, { "mse", &strata_mse }, { "l1", &strata_l1 },
                { "huber", &strata_huber }, { "bce", &strata_bce_with_logits },
        };

        if (c == OPT_HUBER_BETA)
                return parse_float_option("huber-beta", s, 1e-12, 1e6, &o->huber_beta);
        if (c == OPT_SYNTH_REGRESSION)
                return parse_long_option("synthetic-regression", s, 1, 10000000,
                                  &o->synthetic_regression);
        if (c != OPT_LOSS)
                return -1;
        for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
                if (!strcmp(s, t[i].name)) {
                        o->loss = t[i].ops;
                        return 0;
                }
        return bad("--loss: '%s' is not ce, mse, l1, huber or bce", s);
}

static const struct option long_opts[] = {
        { "data", 1, 0, 'd' },      { "model", 1, 0, 'm' },    { "bn", 0, 0, 'B' },
        { "dropout", 1, 0, 'D' },   { "epochs", 1, 0, 'e' },   { "batch", 1, 0, 'b' },
        { "lr", 1, 0, 'l' },        { "momentum", 1, 0, 'M' }, { "optim", 1, 0, 'o' },
        { "weight-decay", 1, 0, 'w' }, { "seed", 1, 0, 's' }, { "strategy", 1, 0, 'S' },
        { "devices", 1, 0, 'n' },   { "json", 0, 0, 'j' },     { "quiet", 0, 0, 'q' },
        { "verbose", 0, 0, 'v' },   { "raw-pixels", 0, 0, 'r' },
        { "sync-bn", 0, 0, 'Y' },   { "accumulate", 1, 0, 'A' },
        { "accumulate-reduce", 1, 0, OPT_ACCUMULATE_REDUCE },
        { "clip-norm", 1, 0, 'C' }, { "clip-value", 1, 0, 'V' },
        { "synthetic", 1, 0, 'y' }, { "help", 0, 0, 'h' },
        { "accelerator", 1, 0, 'a' }, { "tf32", 0, 0, 'T' },
        { "ckpt-dir", 1, 0, 'K' },  { "ckpt-keep", 1, 0, 'k' }, { "resume", 1, 0, 'R' },
        { "export-safetensors", 1, 0, 'E' }, { "ckpt-every-steps", 1, 0, 'c' },
        { "lr-schedule", 1, 0, 'L' }, { "warmup", 1, 0, 'W' },
        { "trace", 1, 0, 't' },     { "trace-events", 1, 0, 'x' },
        { "stall-report", 1, 0, 'z' }, { "timeout", 1, 0, 'O' },
        { "metrics-csv", 1, 0, 'G' }, { "log-every", 1, 0, 'g' },
        { "bind", 1, 0, 'P' },      { "allow-nonfinite", 0, 0, 'N' },
        { "mpi-allreduce", 0, 0, 'Q' }, { "precision", 1, 0, 'p' },
        { "grad-allreduce", 1, 0, 'F' },
        { "inputs", 1, 0, OPT_INPUTS }, { "targets", 1, 0, OPT_TARGETS },
        { "test-data", 1, 0, OPT_TEST_DATA }, { "val-fraction", 1, 0, OPT_VAL_FRACTION },
        { "loss", 1, 0, OPT_LOSS }, { "huber-beta", 1, 0, OPT_HUBER_BETA },
        { "synthetic-regression", 1, 0, OPT_SYNTH_REGRESSION },
        { "activation", 1, 0, 'Z' },
        { "processes", 1, 0, OPT_PROCESSES },
        { "invariant", 0, 0, OPT_INVARIANT }, { "chunks", 1, 0, OPT_CHUNKS },
        { "portable", 0, 0, OPT_PORTABLE }, { "kernels", 1, 0, OPT_KERNELS },
        { "no-fusion", 0, 0, OPT_NO_FUSION },
        { "version", 0, 0, OPT_VERSION }, { "plan", 0, 0, OPT_PLAN },
        { "overwrite", 0, 0, OPT_OVERWRITE }, { "drop-last", 0, 0, OPT_DROP_LAST },
        { "init-weights", 1, 0, OPT_INIT_WEIGHTS },
        { "init-weights-partial", 1, 0, OPT_INIT_PARTIAL },
        { "export-initial", 1, 0, OPT_EXPORT_INITIAL }, { "shuffle", 1, 0, OPT_SHUFFLE },
        { "evaluate", 1, 0, OPT_EVALUATE }, { "betas", 1, 0, OPT_BETAS },
        { "mesh", 1, 0, OPT_MESH },
        { "max-steps", 1, 0, OPT_MAX_STEPS }, { "max-time", 1, 0, OPT_MAX_TIME },
        { "val-every-n-steps", 1, 0, OPT_VAL_EVERY }, { "early-stop", 1, 0, OPT_EARLY_STOP },
        { "monitor", 1, 0, OPT_MONITOR }, { "save-top-k", 1, 0, OPT_SAVE_TOP_K },
        { "tensorboard", 1, 0, OPT_TENSORBOARD }, { "fast-dev-run", 2, 0, OPT_FAST_DEV_RUN },
        { "limit-train-batches", 1, 0, OPT_LIMIT_TRAIN },
        { "limit-val-batches", 1, 0, OPT_LIMIT_VAL },
        { "predict", 1, 0, OPT_PREDICT }, { "predictions", 1, 0, OPT_PREDICTIONS },
        { 0, 0, 0, 0 },
};

/* The options that take a number: 0, or 2 after the message. */
static int number_option(int c, const char *s, struct opts *o)
{
        switch (c) {
        case 'D': return parse_float_option("dropout", s, 0.0, 0.99, &o->dropout);
        case 'e': return parse_int("epochs", s, 1, 100000, &o->epochs);
        case 'b': return parse_int("batch", s, 1, 1 << 24, &o->batch);
        case 'l': return parse_float_option("lr", s, 1e-12, 1e6, &o->lr);
        case 'M':
                o->given |= GIVEN_MOMENTUM;
                return parse_float_option("momentum", s, 0.0, 0.999999, &o->momentum);
        case 'w': return parse_float_option("weight-decay", s, 0.0, 1e6, &o->wd);
        case 'n': o->devices_set = 1; return parse_int("devices", s, 1, 64, &o->devices);
        case OPT_PROCESSES: return parse_int("processes", s, 1, 64, &o->processes);
        case 'y': return parse_long_option("synthetic", s, 1, 10000000, &o->synthetic);
        case 'A': return parse_int("accumulate", s, 1, 4096, &o->accumulate);
        case 'C': return parse_float_option("clip-norm", s, 1e-12, 1e12, &o->clip_norm);
        case 'V': return parse_float_option("clip-value", s, 1e-12, 1e12, &o->clip_value);
        case 'W': return parse_long_option("warmup", s, 0, 1L << 40, &o->warmup);
        case 'c': return parse_long_option("ckpt-every-steps", s, 1, 1L << 40, &o->ckpt_every);
        case 'x': return parse_long_option("trace-events", s, 16, 1L << 26, &o->trace_events);
        case 'g': return parse_long_option("log-every", s, 1, 1L << 40, &o->log_every);
        case 'O': return parse_seconds("timeout", s, 0.001, &o->timeout_s);
        case 'k': return parse_int("ckpt-keep", s, 1, 64, &o->ckpt_keep);
        }
        return -1;
}

/* --activation: the module kind between the Linears, or none (Linears only). */
static int activation_option(const char *s, struct opts *o)
{
        static const char *const names[] = { "relu", "tanh", "sigmoid", "gelu", "gelu-tanh",
                                             "silu", "leaky-relu" };

        o->activation = NULL;
        if (!strcmp(s, "none"))
                return 0;
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                if (!strcmp(s, names[i]))
                        o->activation = strata_module_ops_by_name(s);
        if (!o->activation)
                return bad("--activation: '%s' is not relu, tanh, sigmoid, gelu, gelu-tanh, "
                           "silu, leaky-relu or none", s);
        return 0;
}

/* The options that name one of a few choices. */
static int choice_option(int c, const char *s, struct opts *o)
{
        int w;

        switch (c) {
        case 'Z':
                o->given |= GIVEN_ACTIVATION;
                return activation_option(s, o);
        case 'a':
                if ((w = word(s, "cpu", "cuda")) < 0)
                        return bad("--accelerator: '%s' is not cpu or cuda", s);
                o->accel = w ? STRATA_ACCEL_CUDA : STRATA_ACCEL_CPU;
                return 0;
        case 'o':
                if ((w = word(s, "sgd", "adamw")) < 0)
                        return bad("--optim: '%s' is not sgd or adamw", s);
                o->optim = w ? STRATA_OPTIM_ADAMW : STRATA_OPTIM_SGD;
                return 0;
        case 'F':
                if ((w = word(s, "32", "bf16")) < 0)
                        return bad("--grad-allreduce: '%s' is not 32 or bf16", s);
                o->grad_allreduce = w ? STRATA_BF16 : STRATA_F32;
                return 0;
        case OPT_ACCUMULATE_REDUCE:
                if ((w = word(s, "window", "each")) < 0)
                        return bad("--accumulate-reduce: '%s' is not window or each", s);
                o->accumulate_reduce = w ? STRATA_ACCUMULATE_REDUCE_EACH
                                         : STRATA_ACCUMULATE_REDUCE_WINDOW;
                return 0;
        case 'P':
                if ((w = word(s, "cores", "none")) < 0)
                        return bad("--bind: '%s' is not cores or none", s);
                o->bind = w ? STRATA_BIND_NONE : STRATA_BIND_CORES;
                return 0;
        case 'p':
                if (strata_precision_parse(s, &o->precision))
                        return bad("--precision: '%s' is not 32, bf16-mixed or 16-mixed", s);
                return 0;
        case 'S':
                if (strata_strategy_from_name(s, &o->strategy))
                        return bad("--strategy: '%s' is not single, dp, ddp, zero1, zero2, "
                                   "fsdp, spawn or mpi", s);
                o->strategy_set = 1;
                return 0;
        }
        return -1;
}

/* The flags and the options that take a path or a specification as it is. */
static int plain_option(int c, const char *s, struct opts *o)
{
        switch (c) {
        case 'B': o->bn = 1; break;
        case 'j': o->json = 1; break;
        case 'q': o->quiet = 1; break;
        case 'v': o->verbose = 1; break;
        case 'r': o->raw = 1; break;
        case 'Y': o->sync_bn = 1; break;
        case 'T': o->tf32 = 1; break;
        case 'N': o->allow_nonfinite = 1; break;
        case 'Q': o->mpi_allreduce = 1; break;
        case OPT_PLAN: o->plan = 1; break;
        case OPT_OVERWRITE: o->overwrite = 1; break;
        case OPT_DROP_LAST: o->drop_last = 1; break;
        case 'd': o->data = s; break;
        case 'm': o->model = s; o->model_set = 1; break;
        case 'K': o->ckpt_dir = s; break;
        case 'R': o->resume = s; break;
        case 'E': o->export_st = s; break;
        case 'L': o->schedule = s; break;
        case 't': o->trace = s; break;
        case 'G': o->metrics_csv = s; break;
        default: return -1;
        }
        return 0;
}

/* --data FILE.h5's options: the datasets, and what evaluates. */
static int h5_option(int c, const char *s, struct opts *o)
{
        switch (c) {
        case OPT_INPUTS: o->inputs = s; return 0;
        case OPT_TARGETS: o->targets = s; return 0;
        case OPT_TEST_DATA: o->test_data = s; return 0;
        case OPT_MESH: o->mesh = s; return 0;
        case OPT_VAL_FRACTION:
                return parse_float_option("val-fraction", s, 1e-6, 0.999999, &o->val_fraction);
        }
        return -1;
}

/* The HDF5 options go together: both datasets, at most one evaluation set, no --synthetic. */
static int check_h5(const struct opts *o)
{
        struct stat st;

        if (!o->inputs != !o->targets)
                return bad("--inputs and --targets name the two datasets of an HDF5 --data "
                           "file: give both");
        if (!o->inputs && o->test_data)
                return bad("--test-data needs an HDF5 --data file with --inputs and --targets");
        if (o->inputs && (o->synthetic || o->synthetic_regression))
                return bad("--synthetic and --inputs: one data set at a time");
        if (!o->inputs && stat(o->data, &st) == 0 && S_ISREG(st.st_mode))
                return bad("--data %s: is not a directory (of IDX files); an HDF5 file needs "
                           "--inputs NAME and --targets NAME", o->data);
        return 0;
}

/* --betas B1,B2: AdamW's moment decays, each in (0, 1). */
static int betas_option(const char *s, struct opts *o)
{
        float b1, b2;
        char tail;

        if (sscanf(s, "%f,%f%c", &b1, &b2, &tail) != 2 || !(b1 > 0.0f && b1 < 1.0f) ||
            !(b2 > 0.0f && b2 < 1.0f))
                return bad("--betas: '%s' is not two numbers in (0, 1) like 0.9,0.999", s);
        o->beta1 = b1;
        o->beta2 = b2;
        o->given |= GIVEN_BETAS;
        return 0;
}

/* One option getopt returned: 0, 2 after the message, or --help's exit. */
static int parse_option(int c, char **argv, struct opts *o)
{
        int rc;

        if (c == 'h') {
                usage(stdout);
                exit(0);
        }
        if (c == OPT_VERSION) {
                unsigned v = strata_version();

                printf("strata-train %s (libstrata %u.%u.%u)\n", STRATA_VERSION_STRING,
                       v / 10000, v / 100 % 100, v % 100);
                exit(0);
        }
        if (c == 's') {
                long v = 0; /* for the compiler: it cannot see that bad() returns 2 */

                if (parse_long_option("seed", optarg, 0, LONG_MAX, &v))
                        return 2;
                o->seed = (uint64_t)v;
                return 0;
        }
        if (c == OPT_BETAS)
                return betas_option(optarg, o);
        /* --fast-dev-run N as Lightning's users write it: a count in the next word too */
        if (c == OPT_FAST_DEV_RUN && !optarg && argv[optind] &&
            strspn(argv[optind], "0123456789") == strlen(argv[optind]) && argv[optind][0])
                return trial_option(c, argv[optind++], o);
        if (c == 'z') {
                rc = parse_seconds("stall-report", optarg, 0.0, &o->stall_s);
                if (!rc && o->stall_s == 0.0)
                        o->stall_s = -1.0; /* never */
                return rc;
        }
        if ((rc = number_option(c, optarg, o)) >= 0 || (rc = choice_option(c, optarg, o)) >= 0 ||
            (rc = plain_option(c, optarg, o)) >= 0 || (rc = loss_option(c, optarg, o)) >= 0 ||
            (rc = h5_option(c, optarg, o)) >= 0 || (rc = invariant_option(c, optarg, o)) >= 0 ||
            (rc = kernels_option(c, optarg, o)) >= 0 || (rc = weights_option(c, optarg, o)) >= 0 ||
            (rc = trainer_option(c, optarg, o)) >= 0 || (rc = predict_option(c, optarg, o)) >= 0)
                return rc;
        return bad("unknown or incomplete option '%s'; see --help", argv[optind - 1]);
}

/* What depends on several options: the strategy and the number of devices by default. */
static int check_devices(struct opts *o)
{
        if (o->accel == STRATA_ACCEL_CUDA && !o->strategy_set)
                o->strategy = STRATA_STRATEGY_SINGLE; /* one GPU: nothing to split */
        if (o->predict && ((o->strategy_set && o->strategy != STRATA_STRATEGY_SINGLE) ||
                           o->devices > 1 || o->processes > 1))
                return bad("--predict runs an inference-only runtime on one device "
                           "(--strategy single)");
        if (o->predict)
                o->strategy = STRATA_STRATEGY_SINGLE;
        if (!o->devices_set && o->strategy != STRATA_STRATEGY_SINGLE &&
            o->accel == STRATA_ACCEL_CPU) {
                struct strata__topology t;

                /* Default: one device per core of the CPU set this process was given. */
                if (strata__topology_read(&t) == STRATA_OK && t.allowed_cores > 0)
                        o->devices = t.allowed_cores < 64 ? t.allowed_cores : 64;
        }
        if (o->devices > 1 && o->strategy == STRATA_STRATEGY_SINGLE)
                return bad("--devices > 1 needs --strategy dp, ddp, zero1, zero2 or fsdp");
        if (o->processes > 1 && o->strategy != STRATA_STRATEGY_ZERO1 &&
            o->strategy != STRATA_STRATEGY_ZERO2 && o->strategy != STRATA_STRATEGY_FSDP)
                return bad("--processes N starts zero1, zero2 or fsdp over N processes (spawn: "
                           "--devices N; mpi: the launcher's)");
        return 0;
}

/*
 * --accumulate-reduce each where it changes nothing: one micro-batch a step (each is the
 * window then), or invariant mode (its chunks' tree sums every micro-batch across devices in
 * either order, decision 0047). A warning on stderr; the run goes on.
 */
static void warn_reduce_each(const struct opts *o)
{
        if (o->accumulate_reduce != STRATA_ACCUMULATE_REDUCE_EACH)
                return;
        if (o->accumulate <= 1)
                fprintf(stderr, "strata-train: warning: --accumulate-reduce each has no effect "
                                "without --accumulate N > 1\n");
        else if (o->invariant)
                fprintf(stderr, "strata-train: warning: --accumulate-reduce each has no effect "
                                "with --invariant (its sums are the same in either order)\n");
}

/* One warning: "strata-train: warning: OPTION is ignored: WHY". */
static void ignored(const char *option, const char *why)
{
        fprintf(stderr, "strata-train: warning: %s is ignored: %s\n", option, why);
}

/**
 * @brief Options given that the run ignores, each named once with the reason (issue 58,
 *        item 9): by the job's first process, once the job is known.
 */
void warn_ignored(const struct opts *o)
{
        int line = layers_given(o->model);

        if (o->optim == STRATA_OPTIM_ADAMW && (o->given & GIVEN_MOMENTUM))
                ignored("--momentum", "AdamW has no momentum term (its moments: --betas)");
        if (o->optim == STRATA_OPTIM_SGD && (o->given & GIVEN_BETAS))
                ignored("--betas", "they are AdamW's (--optim adamw); SGD takes --momentum");
        if (o->tf32 && o->accel == STRATA_ACCEL_CPU)
                ignored("--tf32", "TF32 is a GPU's tensor-core format; the CPU computes fp32");
        if (o->huber_beta > 0.0f && o->loss != &strata_huber)
                ignored("--huber-beta", "it is the huber loss's (--loss huber)");
        if (o->sync_bn && (line ? !strstr(o->model, "batchnorm") : !o->bn))
                ignored("--sync-bn", "the model has no BatchNorm (--bn, or batchnorm in the "
                                     "--model line)");
        if (line && o->bn)
                ignored("--bn", "a --model line names its modules; add batchnorm to it");
        if (line && o->dropout > 0.0f)
                ignored("--dropout", "a --model line names its modules; add dropout(P) to it");
        if (line && (o->given & GIVEN_ACTIVATION))
                ignored("--activation", "a --model line names its modules and activations");
        trial_note(o);
}

/** @brief The command line into @p o: 0, or 2 after the message (--help exits 0). */
int parse_args(int argc, char **argv, struct opts *o)
{
        int c;

        *o = (struct opts){ .data = DEFAULT_DATA, .model = "784-256-128-10", .epochs = 10,
                            .batch = 128, .lr = 0.05f, .momentum = 0.9f, .devices = 1,
                            .strategy = STRATA_STRATEGY_DDP, .accumulate = 1,
                            .ckpt_keep = 3, .log_every = 50 };
        o->activation = &strata_relu;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
                if (parse_option(c, argv, o))
                        return 2;
        }
        if (optind < argc)
                return bad("unexpected argument '%s'", argv[optind]);
        if (check_h5(o) || trial_apply(o))
                return 2;
        warn_reduce_each(o);
        return check_devices(o);
}
