/*
 * Checkpoints: training 2N steps straight and training N, saving, loading into a fresh
 * runtime and training N more give bitwise the same losses, parameters, optimizer state and
 * evaluation, for single, dp and ddp with BatchNorm (synchronised or not), dropout, AdamW,
 * accumulation and clipping. Corrupt, truncated, foreign and mismatched files are refused
 * with nothing changed; a process killed at random moments while saving never leaves a
 * checkpoint that does not load.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <glob.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/support/rig.h"

#define N 6
#define MAXP 4096

struct result {
        double loss[2 * N];
        float params[MAXP];
        size_t n;
        float opt[2 * MAXP];
        size_t nopt;
        uint64_t t;
        struct strata_metrics eval;
};

/* Train steps [from, to) of the rig's data order; the loader continues where it stood. */
static void train(struct rig *r, struct strata_runtime *rt, int from, int to, struct result *o)
{
        struct strata_batch b;
        struct strata_metrics m;

        strata_loader_reset(&r->loader, r->idx, 256);
        for (int s = 0; s < to; s++) {
                cr_assert(strata_loader_next(&r->loader, &b));
                if (s < from)
                        continue;
                cr_assert_eq(strata_train_step(rt, &b, &m), STRATA_OK, "%s",
                             strata_last_error());
                o->loss[s] = m.loss;
        }
}

static void finish(struct rig *r, struct strata_runtime *rt, struct result *o)
{
        const float *p, *st;
        struct strata_batch b;

        cr_assert_eq(strata_parameters(rt, 0, &p, &o->n), STRATA_OK);
        cr_assert_leq(o->n, MAXP);
        memcpy(o->params, p, o->n * sizeof(float));
        cr_assert_eq(strata_optimizer_state(rt, 0, &st, &o->nopt, &o->t), STRATA_OK);
        memcpy(o->opt, st, o->nopt * sizeof(float));
        strata_loader_reset(&r->loader, r->idx + 128, 64);
        cr_assert(strata_loader_next(&r->loader, &b));
        cr_assert_eq(strata_eval_step(rt, &b, &o->eval), STRATA_OK);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* This test's directory (made by the first tmp_path()) and the process that made it. */
static char tmp_dir[64];
static pid_t tmp_owner;

/* At the test process's exit: its directory and the files in it go (issue 58, item 16). */
static void tmp_remove(void)
{
        char path[160];
        struct dirent *e;
        DIR *d;

        if (getpid() != tmp_owner || !(d = opendir(tmp_dir)))
                return;
        while ((e = readdir(d)))
                if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
                    snprintf(path, sizeof(path), "%s/%s", tmp_dir, e->d_name) < (int)sizeof(path))
                        unlink(path);
        closedir(d);
        rmdir(tmp_dir);
}

/* A path in this test's directory; the string stays valid for the next three calls only. */
static const char *tmp_path(const char *name)
{
        static char path[4][128];
        static int k;
        char *p = path[k++ & 3];
        char *dir = tmp_dir;

        if (!dir[0]) {
                strcpy(dir, "/tmp/strata-ckpt-XXXXXX");
                cr_assert_not_null(mkdtemp(dir));
                tmp_owner = getpid();
                atexit(tmp_remove);
        }
        snprintf(p, 128, "%s/%s", dir, name);
        return p;
}

static void resume_matches(struct rig *r, const struct strata_config *c)
{
        static struct result straight, resumed;
        const char *path = tmp_path("resume.ckpt");
        struct strata_runtime *rt;
        char app[16] = "epoch 1", back[32];
        struct strata_ckpt_info info;
        size_t got = 0;

        memset(&straight, 0, sizeof(straight));
        memset(&resumed, 0, sizeof(resumed));
        rt = rig_open(c);
        train(r, rt, 0, 2 * N, &straight);
        finish(r, rt, &straight);

        rt = rig_open(c);
        train(r, rt, 0, N, &resumed);
        cr_assert_eq(strata_save_checkpoint(rt, path, app, sizeof(app)), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        rt = rig_open(c);
        cr_assert_eq(strata_load_checkpoint(rt, path, back, sizeof(back), &got, &info), STRATA_OK,
                     "%s", strata_last_error());
        cr_assert_eq(got, sizeof(app));
        cr_assert_str_eq(back, "epoch 1");
        cr_assert(info.bitwise && info.world == c->strategy.devices && info.step == N, "info %d %d",
                  info.bitwise, info.world);
        train(r, rt, N, 2 * N, &resumed);
        finish(r, rt, &resumed);

        cr_assert_eq(memcmp(straight.loss, resumed.loss, sizeof(straight.loss)), 0,
                     "losses differ after resume");
        cr_assert_eq(straight.n, resumed.n);
        cr_assert_eq(memcmp(straight.params, resumed.params, straight.n * sizeof(float)), 0,
                     "parameters differ after resume");
        cr_assert_eq(straight.t, resumed.t, "optimizer steps %llu vs %llu",
                     (unsigned long long)straight.t, (unsigned long long)resumed.t);
        cr_assert_eq(memcmp(straight.opt, resumed.opt, straight.nopt * sizeof(float)), 0,
                     "optimizer state differs after resume");
        cr_assert_eq(memcmp(&straight.eval, &resumed.eval, sizeof(straight.eval)), 0,
                     "evaluation differs after resume (running statistics?)");
}

Test(checkpoint_resume, single_bn_dropout_sgd, .timeout = 60)
{
        struct rig r;

        rig_init_full(&r);
        resume_matches(&r, &r.cfg);
}

Test(checkpoint_resume, single_adamw_accumulate_clip, .timeout = 60)
{
        struct strata_config c;
        struct rig r;

        rig_init_full(&r);
        c = r.cfg;
        c.optim.kind = STRATA_OPTIM_ADAMW;
        c.optim.lr = 1e-2f;
        c.optim.weight_decay = 0.01f;
        c.train.accumulate = 2;
        c.train.clip_norm = 0.5f;
        resume_matches(&r, &c);
}

Test(checkpoint_resume, dp_sync_bn_dropout, .timeout = 60)
{
        struct strata_config c;
        struct rig r;

        rig_init_full(&r);
        c = rig_cfg(&r, STRATA_STRATEGY_DP, 2, 1);
        c.train.clip_value = 0.05f;
        resume_matches(&r, &c);
}

/* The schedule's position is the optimizer's step count: warm-up then cosine resume too. */
Test(checkpoint_resume, ddp_warmup_cosine_schedule, .timeout = 60)
{
        struct strata_config c;
        struct rig r;

        rig_init_full(&r);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 1);
        c.optim.warmup = 3;
        c.optim.schedule = STRATA_LR_COSINE;
        c.optim.t_max = 2 * N;
        c.optim.lr_min = 0.001f;
        resume_matches(&r, &c);
}

/* ddp without SyncBatchNorm: each device's running statistics differ and must all return. */
Test(checkpoint_resume, ddp_bn_unsynced_adamw, .timeout = 60)
{
        struct strata_config c;
        struct rig r;

        rig_init_full(&r);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 3, 0);
        c.optim.kind = STRATA_OPTIM_ADAMW;
        c.optim.lr = 1e-2f;
        resume_matches(&r, &c);
}

Test(checkpoint_resume, ddp_sync_bn_accumulate, .timeout = 60)
{
        struct strata_config c;
        struct rig r;

        rig_init_full(&r);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 1);
        c.train.accumulate = 3;
        c.train.clip_norm = 1.0f;
        resume_matches(&r, &c);
}

/* ---- bad files and bad calls ---- */

static void copy_file(const char *from, const char *to, long keep, long flip)
{
        static unsigned char buf[1 << 20];
        FILE *f = fopen(from, "rb"), *g = fopen(to, "wb");
        size_t n;

        cr_assert(f && g);
        n = fread(buf, 1, sizeof(buf), f);
        if (keep >= 0 && (size_t)keep < n)
                n = (size_t)keep;
        if (flip >= 0)
                buf[flip < 0 ? 0 : (size_t)flip % n] ^= 0x10;
        fwrite(buf, 1, n, g);
        fclose(f);
        fclose(g);
}

static long file_size(const char *p)
{
        struct stat st;

        cr_assert_eq(stat(p, &st), 0);
        return (long)st.st_size;
}

/* A refused load changes nothing: same parameters, still READY, still trains. */
static void refused(struct rig *r, struct strata_runtime *rt, const char *path, int want,
                    const char *why)
{
        static float before[MAXP];
        const float *p;
        size_t n;
        struct result o;
        int rc;

        cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
        memcpy(before, p, n * sizeof(float));
        rc = strata_load_checkpoint(rt, path, NULL, 0, NULL, NULL);
        cr_assert_eq(rc, want, "%s: %d, %s", why, rc, strata_last_error());
        cr_assert_gt(strlen(strata_last_error()), 10, "%s: no message", why);
        cr_assert_eq(memcmp(before, p, n * sizeof(float)), 0, "%s: parameters changed", why);
        cr_assert_eq(strata_state(rt), STRATA_STATE_READY, "%s", why);
        train(r, rt, 0, 1, &o);
}

Test(checkpoint_resume, bad_files_refused_and_nothing_changes, .timeout = 60)
{
        char good[128], bad[128], fifo[128];
        struct strata_runtime *rt, *other;
        struct strata_config c, wide;
        struct strata_module mods[6];
        struct strata_model m;
        struct result o;
        struct rig r;
        long size;

        snprintf(good, sizeof(good), "%s", tmp_path("good.ckpt"));
        snprintf(bad, sizeof(bad), "%s", tmp_path("bad.ckpt"));
        snprintf(fifo, sizeof(fifo), "%s", tmp_path("fifo"));
        rig_init_full(&r);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        rt = rig_open(&c);
        train(&r, rt, 0, 2, &o);
        cr_assert_eq(strata_save_checkpoint(rt, good, NULL, 0), STRATA_OK, "%s",
                     strata_last_error());
        size = file_size(good);
        cr_assert_gt(size, 1024);
        train(&r, rt, 0, 3, &o); /* move away from the saved state */

        copy_file(good, bad, size / 2, -1);
        refused(&r, rt, bad, STRATA_EFORMAT, "truncated in the data");
        copy_file(good, bad, 300, -1);
        refused(&r, rt, bad, STRATA_EFORMAT, "truncated in the header");
        copy_file(good, bad, -1, size - 3);
        refused(&r, rt, bad, STRATA_EFORMAT, "bit flipped in the data");
        copy_file(good, bad, -1, 600);
        refused(&r, rt, bad, STRATA_EFORMAT, "bit flipped in the tensor table");
        copy_file(good, bad, -1, 9);
        refused(&r, rt, bad, STRATA_EFORMAT, "bit flipped in the header (version)");
        copy_file(good, bad, -1, 40);
        refused(&r, rt, bad, STRATA_EFORMAT, "bit flipped in the header (step)");
        copy_file(good, bad, -1, 1);
        refused(&r, rt, bad, STRATA_EFORMAT, "not a checkpoint (magic)");
        refused(&r, rt, tmp_path("missing.ckpt"), STRATA_EIO, "no such file");
        refused(&r, rt, "/tmp", STRATA_EFORMAT, "a directory");
        unlink(fifo);
        cr_assert_eq(mkfifo(fifo, 0600), 0);
        refused(&r, rt, fifo, STRATA_EFORMAT, "a FIFO (must not block)");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);

        /* Another model is refused; another device count or strategy is resharded. */
        memcpy(mods, r.mods, sizeof(mods));
        mods[0].out = 17;
        m = r.model;
        m.modules = mods;
        wide = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        wide.model = &m;
        other = rig_open(&wide);
        refused(&r, other, good, STRATA_EINVAL, "another model");
        cr_assert_eq(strata_teardown(other), STRATA_OK);
}

/* Loaded into @p c: every device holds the saved parameters, and training goes on. */
static void resharded(struct rig *r, const struct strata_config *c, const char *path,
                      const float *saved, size_t n)
{
        struct strata_runtime *rt = rig_open(c);
        struct strata_ckpt_info info;
        const float *p, *p0;
        struct result o;
        size_t m;

        cr_assert_eq(strata_load_checkpoint(rt, path, NULL, 0, NULL, &info), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(info.bitwise, 0, "a resharded load must say it is not bitwise");
        cr_assert_eq(info.world, 2);
        for (int d = 0; d < c->strategy.devices; d++) {
                cr_assert_eq(strata_parameters(rt, d, &p, &m), STRATA_OK);
                cr_assert_eq(memcmp(p, saved, n * sizeof(float)), 0, "device %d", d);
        }
        train(r, rt, 0, 3, &o);
        cr_assert_eq(strata_parameters(rt, 0, &p0, &m), STRATA_OK);
        for (int d = 1; d < c->strategy.devices; d++) {
                cr_assert_eq(strata_parameters(rt, d, &p, &m), STRATA_OK);
                cr_assert_eq(memcmp(p, p0, n * sizeof(float)), 0, "replicas diverged (%d)", d);
        }
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* A ddp checkpoint of 2 devices continues on 3, on dp, on single (PyTorch's replicated
 * state: no longer bitwise, and said so). */
Test(checkpoint_resume, other_device_count_or_strategy_continues, .timeout = 60)
{
        static float saved[MAXP];
        char path[128];
        struct strata_runtime *rt;
        struct strata_config c;
        const float *p;
        struct result o;
        struct rig r;
        size_t n;

        snprintf(path, sizeof(path), "%s", tmp_path("reshard.ckpt"));
        rig_init_full(&r);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        c.optim.kind = STRATA_OPTIM_ADAMW;
        c.optim.lr = 1e-2f;
        rt = rig_open(&c);
        train(&r, rt, 0, 4, &o);
        cr_assert_eq(strata_save_checkpoint(rt, path, NULL, 0), STRATA_OK);
        cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
        memcpy(saved, p, n * sizeof(float));
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        c.strategy.devices = 3;
        resharded(&r, &c, path, saved, n);
        c = rig_cfg(&r, STRATA_STRATEGY_DP, 2, 0);
        c.optim.kind = STRATA_OPTIM_ADAMW;
        c.optim.lr = 1e-2f;
        resharded(&r, &c, path, saved, n);
        c.strategy.kind = STRATA_STRATEGY_SINGLE;
        c.strategy.devices = 1;
        resharded(&r, &c, path, saved, n);
}

Test(checkpoint_resume, bad_calls, .timeout = 30)
{
        const char *path = tmp_path("calls.ckpt");
        unsigned char big[STRATA_CKPT_APP_BYTES + 1] = { 0 };
        struct strata_runtime *rt = NULL;
        struct strata_batch b;
        struct strata_config c;
        struct rig r;

        rig_init(&r, 0);
        c = r.cfg;
        c.train.accumulate = 2;
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK);
        cr_assert_eq(strata_save_checkpoint(rt, path, NULL, 0), STRATA_EBADSTATE,
                     "before connect");
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        cr_assert_eq(strata_save_checkpoint(NULL, path, NULL, 0), STRATA_EINVAL);
        cr_assert_eq(strata_save_checkpoint(rt, NULL, NULL, 0), STRATA_EINVAL);
        cr_assert_eq(strata_save_checkpoint(rt, "", NULL, 0), STRATA_EINVAL);
        cr_assert_eq(strata_save_checkpoint(rt, path, big, sizeof(big)), STRATA_EINVAL);
        cr_assert_eq(strata_save_checkpoint(rt, path, NULL, 4), STRATA_EINVAL);
        cr_assert_eq(strata_save_checkpoint(rt, "/nonexistent-dir/x.ckpt", NULL, 0), STRATA_EIO);
        cr_assert(strstr(strata_last_error(), "nonexistent-dir"), "%s", strata_last_error());
        strata_loader_reset(&r.loader, r.idx, 256);
        cr_assert(strata_loader_next(&r.loader, &b));
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK);
        cr_assert_eq(strata_save_checkpoint(rt, path, NULL, 0), STRATA_EBADSTATE,
                     "inside an accumulation window");
        cr_assert(strstr(strata_last_error(), "accumulation"), "%s", strata_last_error());
        cr_assert_eq(access(path, F_OK), -1, "a refused save wrote a file");
        cr_assert(strata_loader_next(&r.loader, &b));
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK);
        cr_assert_eq(strata_save_checkpoint(rt, path, NULL, 0), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_load_checkpoint(rt, path, NULL, 8, NULL, NULL), STRATA_EINVAL);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/*
 * SIGKILL at random moments of repeated saves: the file at the path always loads, and the
 * temporaries the killed writers left are swept by the next save.
 */
Test(checkpoint_resume, killed_while_saving_never_corrupts, .timeout = 120)
{
        const char *path = tmp_path("killed.ckpt");
        char pattern[160];
        struct strata_runtime *rt;
        glob_t g = { 0 };
        int loaded = 0;
        struct result o;
        struct rig r;

        rig_init_full(&r);
        rt = rig_open(&r.cfg);
        train(&r, rt, 0, 1, &o);
        cr_assert_eq(strata_save_checkpoint(rt, path, "0", 1), STRATA_OK);
        srand(7);
        for (int k = 0; k < 25; k++) {
                pid_t pid = fork();
                struct timespec d = { 0, (long)(rand() % 4000) * 1000L };
                char app[8];
                size_t got;
                int st;

                cr_assert_geq(pid, 0);
                if (pid == 0) {
                        for (unsigned i = 0;; i++) {
                                snprintf(app, sizeof(app), "%u", i % 1000);
                                strata_save_checkpoint(rt, path, app, strlen(app) + 1);
                        }
                }
                nanosleep(&d, NULL);
                kill(pid, SIGKILL);
                waitpid(pid, &st, 0);
                cr_assert_eq(strata_load_checkpoint(rt, path, app, sizeof(app), &got, NULL),
                             STRATA_OK,
                             "after kill %d: %s", k, strata_last_error());
                loaded++;
        }
        cr_assert_eq(loaded, 25);
        snprintf(pattern, sizeof(pattern), "%s.tmp.*", path);
        if (glob(pattern, 0, NULL, &g) == 0)
                cr_log_info("%zu temporaries of killed writers", g.gl_pathc);
        globfree(&g);
        cr_assert_eq(strata_save_checkpoint(rt, path, "0", 1), STRATA_OK);
        cr_assert_eq(glob(pattern, 0, NULL, &g), GLOB_NOMATCH, "left: %s",
                     g.gl_pathc ? g.gl_pathv[0] : "");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/*
 * The safetensors export loads into the equivalent PyTorch model (names, shapes, BatchNorm's
 * running statistics) and predicts the same logits. Needs python3-torch (make deps).
 */
Test(checkpoint_resume, safetensors_loads_in_pytorch, .timeout = 120)
{
        static float logits[RIG_BATCH * RIG_CLASSES];
        struct strata_runtime *rt;
        struct strata_batch b;
        struct result o;
        struct rig r;
        char st[128];

        snprintf(st, sizeof(st), "%s", tmp_path("model.safetensors"));
        if (system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0)
                cr_skip_test("python3-torch is not installed (make deps installs it)");
        rig_init_full(&r);
        rt = rig_open(&r.cfg);
        train(&r, rt, 0, 8, &o);
        cr_assert_eq(strata_export_safetensors(rt, st), STRATA_OK, "%s", strata_last_error());
        strata_loader_reset(&r.loader, r.idx + 64, 64);
        cr_assert(strata_loader_next(&r.loader, &b));
        cr_assert_eq(strata_predict_step(rt, &b, logits, RIG_BATCH * RIG_CLASSES), STRATA_OK);
        rig_pytorch_matches(st, b.x, logits, b.rows);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

/* The test's directory and its files are gone once its process exits (issue 58, item 16). */
Test(checkpoint_resume, the_test_directory_goes_at_exit)
{
        struct stat st;
        int fd[2], status;
        char dir[64] = "";
        pid_t pid;

        cr_assert_eq(pipe(fd), 0);
        pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                const char *path = tmp_path("left.ckpt");
                FILE *f = fopen(path, "w");

                if (f)
                        fclose(f);
                if (write(fd[1], tmp_dir, sizeof(tmp_dir)) != (ssize_t)sizeof(tmp_dir))
                        _exit(3);
                exit(f ? 0 : 2);
        }
        cr_assert_eq(read(fd[0], dir, sizeof(dir)), (ssize_t)sizeof(dir));
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        cr_assert_str_neq(dir, "");
        cr_expect_neq(stat(dir, &st), 0, "%s is still there after its process exited", dir);
}
