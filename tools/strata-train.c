/*
 * strata-train: train an MLP on Fashion-MNIST (or synthetic data of the same shape) with any
 * Strata strategy, printing progress per epoch and a summary. Exit status 2 on bad input.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "strata/strata.h"
#include "arch/simd.h"
#include "kernel/topology.h"
#include "tools/timing.h"
#include "tools/heapcount.h"
#include "tools/widths.h"

#define MAX_MODULES 64
#define DEFAULT_DATA "/usr/share/datasets/fashion-mnist"

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
        float clip_norm, clip_value;
        int strategy_set, devices_set;
        long synthetic;
        enum strata_accelerator accel;
        int tf32;
        const char *ckpt_dir;   /* save at every epoch end */
        int ckpt_keep;          /* checkpoints kept in ckpt_dir */
        const char *resume;     /* a checkpoint file, or a directory: its latest */
        const char *export_st;  /* safetensors of the final weights */
        long ckpt_every;        /* also checkpoint every N batches (0: epoch ends only) */
        const char *schedule;   /* constant | step:N:GAMMA | cosine[:MIN] */
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
};

/* The metrics log (--metrics-csv): rows of the logging steps and of each epoch. */
struct csvlog {
        FILE *f;
        const char *path;
        int failed;             /* a write failed: reported once, the exit status says so */
        long rows_steps;        /* batches in the current logging window */
        double loss_sum, t0;    /* over the window */
        char buf[1 << 14];      /* the FILE's buffer: logging never allocates */
};

/* What strata-train keeps in a checkpoint's application block. */
struct app_state {
        char magic[8];          /* "sttrain" */
        uint32_t epochs_done;
        uint32_t batch;
        uint64_t seed;
        uint32_t step_in_epoch; /* batches of the next epoch already trained */
        uint32_t pad;
        double loss_sum;        /* their summed loss, for the epoch's train_loss */
};

/* Where a run stands, for checkpoints and resumes. */
struct position {
        int epoch;              /* epochs completed */
        long step;              /* batches of the next epoch trained */
        double loss_sum;
};

/* SIGTERM / SIGUSR1 (a scheduler's warning) and SIGINT: stop at the next step boundary. */
static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
        stop_signal = sig;
}

static void usage(FILE *f)
{
        fprintf(f,
                "usage: strata-train [options]\n"
                "  --data DIR          Fashion-MNIST IDX files (default " DEFAULT_DATA ")\n"
                "  --synthetic N       use N synthetic samples of the same shape instead\n"
                "  --model SPEC        layer widths, e.g. 784-256-128-10 (default)\n"
                "  --bn                BatchNorm1d after each hidden linear\n"
                "  --dropout P         dropout after each hidden activation\n"
                "  --epochs N          (default 10)      --batch N   global batch (default 128)\n"
                "  --lr X              (default 0.05)    --momentum X   (default 0.9)\n"
                "  --optim sgd|adamw   (default sgd)     --weight-decay X (default 0)\n"
                "  --seed N            (default 0)\n"
                "  --lr-schedule S     constant (default), step:N:GAMMA (decay every N optimizer\n"
                "                      steps), cosine[:MIN] (to MIN over the run)\n"
                "  --warmup N          linear warm-up over the first N optimizer steps\n"
                "  --raw-pixels        features = pixel / 255 (default: standardised with the\n"
                "                      training set's mean and std)\n"
                "  --strategy single|dp|ddp|spawn|mpi (default ddp) --devices N (default: one per\n"
                "                      core of this process's CPU set, e.g. under taskset).\n"
                "                      spawn: N processes of one device each; mpi: under mpirun\n"
                "                      or srun, N devices per process (best one process a node)\n"
                "  --precision P       32 (default), bf16-mixed or 16-mixed (GEMM operands bf16 or\n"
                "                      f16, f32 master weights; 16-mixed scales the loss)\n"
                "  --grad-allreduce T  ddp, spawn, mpi: gradients all-reduced in 32 (default) or\n"
                "                      bf16 (half the bytes; rounded before and after the sum)\n"
                "  --mpi-allreduce     mpi: gradients through MPI_Allreduce (faster; its order is\n"
                "                      Open MPI's, so results are not bitwise reproducible)\n"
                "  --accelerator cpu|cuda (default cpu; cuda defaults to single, and dp/ddp run\n"
                "                 --devices logical devices over the GPUs, device d on GPU d mod count)\n"
                "  --tf32              CUDA GEMMs may use TF32 tensor cores\n"
                "  --sync-bn           BatchNorm statistics over all devices\n"
                "  --accumulate K      optimizer step every K batches (no_sync before)\n"
                "  --clip-norm X       clip gradients to global norm X\n"
                "  --clip-value X      clip gradients to [-X, X]\n"
                "  --ckpt-dir DIR      checkpoint at every epoch end (DIR/epoch-N.ckpt, DIR/latest)\n"
                "  --ckpt-keep K       checkpoints kept in DIR (default 3)\n"
                "  --ckpt-every-steps N  also checkpoint every N batches (a multiple of K)\n"
                "  --resume PATH       continue from a checkpoint file, or DIR's latest\n"
                "  (SIGTERM or SIGUSR1 checkpoint into --ckpt-dir at the next optimizer step\n"
                "   and exit 128+signal; SIGINT stops there with a summary)\n"
                "  --export-safetensors FILE  the final weights for PyTorch\n"
                "  --trace FILE        timeline of every device (Chrome trace JSON: Perfetto,\n"
                "                      chrome://tracing); --trace-events N buffered per device\n"
                "  --metrics-csv FILE  step, epoch, train_loss, lr, samples_per_s, test_acc rows\n"
                "                      (every --log-every N batches, default 50, and each epoch);\n"
                "                      tools/strata-plot FILE draws them\n"
                "  --bind cores|none   pin each device thread to a core of this process's CPU\n"
                "                      set (default), or leave placement to the OS\n"
                "  --allow-nonfinite   keep training when the loss becomes NaN or infinite\n"
                "                      (default: stop with an error naming the step)\n"
                "  --timeout S         bound on every wait between devices (default 300)\n"
                "  --stall-report S    report a device waiting S seconds at a collective, and\n"
                "                      where the late devices are (default 60; 0: never)\n"
                "  --json              one JSON object per epoch and a final one\n"
                "  --quiet             only the final summary (no progress bar, no epoch lines)\n"
                "  --verbose           placement, memory\n"
                "  --help\n");
}

static int bad(const char *fmt, const char *a, const char *b)
{
        fprintf(stderr, "strata-train: ");
        fprintf(stderr, fmt, a, b);
        fprintf(stderr, "\n");
        return 2;
}

static int parse_long(const char *name, const char *s, long lo, long hi, long *out)
{
        char *end;
        long v;

        errno = 0;
        v = strtol(s, &end, 10);
        if (errno || end == s || *end || v < lo || v > hi) {
                fprintf(stderr, "strata-train: --%s: '%s' is not an integer in [%ld, %ld]\n",
                        name, s, lo, hi);
                return 2;
        }
        *out = v;
        return 0;
}

static int parse_float(const char *name, const char *s, double lo, double hi, float *out)
{
        char *end;
        double v;

        errno = 0;
        v = strtod(s, &end);
        if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi) {
                fprintf(stderr, "strata-train: --%s: '%s' is not a number in [%g, %g]\n", name, s,
                        lo, hi);
                return 2;
        }
        *out = (float)v;
        return 0;
}

/* A duration in seconds, in [lo, 1e6]. */
static int parse_seconds(const char *name, const char *s, double lo, double *out)
{
        float v;

        if (parse_float(name, s, lo, 1e6, &v))
                return 2;
        *out = v;
        return 0;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
        static const struct option lo[] = {
                { "data", 1, 0, 'd' },      { "model", 1, 0, 'm' },    { "bn", 0, 0, 'B' },
                { "dropout", 1, 0, 'D' },   { "epochs", 1, 0, 'e' },   { "batch", 1, 0, 'b' },
                { "lr", 1, 0, 'l' },        { "momentum", 1, 0, 'M' }, { "optim", 1, 0, 'o' },
                { "weight-decay", 1, 0, 'w' }, { "seed", 1, 0, 's' }, { "strategy", 1, 0, 'S' },
                { "devices", 1, 0, 'n' },   { "json", 0, 0, 'j' },     { "quiet", 0, 0, 'q' },
                { "verbose", 0, 0, 'v' },   { "raw-pixels", 0, 0, 'r' },
                { "sync-bn", 0, 0, 'Y' },   { "accumulate", 1, 0, 'A' },
                { "clip-norm", 1, 0, 'C' }, { "clip-value", 1, 0, 'V' },   { "synthetic", 1, 0, 'y' }, { "help", 0, 0, 'h' },
                { "accelerator", 1, 0, 'a' }, { "tf32", 0, 0, 'T' },
                { "ckpt-dir", 1, 0, 'K' },  { "ckpt-keep", 1, 0, 'k' }, { "resume", 1, 0, 'R' },
                { "export-safetensors", 1, 0, 'E' }, { "ckpt-every-steps", 1, 0, 'c' },
                { "lr-schedule", 1, 0, 'L' }, { "warmup", 1, 0, 'W' },
                { "trace", 1, 0, 't' },     { "trace-events", 1, 0, 'x' },
                { "stall-report", 1, 0, 'z' }, { "timeout", 1, 0, 'O' },
                { "metrics-csv", 1, 0, 'G' }, { "log-every", 1, 0, 'g' },
                { "bind", 1, 0, 'P' },      { "allow-nonfinite", 0, 0, 'N' },
                { "mpi-allreduce", 0, 0, 'Q' }, { "precision", 1, 0, 'p' },
                { "grad-allreduce", 1, 0, 'F' }, { 0, 0, 0, 0 },
        };
        long v;
        int c;

        *o = (struct opts){ .data = DEFAULT_DATA, .model = "784-256-128-10", .epochs = 10,
                            .batch = 128, .lr = 0.05f, .momentum = 0.9f, .devices = 1,
                            .strategy = STRATA_STRATEGY_DDP, .accumulate = 1,
                            .ckpt_keep = 3, .log_every = 50 };
        opterr = 0;
        while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
                switch (c) {
                case 'd': o->data = optarg; break;
                case 'm': o->model = optarg; break;
                case 'B': o->bn = 1; break;
                case 'D': if (parse_float("dropout", optarg, 0.0, 0.99, &o->dropout)) return 2; break;
                case 'e': if (parse_long("epochs", optarg, 1, 100000, &v)) return 2; o->epochs = (int)v; break;
                case 'b': if (parse_long("batch", optarg, 1, 1 << 24, &v)) return 2; o->batch = (int)v; break;
                case 'l': if (parse_float("lr", optarg, 1e-12, 1e6, &o->lr)) return 2; break;
                case 'M': if (parse_float("momentum", optarg, 0.0, 0.999999, &o->momentum)) return 2; break;
                case 'w': if (parse_float("weight-decay", optarg, 0.0, 1e6, &o->wd)) return 2; break;
                case 's': if (parse_long("seed", optarg, 0, LONG_MAX, &v)) return 2; o->seed = (uint64_t)v; break;
                case 'n': if (parse_long("devices", optarg, 1, 64, &v)) return 2; o->devices = (int)v; o->devices_set = 1; break;
                case 'y': if (parse_long("synthetic", optarg, 1, 10000000, &v)) return 2; o->synthetic = v; break;
                case 'j': o->json = 1; break;
                case 'q': o->quiet = 1; break;
                case 'v': o->verbose = 1; break;
                case 'r': o->raw = 1; break;
                case 'Y': o->sync_bn = 1; break;
                case 'A': if (parse_long("accumulate", optarg, 1, 4096, &v)) return 2; o->accumulate = (int)v; break;
                case 'C': if (parse_float("clip-norm", optarg, 1e-12, 1e12, &o->clip_norm)) return 2; break;
                case 'V': if (parse_float("clip-value", optarg, 1e-12, 1e12, &o->clip_value)) return 2; break;
                case 'h': usage(stdout); exit(0);
                case 'T': o->tf32 = 1; break;
                case 'a':
                        if (!strcmp(optarg, "cpu")) o->accel = STRATA_ACCEL_CPU;
                        else if (!strcmp(optarg, "cuda")) o->accel = STRATA_ACCEL_CUDA;
                        else return bad("--accelerator: '%s' is not cpu or cuda%s", optarg, "");
                        break;
                case 'o':
                        if (!strcmp(optarg, "sgd")) o->optim = STRATA_OPTIM_SGD;
                        else if (!strcmp(optarg, "adamw")) o->optim = STRATA_OPTIM_ADAMW;
                        else return bad("--optim: '%s' is not sgd or adamw%s", optarg, "");
                        break;
                case 'K': o->ckpt_dir = optarg; break;
                case 'R': o->resume = optarg; break;
                case 'E': o->export_st = optarg; break;
                case 'L': o->schedule = optarg; break;
                case 'W': if (parse_long("warmup", optarg, 0, 1L << 40, &v)) return 2; o->warmup = v; break;
                case 'c': if (parse_long("ckpt-every-steps", optarg, 1, 1L << 40, &v)) return 2; o->ckpt_every = v; break;
                case 't': o->trace = optarg; break;
                case 'N': o->allow_nonfinite = 1; break;
                case 'Q': o->mpi_allreduce = 1; break;
                case 'p':
                        if (strata_precision_parse(optarg, &o->precision))
                                return bad("--precision: '%s' is not 32, bf16-mixed or "
                                           "16-mixed%s", optarg, "");
                        break;
                case 'F':
                        if (!strcmp(optarg, "32")) o->grad_allreduce = STRATA_F32;
                        else if (!strcmp(optarg, "bf16")) o->grad_allreduce = STRATA_BF16;
                        else return bad("--grad-allreduce: '%s' is not 32 or bf16%s", optarg, "");
                        break;
                case 'P':
                        if (!strcmp(optarg, "cores")) o->bind = STRATA_BIND_CORES;
                        else if (!strcmp(optarg, "none")) o->bind = STRATA_BIND_NONE;
                        else return bad("--bind: '%s' is not cores or none%s", optarg, "");
                        break;
                case 'x': if (parse_long("trace-events", optarg, 16, 1L << 26, &v)) return 2; o->trace_events = v; break;
                case 'G': o->metrics_csv = optarg; break;
                case 'g': if (parse_long("log-every", optarg, 1, 1L << 40, &v)) return 2; o->log_every = v; break;
                case 'O': if (parse_seconds("timeout", optarg, 0.001, &o->timeout_s)) return 2; break;
                case 'z':
                        if (parse_seconds("stall-report", optarg, 0.0, &o->stall_s)) return 2;
                        if (o->stall_s == 0.0) o->stall_s = -1.0; /* never */
                        break;
                case 'k': if (parse_long("ckpt-keep", optarg, 1, 64, &v)) return 2; o->ckpt_keep = (int)v; break;
                case 'S':
                        if (strata_strategy_from_name(optarg, &o->strategy))
                                return bad("--strategy: '%s' is not single, dp, ddp, spawn or "
                                           "mpi%s", optarg, "");
                        o->strategy_set = 1;
                        break;
                default:
                        return bad("unknown or incomplete option '%s'%s", argv[optind - 1], "; see --help");
                }
        }
        if (optind < argc)
                return bad("unexpected argument '%s'%s", argv[optind], "");
        if (o->accel == STRATA_ACCEL_CUDA && !o->strategy_set)
                o->strategy = STRATA_STRATEGY_SINGLE; /* one GPU: nothing to split */
        if (!o->devices_set && o->strategy != STRATA_STRATEGY_SINGLE &&
            o->accel == STRATA_ACCEL_CPU) {
                struct strata_topology t;

                /* Default: one device per core of the CPU set this process was given. */
                if (strata_topology_read(&t) == STRATA_OK && t.allowed_cores > 0)
                        o->devices = t.allowed_cores < 64 ? t.allowed_cores : 64;
        }
        if (o->devices > 1 && o->strategy == STRATA_STRATEGY_SINGLE)
                return bad("--devices > 1 needs --strategy dp or ddp%s%s", "", "");
        return 0;
}



static int evaluate(struct strata_runtime *rt, struct strata_loader *l, const uint32_t *idx,
                    uint32_t n, double *acc)
{
        struct strata_batch b;
        struct strata_metrics m;
        long correct = 0, rows = 0;

        strata_loader_reset(l, idx, n);
        while (strata_loader_next_indexed(l, &b)) {
                int rc = strata_eval_step(rt, &b, &m);

                if (rc)
                        return rc;
                correct += m.correct;
                rows += m.rows;
        }
        *acc = rows ? (double)correct / (double)rows : 0.0;
        return 0;
}

/*
 * The progress bar of a terminal: one line per epoch, rewritten in place (step/steps, mean
 * loss so far, samples/s, time left in the epoch).
 */
static void progress(int epoch, int epochs, long step, long steps, double loss, double sps,
                     double eta)
{
        int width = 24, done = (int)(width * step / (steps ? steps : 1));
        char bar[32];

        for (int i = 0; i < width; i++)
                bar[i] = i < done ? '=' : (i == done ? '>' : ' ');
        bar[width] = '\0';
        printf("\repoch %d/%d [%s] %ld/%ld  loss %.4f  %.0f samples/s  ETA %.0fs\033[K", epoch,
               epochs, bar, step, steps, loss, sps, eta);
        fflush(stdout);
}

/*
 * The memory this process may use: physical memory, the address-space limit (ulimit -v) and
 * the cgroup's limit (memory.max, v2), whichever is least; @p why says which one it is.
 */
static size_t memory_limit(char *why, size_t n)
{
        long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
        size_t lim = pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz : SIZE_MAX;
        struct rlimit rl;
        FILE *f;

        snprintf(why, n, "the machine has %zu bytes", lim);
        if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
            (size_t)rl.rlim_cur < lim) {
                lim = (size_t)rl.rlim_cur;
                snprintf(why, n, "the address-space limit (ulimit -v) is %zu bytes", lim);
        }
        f = fopen("/sys/fs/cgroup/memory.max", "r");
        if (f) {
                unsigned long long v;

                if (fscanf(f, "%llu", &v) == 1 && (size_t)v < lim) {
                        lim = (size_t)v;
                        snprintf(why, n, "the cgroup's memory.max is %zu bytes", lim);
                }
                fclose(f);
        }
        return lim;
}

/* A number for JSON: non-finite values are null (JSON has no NaN or Infinity). */
static const char *json_num(double v, const char *fmt, char *buf)
{
        if (!isfinite(v))
                return "null";
        snprintf(buf, 32, fmt, v);
        return buf;
}

/* Flush stdout; on a write error (disk full, closed pipe) say so once. 1 when it failed. */
static int stdout_failed(void)
{
        static int said;

        if (fflush(stdout) == 0 && !ferror(stdout))
                return 0;
        if (!said++)
                fprintf(stderr, "strata-train: writing the results to stdout failed: %s\n",
                        strerror(errno));
        return 1;
}

/* --metrics-csv: a failed write is reported once; the run goes on, the exit status says it. */
static void csv_check(struct csvlog *l, int rc)
{
        if (rc >= 0 || l->failed)
                return;
        l->failed = 1;
        fprintf(stderr, "strata-train: --metrics-csv %s: write failed: %s; metrics logging "
                        "stopped\n", l->path, strerror(errno));
}

static void csv_row(struct csvlog *l, long step, int epoch, double loss, double lr, double sps,
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

static void csv_flush(struct csvlog *l)
{
        if (l->f && !l->failed)
                csv_check(l, fflush(l->f) == 0 && !ferror(l->f) ? 0 : -1);
}

/* Create or (resuming) append to the log; a new file starts with the header. */
static int csv_open(struct csvlog *l, const char *path, int append)
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

/*
 * --lr-schedule and --warmup into the optimizer; cosine anneals over the run's optimizer
 * steps after the warm-up. Returns 2 (with a message) on a bad specification.
 */
static int set_schedule(const struct opts *o, long steps_per_epoch, struct strata_optim *opt)
{
        const char *s = o->schedule ? o->schedule : "constant";
        long total = steps_per_epoch * o->epochs / o->accumulate;
        unsigned long long n;
        char tail;
        float x;

        opt->warmup = (uint64_t)o->warmup;
        if (!strcmp(s, "constant"))
                return 0;
        if (sscanf(s, "step:%llu:%f%c", &n, &x, &tail) == 2) {
                opt->schedule = STRATA_LR_STEP;
                opt->step_size = n;
                opt->gamma = x;
        } else if (!strcmp(s, "cosine") || sscanf(s, "cosine:%f%c", &x, &tail) == 1) {
                opt->schedule = STRATA_LR_COSINE;
                opt->lr_min = strcmp(s, "cosine") ? x : 0.0f;
                opt->t_max = total > o->warmup ? (uint64_t)(total - o->warmup) : 1;
        } else {
                return bad("--lr-schedule: '%s' is not constant, step:N:GAMMA or cosine[:MIN]%s",
                           s, "");
        }
        if (strata_optim_check(opt))
                return bad("--lr-schedule: %s%s", strata_last_error(), "");
        return 0;
}

/* DIR/latest names the newest checkpoint; written atomically, like the checkpoints. */
static int write_latest(const char *dir, const char *name)
{
        const struct strata_checkpoint_io *io = strata_checkpoint_file_io();
        static struct strata_ckpt_handle h;
        char path[STRATA_CKPT_PATH_MAX];
        int rc;

        snprintf(path, sizeof(path), "%s/latest", dir);
        STRATA_TRY(io->create(io->ctx, path, &h));
        rc = io->write(&h, name, strlen(name));
        if (rc == STRATA_OK)
                rc = io->write(&h, "\n", 1);
        if (rc != STRATA_OK) {
                io->abort(&h);
                return rc;
        }
        return io->commit(&h);
}

/*
 * Save DIR/epoch-E.ckpt (or DIR/epoch-E-step-S.ckpt inside an epoch), point DIR/latest at it,
 * and remove the checkpoint that falls out of the last --ckpt-keep.
 */
static int save_ckpt(struct strata_runtime *rt, const struct opts *o, struct position at)
{
        static char kept[64][64];
        static int nkept;
        struct app_state a = { .magic = "sttrain", .epochs_done = (uint32_t)at.epoch,
                               .batch = (uint32_t)o->batch, .seed = o->seed,
                               .step_in_epoch = (uint32_t)at.step, .loss_sum = at.loss_sum };
        char *name = kept[nkept % o->ckpt_keep], path[STRATA_CKPT_PATH_MAX];

        if (nkept >= o->ckpt_keep) {
                snprintf(path, sizeof(path), "%s/%s", o->ckpt_dir, name);
                STRATA_TRY(strata_checkpoint_file_io()->remove(NULL, path));
        }
        if (at.step)
                snprintf(name, 64, "epoch-%d-step-%ld.ckpt", at.epoch + 1, at.step);
        else
                snprintf(name, 64, "epoch-%d.ckpt", at.epoch);
        snprintf(path, sizeof(path), "%s/%s", o->ckpt_dir, name);
        STRATA_TRY(strata_save_checkpoint(rt, path, &a, sizeof(a)));
        STRATA_TRY(write_latest(o->ckpt_dir, name));
        nkept++;
        return STRATA_OK;
}

/* The checkpoint @p path names: itself, or for a directory the file its `latest` names. */
static int resolve(const char *path, char *out, size_t n)
{
        struct stat st;
        char latest[STRATA_CKPT_PATH_MAX], name[256] = "";
        FILE *f;

        if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
                snprintf(out, n, "%s", path);
                return 0;
        }
        snprintf(latest, sizeof(latest), "%s/latest", path);
        f = fopen(latest, "r");
        if (!f || !fgets(name, sizeof(name), f) || !name[0] || strchr(name, '/')) {
                if (f)
                        fclose(f);
                return bad("--resume: %s holds no readable 'latest'%s", path, "");
        }
        fclose(f);
        name[strcspn(name, "\n")] = '\0';
        snprintf(out, n, "%s/%s", path, name);
        return 0;
}

/* Load the checkpoint --resume names; *at gets where that run stood. */
static int resume(struct strata_runtime *rt, const struct opts *o, struct position *at)
{
        char path[STRATA_CKPT_PATH_MAX], num[32];
        struct strata_ckpt_info info;
        struct app_state a;
        size_t got = 0;

        if (resolve(o->resume, path, sizeof(path)))
                return 2;
        if (strata_load_checkpoint(rt, path, &a, sizeof(a), &got, &info))
                return bad("--resume: %s%s", strata_last_error(), "");
        if (got != sizeof(a) || memcmp(a.magic, "sttrain", 8) != 0)
                return bad("--resume: %s was not written by strata-train%s", path, "");
        if (a.batch != (uint32_t)o->batch || a.seed != o->seed)
                return bad("--resume: %s was taken with another --batch or --seed%s", path, "");
        if ((int)a.epochs_done >= o->epochs)
                return bad("--resume: %s already holds %s epochs; ask for more with --epochs",
                           path, (snprintf(num, sizeof(num), "%u", a.epochs_done), num));
        *at = (struct position){ (int)a.epochs_done, (long)a.step_in_epoch, a.loss_sum };
        if (!info.bitwise)
                fprintf(stderr, "strata-train: %s was saved by %s on %d device(s); training "
                                "continues from its state on %d, no longer bit for bit\n",
                        path, strata_strategy_name(info.strategy), info.world, o->devices);
        return 0;
}

/* A stop signal arrived: checkpoint where the run stands (TERM, USR1), say so, exit. */
static void catch_stop_signals(void)
{
        struct sigaction sa;

        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal;
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGUSR1, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
}

/* What a stopped run did up to its last step: the summary a completed run prints, without
 * the test pass it never reached. */
static void stopped_summary(const struct opts *o, int ep, long s, double loss, double *times,
                            long nsteps, double elapsed)
{
        double med, sps = elapsed > 0.0 ? (double)nsteps * o->batch / elapsed : 0.0;
        char num[32];

        med = strata_tool_median(times, (size_t)nsteps) * 1e6;
        if (o->json)
                printf("{\"final\":true,\"stopped\":\"%s\",\"epoch\":%d,\"step\":%ld,"
                       "\"train_loss\":%s,\"time_s\":%.3f,\"samples_per_s\":%.0f,"
                       "\"step_us_median\":%.1f}\n",
                       sigabbrev_np(stop_signal), ep + 1, s, json_num(loss, "%.6f", num),
                       elapsed, sps, med);
        else if (!o->quiet)
                printf("stopped: epoch %d step %ld  train_loss %.4f  time %.2fs  median step "
                       "%.1f us  %.0f samples/s\n", ep + 1, s, loss, elapsed, med, sps);
        fflush(stdout);
}

static int stop(struct strata_runtime *rt, const struct opts *o, struct position at)
{
        int sig = stop_signal, rc = STRATA_OK;

        if (o->ckpt_dir && sig != SIGINT)
                rc = save_ckpt(rt, o, at);
        fprintf(stderr, "strata-train: %s at epoch %d, step %ld%s%s\n", strsignal(sig),
                at.epoch + 1, at.step, rc ? ": checkpoint failed: " : "",
                rc ? strata_last_error() : o->ckpt_dir && sig != SIGINT ? "; checkpoint saved"
                                                                         : "");
        strata_teardown(rt);
        return rc ? 1 : 128 + sig;
}

/* --strategy spawn: the parent forks the processes, each runs the tool with one device. */
static int spawned_rank = -1, spawned_size;
static int train(int argc, char **argv);

struct args {
        int argc;
        char **argv;
};

static int spawn_child(int rank, int size, void *arg)
{
        const struct args *a = arg;

        spawned_rank = rank;
        spawned_size = size;
        optind = 1;
        return train(a->argc, a->argv);
}

static int spawn_parent(int argc, char **argv, const struct opts *o)
{
        struct args a = { argc, argv };
        struct strata_spawn_result res;

        if (strata_spawn(o->devices, spawn_child, &a, o->timeout_s, NULL, 0, &res) == STRATA_OK)
                return 0;
        fprintf(stderr, "strata-train: %s\n", strata_last_error());
        return res.failed_rank >= 0 ? 1 : 2;
}

/* This process's rank in its job: spawned, from the launcher, or 0. */
static int process_rank(void)
{
        struct strata_launch l;

        if (spawned_rank >= 0)
                return spawned_rank;
        return strata_launch_detect(&l) == STRATA_OK ? l.rank : 0;
}

/*
 * Tests of a job's faults: STRATA_TRAIN_FAULT=kill:RANK:STEP or hang:RANK:STEP makes process
 * RANK kill itself (SIGKILL) or stop responding before its training step STEP.
 */
static void fault(long step)
{
        static int kind = -1, rank;
        static long at;
        char what[8];

        if (kind < 0) {
                const char *f = getenv("STRATA_TRAIN_FAULT");

                kind = 0;
                if (f && sscanf(f, "%7[a-z]:%d:%ld", what, &rank, &at) == 3 &&
                    rank == process_rank())
                        kind = !strcmp(what, "kill") ? 1 : !strcmp(what, "hang") ? 2 : 0;
        }
        if (!kind || step != at)
                return;
        if (kind == 1)
                raise(SIGKILL);
        for (;;)
                pause();
}

/* The trace of a process other than the job's first goes beside it: FILE.<process>. */
static const char *trace_path(const struct opts *o, char *buf, size_t n)
{
        int rank = process_rank();

        if (!o->trace)
                return NULL;
        if (rank <= 0)
                return o->trace;
        snprintf(buf, n, "%s.%d", o->trace, rank);
        return buf;
}

int main(int argc, char **argv)
{
        return train(argc, argv);
}

static int train(int argc, char **argv)
{
        struct opts o;
        struct strata_module mods[MAX_MODULES];
        struct strata_model model;
        struct strata_config cfg = STRATA_CONFIG_INIT;
        struct strata_plan_info plan;
        struct strata_runtime *rt;
        struct strata_arena data;
        struct strata_dataset train, test;
        struct strata_sampler sampler;
        struct strata_loader loader, tloader;
        struct strata_memory_info mem;
        uint32_t *test_idx;
        double *step_times, t_start, t_total, acc = 0.0, train_loss = 0.0;
        long steps_per_epoch, heap;
        int start_ep = 0;
        struct position at = { 0, 0, 0.0 };
        long nsteps = 0;
        int widths[MAX_MODULES], nw, nm = 0, rc, tty;
        size_t data_bytes, samples, mem_limit;
        char p1[4096], p2[4096], p3[4096], p4[4096], why[160], tpath[4096];
        void *p;

        static char outbuf[1 << 14];
        static struct csvlog csv;

        /* A closed stdout: the results would be lost, and the next file opened would take its
         * descriptor and receive them. */
        if (fcntl(1, F_GETFD) < 0) {
                fprintf(stderr, "strata-train: stdout is closed: the results could not be "
                                "written\n");
                return 2;
        }
        /* stdout's buffer is ours, so printing progress never allocates. */
        setvbuf(stdout, outbuf, _IOLBF, sizeof(outbuf));
        if ((rc = parse_args(argc, argv, &o)))
                return rc;
        if (o.strategy == STRATA_STRATEGY_SPAWN && spawned_rank < 0)
                return spawn_parent(argc, argv, &o);
        if (spawned_rank >= 0)
                o.devices = 1; /* each spawned process is one device */
        if (o.strategy == STRATA_STRATEGY_MPI) {
                struct strata_launch l;

                if (strata_launch_detect(&l))
                        return bad("%s%s", strata_last_error(), "");
                if (l.local_size > 1 && o.devices == 1 && l.local_rank == 0)
                        fprintf(stderr, "strata-train: %d processes of one device share this "
                                        "host: one process per node with --devices %d is "
                                        "faster (its devices share memory)\n",
                                l.local_size, l.local_size);
        }
        catch_stop_signals(); /* acted on at the first step boundary */
        nw = strata_tool_parse_widths(o.model, widths, MAX_MODULES / 4);
        if (nw < 0)
                return bad("--model: '%s' is not widths like 784-256-128-10%s", o.model, "");
        /* Data: sizes from the headers first, then one mapping for everything the tool keeps. */
        snprintf(p1, sizeof(p1), "%s/train-images-idx3-ubyte.gz", o.data);
        snprintf(p2, sizeof(p2), "%s/train-labels-idx1-ubyte.gz", o.data);
        snprintf(p3, sizeof(p3), "%s/t10k-images-idx3-ubyte.gz", o.data);
        snprintf(p4, sizeof(p4), "%s/t10k-labels-idx1-ubyte.gz", o.data);
        if (o.synthetic) {
                samples = (size_t)o.synthetic + 10000;
                data_bytes = samples * (size_t)(widths[0] + 64) + 4096;
        } else {
                struct strata_idx_info ia, ib;
                size_t a, b;

                if (access(o.data, X_OK) != 0) /* traversable is enough: it need not be listable */
                        return bad("data directory '%s': %s", o.data, strerror(errno));
                if (strata_dataset_bytes(p1, p2, &a) || strata_dataset_bytes(p3, p4, &b) ||
                    strata_idx_info(p2, &ia) || strata_idx_info(p4, &ib))
                        return bad("%s%s", strata_last_error(), "");
                data_bytes = a + b;
                samples = (size_t)ia.dims[0] + ib.dims[0];
        }
        /* Beside the data: index lists (12 bytes a sample), a staging batch, and the step
         * times of the whole run, all sized from the data set itself (no built-in budget). */
        data_bytes += samples * 12 + (size_t)o.batch * (size_t)widths[0] * 8 + 8 * 4096 +
                      (size_t)o.epochs * samples * sizeof(double) / (size_t)(o.batch ? o.batch : 1) +
                      (size_t)o.epochs * sizeof(double) * 8;
        mem_limit = memory_limit(why, sizeof(why));
        if (data_bytes > mem_limit)
                return bad("the data needs %s bytes; %s (fewer --synthetic samples, or a "
                           "larger limit)", (snprintf(p1, 64, "%zu", data_bytes), p1), why);
        if (strata_arena_map(&data, data_bytes, NULL))
                return bad("%s%s", strata_last_error(), "");
        if (o.synthetic) {
                rc = strata_dataset_synthetic(&train, &data, (uint32_t)o.synthetic,
                                              (uint32_t)widths[0], widths[nw - 1], o.seed + 1);
                if (!rc)
                        rc = strata_dataset_synthetic(&test, &data, 10000, (uint32_t)widths[0],
                                                      widths[nw - 1], o.seed + 2);
        } else {
                rc = strata_dataset_load(&train, &data, p1, p2);
                if (!rc)
                        rc = strata_dataset_load(&test, &data, p3, p4);
        }
        if (rc)
                return bad("%s%s", strata_last_error(), "");
        if ((uint32_t)widths[0] != train.dim)
                return bad("--model: input width must be the image size (%s), got %s",
                           (snprintf(p1, 32, "%u", train.dim), p1), (snprintf(p2, 32, "%d", widths[0]), p2));
        if (widths[nw - 1] < train.classes)
                return bad("--model: %s outputs for a dataset with %s classes",
                           (snprintf(p1, 32, "%d", widths[nw - 1]), p1), (snprintf(p2, 32, "%d", train.classes), p2));
        /* The test split must fit what the training split set up, or the first evaluation
         * (after a whole epoch of training) would fail. */
        if (test.dim != train.dim)
                return bad("the test images have %s features each, the training images %s",
                           (snprintf(p1, 32, "%u", test.dim), p1),
                           (snprintf(p2, 32, "%u", train.dim), p2));
        if (test.classes > widths[nw - 1])
                return bad("the test labels go up to class %s; the model has %s outputs",
                           (snprintf(p1, 32, "%d", test.classes - 1), p1),
                           (snprintf(p2, 32, "%d", widths[nw - 1]), p2));
        /* The model: hidden linear [bn] relu [dropout], then the output linear. */
        for (int i = 1; i < nw; i++) {
                mods[nm++] = (struct strata_module){ .ops = &strata_linear, .out = widths[i] };
                if (i == nw - 1)
                        break;
                if (o.bn)
                        mods[nm++] = (struct strata_module){ .ops = &strata_batchnorm1d };
                mods[nm++] = (struct strata_module){ .ops = &strata_relu };
                if (o.dropout > 0.0f)
                        mods[nm++] = (struct strata_module){ .ops = &strata_dropout, .p = o.dropout };
        }
        model = (struct strata_model){ .in_features = widths[0], .nmodules = nm, .modules = mods };
        cfg.model = &model;
        cfg.batch = o.batch;
        cfg.classes = widths[nw - 1];
        cfg.strategy.devices = o.devices;
        cfg.strategy.kind = o.strategy;
        cfg.device.accelerator = o.accel;
        cfg.precision.allow_tf32 = o.tf32;
        cfg.seed = o.seed;
        cfg.verbose = o.verbose;
        cfg.optim.kind = o.optim;
        cfg.optim.lr = o.lr;
        cfg.optim.momentum = o.optim == STRATA_OPTIM_SGD ? o.momentum : 0.0f;
        cfg.optim.weight_decay = o.wd;
        cfg.strategy.sync_bn = o.sync_bn;
        cfg.train.accumulate = o.accumulate;
        cfg.train.clip_norm = o.clip_norm;
        cfg.train.clip_value = o.clip_value;
        cfg.trace.path = trace_path(&o, tpath, sizeof(tpath));
        cfg.device.bind = o.bind;
        cfg.train.allow_nonfinite = o.allow_nonfinite;
        cfg.precision.kind = o.precision;
        cfg.strategy.grad_allreduce = o.grad_allreduce;
        cfg.trace.events = (size_t)o.trace_events;
        cfg.trace.stall_s = o.stall_s;
        cfg.device.timeout_s = o.timeout_s;
        if (o.strategy == STRATA_STRATEGY_DP && o.sync_bn)
                strata_patch_replication_callback(&cfg);
        if (strata_plan(&cfg, &plan))
                return bad("%s%s", strata_last_error(), "");
        if (plan.bytes > mem_limit - data_bytes)
                return bad("this configuration needs %s bytes beside the data; %s",
                           (snprintf(p1, 64, "%zu", plan.bytes), p1), why);
        if (o.verbose) {
                struct strata_topology topo;
                struct strata_placement pl[64];
                char line[128];

                if (strata_topology_read(&topo) == STRATA_OK &&
                    strata_topology_place(o.devices, pl) == STRATA_OK) {
                        fprintf(stderr, "strata: machine: %d package(s), %d NUMA node(s), %d "
                                        "core(s), %d PU(s); SIMD %s\n",
                                topo.packages, topo.numa_nodes, topo.cores, topo.pus,
                                strata_simd_isa());
                        for (int d = 0; d < o.devices; d++) {
                                strata_placement_describe(&pl[d], line, sizeof(line));
                                fprintf(stderr, "strata: %s\n", line);
                        }
                }
        }
        steps_per_epoch = (long)(train.n / (uint32_t)o.batch);
        if (steps_per_epoch == 0)
                return bad("--batch %s is larger than the %s training samples",
                           (snprintf(p1, 32, "%d", o.batch), p1), (snprintf(p2, 32, "%u", train.n), p2));
        /* What would only fail late: an accumulation window that outlasts an epoch (the
         * optimizer would step across epoch ends, or never), and a last test batch with fewer
         * rows than devices (the evaluation after the first epoch would fail). */
        if (o.accumulate > steps_per_epoch)
                return bad("--accumulate %s is longer than an epoch's %s batches: use at most "
                           "that many",
                           (snprintf(p1, 32, "%d", o.accumulate), p1),
                           (snprintf(p2, 32, "%ld", steps_per_epoch), p2));
        if (test.n % (uint32_t)o.batch && test.n % (uint32_t)o.batch < (uint32_t)o.devices)
                return bad("the last test batch has %s rows, fewer than the %s devices: choose "
                           "--batch or --devices so that it has at least one row per device",
                           (snprintf(p1, 32, "%u", test.n % (uint32_t)o.batch), p1),
                           (snprintf(p2, 32, "%d", o.devices), p2));
        if (set_schedule(&o, steps_per_epoch, &cfg.optim))
                return 2;
        if (strata_init(&rt, &cfg) || strata_connect(rt))
                return bad("%s%s", strata_last_error(), "");
        if (!strata_is_global_zero(rt)) { /* one voice per job: global rank 0's */
                o.quiet = 1;
                o.json = 0;
                o.metrics_csv = NULL;
                o.ckpt_dir = NULL;
                o.export_st = NULL;
        }
        if (strata_sampler_init(&sampler, &data, train.n, 1, 0, 1, 0, o.seed) ||
            strata_loader_init(&loader, &data, &train, o.batch, 1) ||
            strata_loader_init(&tloader, &data, &test, o.batch, 0) ||
            strata_arena_alloc(&data, sizeof(uint32_t) * test.n, 0, &p))
                return bad("%s%s", strata_last_error(), "");
        test_idx = p;
        if (!o.raw) {
                strata_loader_standardize(&loader, &train); /* the training set's statistics */
                tloader.scale = loader.scale;
                tloader.shift = loader.shift;
        }
        for (uint32_t i = 0; i < test.n; i++)
                test_idx[i] = i;
        if (strata_arena_alloc(&data, sizeof(double) * (size_t)steps_per_epoch * o.epochs, 0, &p))
                return bad("%s%s", strata_last_error(), "");
        step_times = p;
        tty = isatty(1) && !o.quiet && !o.json;
        if (!o.quiet && !o.json)
                printf("strata-train: %s, %d device(s), model %s%s, %u train / %u test samples, "
                       "batch %d, %ld steps/epoch\n",
                       strata_strategy_name(o.strategy),
                       strata_world_size(rt),
                       o.model, o.bn ? " +bn" : "", train.n, test.n, o.batch, steps_per_epoch);
        if (stdout_failed()) {
                strata_teardown(rt);
                return 1;
        }
        if ((o.ckpt_dir || o.ckpt_every) &&
            (steps_per_epoch % o.accumulate || o.ckpt_every % o.accumulate || !o.ckpt_dir)) {
                strata_teardown(rt);
                return bad("--ckpt-dir/--ckpt-every-steps: checkpoints are taken at optimizer "
                           "steps: every N and the %s batches of an epoch must be multiples of "
                           "--accumulate, and --ckpt-every-steps needs --ckpt-dir%s",
                           (snprintf(p1, 32, "%ld", steps_per_epoch), p1), "");
        }
        if (o.resume && resume(rt, &o, &at)) {
                strata_teardown(rt);
                return 2;
        }
        start_ep = at.epoch;
        if (o.ckpt_dir && mkdir(o.ckpt_dir, 0755) != 0 && errno != EEXIST)
                return bad("--ckpt-dir %s: %s", o.ckpt_dir, strerror(errno));
        if (o.resume && !o.quiet && !o.json)
                printf("strata-train: resumed at epoch %d, step %ld\n", at.epoch + 1, at.step);
        if (o.metrics_csv && strata_is_global_zero(rt) &&
            csv_open(&csv, o.metrics_csv, o.resume != NULL)) {
                strata_teardown(rt);
                return 2;
        }
        strata_heapcount_start();
        t_start = strata_tool_now();
        for (int ep = start_ep; ep < o.epochs; ep++) {
                struct strata_batch b;
                struct strata_metrics m;
                double t_ep = strata_tool_now(), loss_sum = 0.0, ep_time, t_bar = 0.0, lr;
                long s = 0, s0;

                strata_sampler_set_epoch(&sampler, (uint64_t)ep);
                strata_loader_reset(&loader, sampler.indices, sampler.per_rank);
                if (ep == at.epoch && at.step) { /* a mid-epoch checkpoint: skip what it did */
                        for (; s < at.step && strata_loader_next_indexed(&loader, &b); s++)
                                ;
                        loss_sum = at.loss_sum;
                }
                s0 = s;
                csv.t0 = t_ep;
                csv.rows_steps = 0;
                csv.loss_sum = 0.0;
                while (strata_loader_next_indexed(&loader, &b)) {
                        double t0 = strata_tool_now();

                        fault(nsteps);
                        if ((rc = strata_train_step(rt, &b, &m)))
                                goto fail;
                        step_times[nsteps++] = strata_tool_now() - t0;
                        loss_sum += m.loss;
                        s++;
                        if (csv.f && (csv.loss_sum += m.loss, ++csv.rows_steps == o.log_every)) {
                                double now = strata_tool_now();
                                long g = (long)ep * steps_per_epoch + s;

                                lr = strata_optim_lr(&cfg.optim, (uint64_t)(g / o.accumulate > 0 ? g / o.accumulate : 1));
                                csv_row(&csv, g, ep + 1, csv.loss_sum / (double)csv.rows_steps, lr,
                                        (double)(csv.rows_steps * o.batch) / (now - csv.t0), -1.0);
                                csv.t0 = now;
                                csv.rows_steps = 0;
                                csv.loss_sum = 0.0;
                        }
                        if (tty && (strata_tool_now() - t_bar > 0.1 || s == steps_per_epoch)) {
                                double el = strata_tool_now() - t_ep, rate = (double)(s - s0) / el;

                                t_bar = strata_tool_now();
                                progress(ep + 1, o.epochs, s, steps_per_epoch, loss_sum / s,
                                         rate * o.batch, (double)(steps_per_epoch - s) / rate);
                        }
                        if (o.ckpt_every && s % o.ckpt_every == 0 && s < steps_per_epoch &&
                            (rc = save_ckpt(rt, &o, (struct position){ ep, s, loss_sum })))
                                goto fail;
                        if (stop_signal && s % o.accumulate == 0) {
                                stopped_summary(&o, ep, s, loss_sum / (double)(s ? s : 1),
                                                step_times, nsteps,
                                                strata_tool_now() - t_start);
                                return stop(rt, &o, (struct position){ ep, s, loss_sum });
                        }
                }
                ep_time = strata_tool_now() - t_ep;
                train_loss = loss_sum / (double)s;
                if ((rc = evaluate(rt, &tloader, test_idx, test.n, &acc)))
                        goto fail;
                if (tty)
                        printf("\r\033[K");
                if (o.trace && strata_flush_trace(rt))
                        fprintf(stderr, "strata-train: %s\n", strata_last_error());
                lr = strata_optim_lr(&cfg.optim, (uint64_t)(((long)(ep + 1) * steps_per_epoch) / o.accumulate));
                csv_row(&csv, (long)(ep + 1) * steps_per_epoch, ep + 1, train_loss, lr,
                        (double)((s - s0) * o.batch) / ep_time, acc);
                csv_flush(&csv);
                if (o.ckpt_dir && (rc = save_ckpt(rt, &o, (struct position){ ep + 1, 0, 0.0 })))
                        goto fail;
                if (o.json)
                        printf("{\"epoch\":%d,\"train_loss\":%s,\"test_acc\":%.4f,"
                               "\"samples_per_s\":%.0f,\"epoch_s\":%.3f}\n",
                               ep + 1, json_num(train_loss, "%.6f", p1), acc,
                               (double)(s * o.batch) / ep_time, ep_time);
                else if (!o.quiet)
                        printf("epoch %3d  train_loss %.4f  test_acc %.4f  %8.0f samples/s  %.2fs\n",
                               ep + 1, train_loss, acc, (double)(s * o.batch) / ep_time, ep_time);
                if (stdout_failed())
                        goto out_failed;
        }
        t_total = strata_tool_now() - t_start;
        heap = strata_heapcount_stop();
        if (o.export_st && (rc = strata_export_safetensors(rt, o.export_st)))
                goto fail;
        strata_memory(rt, &mem);
        if (!strata_is_global_zero(rt) && heap > 0) /* rank 0 prints its own in the summary */
                fprintf(stderr, "strata-train: process %d: %ld heap allocations during "
                                "training%s\n", process_rank(), heap,
                        o.strategy == STRATA_STRATEGY_MPI ? " (Open MPI's)" : "");
        if (strata_is_global_zero(rt)) {
                double med = strata_tool_median(step_times, (size_t)nsteps) * 1e6;
                double sps = (double)nsteps * o.batch / t_total;

                if (o.json)
                        printf("{\"final\":true,\"epochs\":%d,\"batch\":%d,\"devices\":%d,"
                               "\"train_loss\":%s,\"test_acc\":%.4f,\"time_s\":%.3f,"
                               "\"samples_per_s\":%.0f,\"step_us_median\":%.1f,"
                               "\"arena_bytes_planned\":%zu,\"arena_bytes_used\":%zu,"
                               "\"arena_refusals\":%llu,\"heap_allocs\":%ld}\n",
                               o.epochs, o.batch, strata_world_size(rt),
                               json_num(train_loss, "%.6f", p1),
                               acc, t_total, sps, med,
                               mem.planned, mem.used, (unsigned long long)mem.refusals, heap);
                else
                        printf("final: test_acc %.4f  time %.2fs  median step %.1f us  %.0f samples/s\n"
                               "memory: %zu bytes planned, %zu used, %llu refused; heap allocations "
                               "during training: %ld\n",
                               acc, t_total, med, sps, mem.planned, mem.used,
                               (unsigned long long)mem.refusals, heap);
        }
        if (o.precision == STRATA_PRECISION_16_MIXED && strata_is_global_zero(rt) && !o.json) {
                struct strata_grad_scaler gs;

                if (strata_grad_scaler_state(rt, &gs) == STRATA_OK)
                        printf("loss scale: %g, %llu optimizer steps skipped\n", gs.scale,
                               (unsigned long long)gs.skipped);
        }
        /* Under mpi, Open MPI's own allocations are counted too (reported, not failed on). */
        rc = heap > 0 && o.strategy != STRATA_STRATEGY_MPI;
        if (strata_teardown(rt)) {
                fprintf(stderr, "strata-train: %s\n", strata_last_error());
                rc = 1;
        }
        if (stdout_failed())
                rc = 1;
        if (csv.f && fclose(csv.f) != 0 && !csv.failed)
                csv_check(&csv, -1);
        strata_arena_release(&data);
        if (o.trace && !o.quiet && !o.json)
                printf("trace: %s (open it in Perfetto or chrome://tracing)\n", o.trace);
        return rc || csv.failed ? 1 : 0;
fail:
        fprintf(stderr, "strata-train: %s\n", strata_last_error());
out_failed:
        strata_teardown(rt);
        return 1;
}
