/*
 * strata-train's checkpoints and stop signals: DIR/epoch-N.ckpt at epoch ends (and every N
 * optimizer steps, DIR/epoch-E-step-B.ckpt after batch B of epoch E), DIR/latest, the last
 * --ckpt-keep kept; --resume from a file or a directory's latest; SIGTERM, SIGUSR1 and SIGINT
 * acted on at the next optimizer step, exit 128+signal.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tools/train/train.h"

/* What strata-train keeps in a checkpoint's application block. */
struct app_state {
        char magic[8];          /* "sttrain" */
        uint32_t epochs_done;
        uint32_t batch;
        uint64_t seed;
        uint32_t step_in_epoch; /* batches of the next epoch already trained */
        uint32_t plateau_bad;   /* --lr-schedule plateau: evaluations since the best (was 0) */
        double loss_sum;        /* their summed loss, for the epoch's train_loss */
        double test_acc;        /* of the last epoch evaluated (absent before this field: */
        double train_loss;      /* ...a run resumed complete reports them unknown) */
        double eval_loss;       /* its evaluation's loss, MSE and MAE (absent before: */
        double eval_mse;        /* ...unknown) */
        double eval_mae;
        /* several outputs (absent before: unknown): inside an epoch each one's summed loss
         * so far, at an epoch's end each one's train_loss (the block holds 256 bytes); and
         * each one's loss in the evaluation */
        double out_losses[STRATA_MAX_OUTPUTS];
        double eval_losses[STRATA_MAX_OUTPUTS];
        /* each cross-entropy output's accuracy in the evaluation, as the rows evaluated and
         * each one's rows right (NO_ACC: a float output, or none evaluated), from which the
         * same double is computed again (absent before: unknown) */
        uint32_t eval_rows;
        uint32_t eval_right[STRATA_MAX_OUTPUTS];
        float plateau_lr;       /* --lr-schedule plateau: its rate (0: none; was padding) */
        double plateau_best;    /* ...and its best metric (absent before: none) */
};

/* The block's sizes before it kept the last evaluation, before its loss and errors, before
 * each output's losses, before each output's accuracy, and before the plateau's state: a
 * block's length is its version. */
#define APP_STATE_V1 offsetof(struct app_state, test_acc)
#define APP_STATE_V2 offsetof(struct app_state, eval_loss)
#define APP_STATE_V3 offsetof(struct app_state, out_losses)
#define APP_STATE_V4 offsetof(struct app_state, eval_rows)
#define APP_STATE_V5 offsetof(struct app_state, plateau_best)
#define NO_ACC UINT32_MAX
_Static_assert(sizeof(struct app_state) <= STRATA_CKPT_APP_BYTES,
               "strata-train's block fits a checkpoint's application block");

/* SIGTERM / SIGUSR1 (a scheduler's warning) and SIGINT: stop at the next step boundary. */
static volatile sig_atomic_t stop_signal;
/* --max-time: a stop asked for by the run itself, without a signal. */
static volatile sig_atomic_t limit_stop;

static void on_signal(int sig)
{
        stop_signal = sig;
        strata_request_stop(); /* the job's processes agree on the step (strata_train_step) */
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

/* Each cross-entropy output's accuracy of @p ev into the block, as its counts. */
static void keep_accs(struct app_state *a, const struct evaluation *ev)
{
        int rows = ev->rows > 0.0 && ev->rows < (double)NO_ACC;

        a->eval_rows = rows ? (uint32_t)ev->rows : 0;
        for (int k = 0; k < STRATA_MAX_OUTPUTS; k++)
                a->eval_right[k] = rows && isfinite(ev->accs[k]) && ev->rights[k] >= 0 &&
                                   ev->rights[k] <= (long)ev->rows
                                           ? (uint32_t)ev->rights[k] : NO_ACC;
}

/* The accuracies the block kept into @p ev (NaN: a float output, or a block without them). */
static void load_accs(const struct app_state *a, size_t got, struct evaluation *ev)
{
        int known = got >= APP_STATE_V5 && a->eval_rows > 0;

        ev->rows = known ? (double)a->eval_rows : 0.0;
        for (int k = 0; k < STRATA_MAX_OUTPUTS; k++) {
                known = ev->rows > 0.0 && a->eval_right[k] <= a->eval_rows;
                ev->rights[k] = known ? (long)a->eval_right[k] : -1;
                ev->accs[k] = known ? (double)a->eval_right[k] / ev->rows : NAN;
        }
}

/*
 * Where a checkpoint name stands in training, as one number that orders them: epoch-E.ckpt
 * after E epochs, epoch-E-step-B.ckpt after batch B of epoch E; -1 for any other name.
 */
static double ckpt_position(const char *name)
{
        long e, b;
        int n = -1;

        if (sscanf(name, "epoch-%ld-step-%ld.ckpt%n", &e, &b, &n) == 2 && n > 0 &&
            !name[n] && e >= 1 && b >= 1)
                return (double)(e - 1) + 1.0 - 1.0 / ((double)b + 1.0); /* inside epoch e */
        n = -1;
        if (sscanf(name, "epoch-%ld.ckpt%n", &e, &n) == 1 && n > 0 && !name[n] && e >= 0)
                return (double)e;
        return -1.0;
}

/*
 * Keep the last @p keep checkpoints of @p dir: @p saved (just written) and the keep - 1 that
 * come last in training among the others; the rest go, whichever run wrote them (a resumed
 * run prunes its predecessors' too: issue 58, item 1). Only strata-train's names are counted;
 * with @p top_k the epoch checkpoints are --save-top-k's to keep, not counted here.
 */
static int prune(const char *dir, const char *saved, int keep, int top_k)
{
        static char names[256][64];
        static char ents[1 << 14] __attribute__((aligned(8)));
        double pos[256];
        char path[STRATA_CKPT_PATH_MAX];
        int n = 0, rc = STRATA_OK;
        long got;
        /* getdents64 into a static buffer: opendir() would allocate during training. */
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (fd < 0)
                return STRATA_OK; /* nothing to list: nothing removed */
        while ((got = syscall(SYS_getdents64, fd, ents, sizeof(ents))) > 0) {
                for (long off = 0; off < got;) {
                        const struct dirent64 *e = (const struct dirent64 *)(ents + off);
                        double p = ckpt_position(e->d_name);

                        off += e->d_reclen;
                        /* --save-top-k keeps the epoch checkpoints (trainer.c) */
                        if (p < 0.0 || !strcmp(e->d_name, saved) || strlen(e->d_name) >= 64 ||
                            n == 256 || (top_k && p == floor(p)))
                                continue;
                        snprintf(names[n], sizeof(names[n]), "%.63s", e->d_name);
                        pos[n++] = p;
                }
        }
        close(fd);
        /* The keep - 1 latest stay: remove the others, earliest first. */
        for (int kept = n; kept > keep - 1; kept--) {
                int first = -1;

                for (int i = 0; i < n; i++)
                        if (names[i][0] && (first < 0 || pos[i] < pos[first]))
                                first = i;
                snprintf(path, sizeof(path), "%s/%s", dir, names[first]);
                if (rc == STRATA_OK)
                        rc = strata_checkpoint_file_io()->remove(NULL, path);
                names[first][0] = '\0';
        }
        return rc;
}

/**
 * Save DIR/epoch-E.ckpt (or DIR/epoch-E-step-S.ckpt inside an epoch), point DIR/latest at it,
 * and remove the checkpoints that fall out of the last --ckpt-keep (the job's first process).
 */
int save_ckpt(struct strata_runtime *rt, const struct opts *o, struct position at)
{
        struct app_state a = { .magic = "sttrain", .epochs_done = (uint32_t)at.epoch,
                               .batch = (uint32_t)o->batch, .seed = o->seed,
                               .step_in_epoch = (uint32_t)at.step, .loss_sum = at.loss_sum,
                               .test_acc = at.ev.acc, .train_loss = at.train_loss,
                               .eval_loss = at.ev.loss, .eval_mse = at.ev.mse,
                               .eval_mae = at.ev.mae, .plateau_bad = at.plateau_bad,
                               .plateau_lr = at.plateau_lr, .plateau_best = at.plateau_best };
        char name[64], path[STRATA_CKPT_PATH_MAX];

        memcpy(a.out_losses, at.step ? at.loss_sums : at.train_losses, sizeof(a.out_losses));
        memcpy(a.eval_losses, at.ev.losses, sizeof(a.eval_losses));
        keep_accs(&a, &at.ev);
        ckpt_name(at, name, sizeof(name));
        snprintf(path, sizeof(path), "%s/%s", o->ckpt_dir, name);
        if (!strata_is_global_zero(rt)) /* a save of every process: process 0 writes */
                return strata_save_checkpoint(rt, path, &a, sizeof(a));
        STRATA_TRY(strata_save_checkpoint(rt, path, &a, sizeof(a)));
        STRATA_TRY(write_latest(o->ckpt_dir, name));
        return prune(o->ckpt_dir, name, o->ckpt_keep, o->top_k > 0);
}

/** @brief The file name of a checkpoint taken at @p at (epoch-E.ckpt, epoch-E-step-B.ckpt). */
void ckpt_name(struct position at, char *name, size_t n)
{
        if (at.step)
                snprintf(name, n, "epoch-%d-step-%ld.ckpt", at.epoch + 1, at.step);
        else
                snprintf(name, n, "epoch-%d.ckpt", at.epoch);
}

/* @p path names a checkpoints directory's pointer file, DIR/latest. */
static int is_latest(const char *path)
{
        const char *base = strrchr(path, '/');

        return !strcmp(base ? base + 1 : path, "latest");
}

/*
 * The checkpoint @p path names: itself; for a directory the file its `latest` names; for
 * DIR/latest itself, the file it names.
 */
static int resolve(const char *path, char *out, size_t n)
{
        struct stat st;
        char latest[STRATA_CKPT_PATH_MAX], dir[STRATA_CKPT_PATH_MAX], name[256] = "";
        FILE *f;

        if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && is_latest(path)) {
                snprintf(dir, sizeof(dir), "%s", path);
                dir[strlen(dir) - strlen("latest")] = '\0';
                snprintf(latest, sizeof(latest), "%s", path);
        } else if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
                snprintf(out, n, "%s", path);
                return 0;
        } else {
                snprintf(dir, sizeof(dir), "%s/", path);
                snprintf(latest, sizeof(latest), "%s/latest", path);
        }
        f = fopen(latest, "r");
        if (!f || !fgets(name, sizeof(name), f) || !name[0] || strchr(name, '/')) {
                if (f)
                        fclose(f);
                return bad("--resume: %s holds no readable 'latest'", path);
        }
        fclose(f);
        name[strcspn(name, "\n")] = '\0';
        if (snprintf(out, n, "%s%s", dir, name) >= (int)n)
                return bad("--resume: %s names a path too long: %s", path, name);
        return 0;
}

/*
 * Load the checkpoint --resume names; *at gets where that run stood and its last evaluation.
 * @p mine: the loss a checkpoint records for this model (its first output's, as the library
 * records it).
 */
static int resume(struct strata_runtime *rt, const struct opts *o,
                  const struct strata_loss_ops *mine, struct position *at)
{
        char path[STRATA_CKPT_PATH_MAX];
        struct strata_ckpt_info info;
        struct app_state a = { .test_acc = NAN, .train_loss = NAN, .eval_loss = NAN,
                               .eval_mse = NAN, .eval_mae = NAN };
        size_t got = 0;

        if (resolve(o->resume, path, sizeof(path)))
                return 2;
        for (int k = 0; k < STRATA_MAX_OUTPUTS; k++)
                a.out_losses[k] = a.eval_losses[k] = NAN;
        if (strata_load_checkpoint(rt, path, &a, sizeof(a), &got, &info))
                return bad("--resume: %s", strata_last_error());
        if (got < sizeof(a.magic) || memcmp(a.magic, "sttrain", 8) != 0)
                return bad("--resume: %s was not written by strata-train", path);
        if (got != sizeof(a) && got != APP_STATE_V1 && got != APP_STATE_V2 &&
            got != APP_STATE_V3 && got != APP_STATE_V4 && got != APP_STATE_V5)
                return bad("--resume: %s holds a strata-train block of %zu bytes, a layout "
                           "this strata-train does not read (it reads %zu, %zu, %zu, %zu, %zu "
                           "or %zu): written by another version, or damaged", path, got,
                           APP_STATE_V1, APP_STATE_V2, APP_STATE_V3, APP_STATE_V4,
                           APP_STATE_V5, sizeof(a));
        if (a.batch != (uint32_t)o->batch || a.seed != o->seed)
                return bad("--resume: %s was taken with another --batch or --seed", path);
        *at = (struct position){ (int)a.epochs_done, (long)a.step_in_epoch, a.loss_sum,
                                 a.train_loss, { a.eval_loss, a.test_acc, a.eval_mse,
                                                 a.eval_mae, { 0.0 }, { 0.0 }, 0.0, { 0 } },
                                 { 0.0 }, { 0.0 }, got == sizeof(a) ? a.plateau_lr : 0.0f,
                                 a.plateau_bad, a.plateau_best };
        memcpy(a.step_in_epoch ? at->loss_sums : at->train_losses, a.out_losses,
               sizeof(a.out_losses));
        if (a.step_in_epoch) /* the last epoch's: not kept, and printed only once recomputed */
                for (int k = 0; k < STRATA_MAX_OUTPUTS; k++)
                        at->train_losses[k] = NAN;
        memcpy(at->ev.losses, a.eval_losses, sizeof(at->ev.losses));
        load_accs(&a, got, &at->ev);
        if (info.loss[0] && strcmp(info.loss, mine->name) != 0) /* a fine-tune may mean it */
                fprintf(stderr, "strata-train: warning: %s was trained with the %s loss; this "
                                "run goes on with %s\n", path, info.loss, mine->name);
        if ((int)a.epochs_done >= o->epochs) /* a requeued job that had finished */
                fprintf(stderr, "strata-train: %s already holds %u epoch%s (--epochs %d): "
                                "nothing left to train; its result follows\n",
                        path, a.epochs_done, a.epochs_done == 1 ? "" : "s", o->epochs);
        else if (!info.bitwise)
                fprintf(stderr, "strata-train: %s was saved by %s on %d device(s); training "
                                "continues from its state on %d, no longer bit for bit\n",
                        path, strata_strategy_name(info.strategy), info.world, o->devices);
        return 0;
}

/*
 * --ckpt-dir, before any training: made when missing (not its parents), a directory, and one
 * this process can create files in: a probe created exclusively (mkstemp) and removed at
 * once. A full disk shows only when a save fails (exit 1 then, with the message).
 */
static int ckpt_dir_usable(const char *dir)
{
        char probe[PATH_BUF], why[160];
        struct stat st;
        int fd;

        if (mkdir(dir, 0755) != 0 && errno != EEXIST)
                snprintf(why, sizeof(why), "cannot be made (%s)%s", strerror(errno),
                         errno == ENOENT ? "; its parent must exist" : "");
        else if (stat(dir, &st) != 0)
                snprintf(why, sizeof(why), "%s", strerror(errno));
        else if (!S_ISDIR(st.st_mode))
                snprintf(why, sizeof(why), "is not a directory");
        else if (snprintf(probe, sizeof(probe), "%s/.strata-probe-XXXXXX", dir) >= PATH_BUF ||
                 (fd = mkstemp(probe)) < 0)
                snprintf(why, sizeof(why), "no file can be created in it (%s)",
                         strerror(errno));
        else {
                unlink(probe);
                close(fd);
                return 0;
        }
        return bad("--ckpt-dir %s: %s", dir, why);
}

/* A checkpoint strata-train writes: DIR/latest or DIR/epoch-*.ckpt. */
static int ckpt_file(const char *name)
{
        size_t n = strlen(name);

        return !strcmp(name, "latest") ||
               (!strncmp(name, "epoch-", 6) && n > 11 && !strcmp(name + n - 5, ".ckpt"));
}

/*
 * A new run (no --resume) must not mix its checkpoints with another run's: a directory that
 * holds anything (another process's probe aside) is refused, unless --overwrite, when the job's
 * first process removes the checkpoints there (latest, epoch-*.ckpt) before training.
 */
static int ckpt_dir_fresh(const struct opts *o, int rank)
{
        char seen[3][64], path[PATH_BUF];
        struct dirent *e;
        int n = 0, rc = 0;
        DIR *d;

        if (o->resume || !(d = opendir(o->ckpt_dir)))
                return 0;
        while ((e = readdir(d))) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
                    !strncmp(e->d_name, ".strata-probe-", 14))
                        continue;
                if (o->overwrite && rank <= 0 && ckpt_file(e->d_name) &&
                    snprintf(path, sizeof(path), "%s/%s", o->ckpt_dir, e->d_name) < PATH_BUF &&
                    unlink(path) != 0 && errno != ENOENT)
                        rc = bad("--ckpt-dir %s: %s cannot be removed (%s)", o->ckpt_dir,
                                 e->d_name, strerror(errno));
                if (o->resume_auto && !ckpt_file(e->d_name))
                        continue; /* --resume auto: the user's files beside a new run */
                if (n < 3)
                        snprintf(seen[n], sizeof(seen[n]), "%.63s", e->d_name);
                n++;
        }
        closedir(d);
        if (rc || !n || o->overwrite)
                return rc;
        return bad("--ckpt-dir %s already holds %d file%s (%s%s%s%s%s%s): --resume %s continues "
                   "that run; --overwrite starts afresh, removing its checkpoints", o->ckpt_dir,
                   n, n == 1 ? "" : "s", seen[0], n > 1 ? ", " : "", n > 1 ? seen[1] : "",
                   n > 2 ? ", " : "", n > 2 ? seen[2] : "", n > 3 ? ", ..." : "", o->ckpt_dir);
}

/*
 * --resume auto (issue 58, item 12; decision 0057): --ckpt-dir's latest when it has one, else
 * a new run there; the directory's other files (the user's notes) stay. A file named auto is
 * ./auto. 0, or 2 after the message.
 */
static int resume_auto(struct opts *o)
{
        char latest[PATH_BUF];
        struct stat st;

        if (!o->resume || strcmp(o->resume, "auto"))
                return 0;
        if (!o->ckpt_dir)
                return bad("--resume auto continues --ckpt-dir's run when it has one: give "
                           "--ckpt-dir");
        if (o->overwrite)
                return bad("--resume auto and --overwrite: continue or start afresh, not both");
        snprintf(latest, sizeof(latest), "%s/latest", o->ckpt_dir);
        o->resume = stat(latest, &st) == 0 ? o->ckpt_dir : NULL;
        o->resume_auto = !o->resume;
        return 0;
}

/**
 * @brief Before anything is loaded or started: --ckpt-every-steps only with --ckpt-dir; the
 *        directory made and usable, and without another run's files unless --resume or
 *        --overwrite (process @p rank of the job: its first removes them). 0, or 2.
 */
int ckpt_check(struct opts *o, int rank)
{
        if (o->ckpt_every && !o->ckpt_dir)
                return bad("--ckpt-every-steps needs --ckpt-dir");
        if (o->overwrite && !o->ckpt_dir)
                return bad("--overwrite starts a --ckpt-dir afresh: give --ckpt-dir");
        if (resume_auto(o))
                return 2;
        if (!o->ckpt_dir)
                return 0;
        return ckpt_dir_usable(o->ckpt_dir) || ckpt_dir_fresh(o, rank) ? 2 : 0;
}

/**
 * @brief --plan's share of ckpt_check(): the same refusals, the directory neither made nor
 *        cleared; --resume's checkpoint must be there to read. 0, or 2 after the message.
 */
int ckpt_plan_check(struct opts *o)
{
        char path[STRATA_CKPT_PATH_MAX];
        FILE *f;

        if (o->ckpt_every && !o->ckpt_dir)
                return bad("--ckpt-every-steps needs --ckpt-dir");
        if (o->overwrite && !o->ckpt_dir)
                return bad("--overwrite starts a --ckpt-dir afresh: give --ckpt-dir");
        if (resume_auto(o))
                return 2;
        if (!o->resume)
                return 0;
        if (resolve(o->resume, path, sizeof(path)))
                return 2;
        if (!(f = fopen(path, "rb")))
                return bad("--resume: %s cannot be read (%s)", path, strerror(errno));
        fclose(f);
        return 0;
}

/**
 * @brief --export-safetensors, before any training: its directory exists and this process can
 *        create files in it, and the path is not a directory. 0, or 2 after the message.
 */
int export_check(const struct opts *o)
{
        char dir[PATH_BUF], probe[PATH_BUF + 32];
        const char *slash;
        struct stat st;
        int fd;

        if (!o->export_st)
                return 0;
        slash = strrchr(o->export_st, '/');
        snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - o->export_st) : 1,
                 slash ? o->export_st : ".");
        if (slash == o->export_st)
                snprintf(dir, sizeof(dir), "/");
        if (stat(o->export_st, &st) == 0 && S_ISDIR(st.st_mode))
                return bad("--export-safetensors %s: is a directory; name the file to write",
                           o->export_st);
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
                return bad("--export-safetensors %s: its directory %s %s", o->export_st, dir,
                           stat(dir, &st) != 0 ? "does not exist" : "is not a directory");
        snprintf(probe, sizeof(probe), "%s/.strata-probe-XXXXXX", dir);
        if ((fd = mkstemp(probe)) < 0)
                return bad("--export-safetensors %s: no file can be created in %s (%s)",
                           o->export_st, dir, strerror(errno));
        unlink(probe);
        close(fd);
        return 0;
}

/**
 * @brief Before the first step: --resume's checkpoint loaded (r->at) and the last evaluation
 *        it kept. 0, or the exit status.
 */
int ckpt_start(struct run *r)
{
        const struct opts *o = &r->o;
        const struct strata_model *m = &r->model;
        const struct strata_loss_ops *mine = o->loss ? o->loss : &strata_softmax_cross_entropy;

        if (r->layered && m->noutputs > 0 && m->outputs[0].loss) /* a line's output names it */
                mine = m->outputs[0].loss;
        r->at.train_loss = NAN;
        r->at.ev = (struct evaluation){ NAN, NAN, NAN, NAN, { 0.0 }, { 0.0 }, 0.0, { 0 } };
        for (int k = 0; k < STRATA_MAX_OUTPUTS; k++)
                r->at.ev.losses[k] = r->at.ev.accs[k] = r->at.train_losses[k] = NAN;
        if (o->resume && resume(r->rt, o, mine, &r->at)) {
                strata_teardown(r->rt);
                return 2;
        }
        r->ev = r->at.ev;
        r->train_loss = r->at.train_loss;
        memcpy(r->train_losses, r->at.train_losses, sizeof(r->train_losses));
        return 0;
}

/** @brief SIGTERM, SIGUSR1 and SIGINT only note the signal: the loop acts on it. */
void catch_stop_signals(void)
{
        struct sigaction sa;

        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal;
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGUSR1, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
}

/**
 * @brief At a stop the library agreed on: every process of the job takes the signal one of
 *        them received (the largest number), so all save, say and exit alike.
 */
void stop_agree(struct strata_runtime *rt)
{
        int v[STRATA_MAX_DEVICES];
        void *bufs[STRATA_MAX_DEVICES];

        /* signal * 2 + limit: a signal anywhere wins over a time limit anywhere */
        for (int d = 0; d < STRATA_MAX_DEVICES; d++) {
                v[d] = stop_signal * 2 + !!limit_stop;
                bufs[d] = &v[d];
        }
        if (strata_reduce(rt, bufs, 1, STRATA_I32, STRATA_OP_MAX) == STRATA_OK && v[0] > 0) {
                stop_signal = v[0] / 2;
                limit_stop = v[0] == 1;
        }
}

/** @brief --max-time reached: stop at the next step boundary, as a signal would. */
void stop_for_limit(void)
{
        limit_stop = 1;
        strata_request_stop();
}

/** @brief The agreed stop is --max-time's (no signal): 1, and the stop request is cleared. */
int stop_limit(void)
{
        if (!limit_stop || stop_signal)
                return 0;
        strata_clear_stop(); /* the run evaluates and saves where it stands */
        return 1;
}

/** @brief The stop signal received (0: none yet). */
int stop_requested(void)
{
        return stop_signal;
}

/**
 * @brief A stop signal arrived: checkpoint where the run stands (TERM, USR1), say so, tear
 *        down; the exit status is 128 + the signal (1 when the checkpoint failed).
 */
int stop_run(struct strata_runtime *rt, const struct opts *o, struct position at)
{
        int sig = stop_signal, rc = STRATA_OK;

        if (o->ckpt_dir && sig != SIGINT)
                rc = save_ckpt(rt, o, at);
        fprintf(stderr, "strata-train: %s at epoch %d, step %ld%s%s\n", strsignal(sig),
                at.epoch + 1, at.step, rc ? ": checkpoint failed: " : "",
                rc ? strata_last_error()
                   : o->ckpt_dir && sig != SIGINT ? "; checkpoint saved"
                   : o->ckpt_dir ? "; nothing saved (an interrupt stops without a checkpoint)"
                                 : "; nothing saved (no --ckpt-dir)");
        strata_teardown(rt);
        return rc ? 1 : 128 + sig;
}
