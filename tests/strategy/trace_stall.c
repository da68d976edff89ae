/*
 * Observability through the API: the timeline trace (valid JSON checked by an independent
 * parser, nested events, expected names, overflow reported, atomic file, bad paths, write
 * errors, results unchanged) and the stall report.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tests/support/cli.h"
#include "tests/support/rig.h"

#define CHECK_TRACE STRATA_SOURCE_DIR "/tests/tools/check_trace.py"

static char dir[64];

static void make_dir(void)
{
        cli_mkdtemp(dir, sizeof(dir), "trace");
}

static void remove_dir(void)
{
        cli_rmtree(dir);
}

/* stderr into a file while @p on; the captured text into @p out on the way back. */
static int saved_fd = -1;

static void capture(int on, char *out, size_t n)
{
        char path[96];

        snprintf(path, sizeof(path), "%s/stderr", dir);
        if (on) {
                int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

                cr_assert_geq(fd, 0);
                fflush(stderr);
                saved_fd = dup(2);
                dup2(fd, 2);
                close(fd);
                return;
        }
        fflush(stderr);
        dup2(saved_fd, 2);
        close(saved_fd);
        {
                FILE *f = fopen(path, "r");
                size_t got = f ? fread(out, 1, n - 1, f) : 0;

                out[got] = '\0';
                if (f)
                        fclose(f);
        }
}

static int exists(const char *path)
{
        return access(path, F_OK) == 0;
}

static void check_trace(const char *path, int devices, const char *names)
{
        char cmd[1024];

        if (system("/usr/bin/python3 -c 'import json' 2>/dev/null") != 0)
                cr_assert_fail("/usr/bin/python3 is missing (make deps installs it)");
        snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s %s %d %s >&2", CHECK_TRACE, path,
                 devices, names);
        cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static void train(struct rig *r, const struct strata_config *c, int steps, float *params,
                  size_t n)
{
        struct strata_runtime *rt;
        struct strata_batch b;
        struct strata_metrics m;
        const float *p;
        size_t np;

        cr_assert_eq(strata_init(&rt, c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        rig_steps(r, rt, steps, &b);
        cr_assert_eq(strata_eval_step(rt, &b, &m), STRATA_OK);
        cr_assert_eq(strata_parameters(rt, 0, &p, &np), STRATA_OK);
        cr_assert_leq(np, n);
        memcpy(params, p, np * sizeof(float));
        cr_assert_eq(strata_teardown(rt), STRATA_OK, "%s", strata_last_error());
}

/* ddp on 2 devices: every track named, events nested, the step's parts all there; the file
 * appears only complete (no .tmp left), and tracing changes no bit of the result. */
Test(trace, ddp_timeline_is_valid_nested_and_changes_nothing)
{
        struct rig r;
        struct strata_config c;
        char path[96], tmp[128];
        float with[1024] = { 0 }, without[1024] = { 0 };

        make_dir();
        rig_init(&r, 1);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 1);
        train(&r, &c, 6, without, 1024);
        snprintf(path, sizeof(path), "%s/run.json", dir);
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        c.trace.path = path;
        train(&r, &c, 6, with, 1024);
        cr_assert(exists(path));
        cr_assert(!exists(tmp), "the temporary file must be renamed");
        cr_assert_eq(memcmp(with, without, sizeof(with)), 0, "tracing changed the parameters");
        check_trace(path, 2,
                    "train_step eval_step training_step backward_pass optimizer_step "
                    "'load batch' 'forward linear' 'forward batchnorm1d' 'backward linear' "
                    "'gradient bucket' all_reduce 'optimizer step' train_loss arena");
        remove_dir();
}

Test(trace, single_and_dp_timelines)
{
        struct rig r;
        struct strata_config c;
        char path[96];
        float p[1024];

        make_dir();
        rig_init(&r, 0);
        c = rig_cfg(&r, STRATA_STRATEGY_SINGLE, 1, 0);
        snprintf(path, sizeof(path), "%s/single.json", dir);
        c.trace.path = path;
        train(&r, &c, 3, p, 1024);
        check_trace(path, 1, "train_step 'forward linear' 'backward relu' 'optimizer step'");
        c = rig_cfg(&r, STRATA_STRATEGY_DP, 3, 0);
        snprintf(path, sizeof(path), "%s/dp.json", dir);
        c.trace.path = path;
        /* the caller records "wait devices" only when it finds a device still busy: in 3 steps
         * under load it may never (a failed run here); in 30 it waits in some */
        train(&r, &c, 30, p, 1024);
        check_trace(path, 3, "train_step training_step 'forward linear' 'wait devices'");
        remove_dir();
}

/* The trace's buffers are in the plan, and what init carves is what the plan says. */
Test(trace, buffers_are_planned_exactly)
{
        struct rig r;
        struct strata_config c;
        struct strata_plan_info off, on;
        struct strata_memory_info mem;
        struct strata_runtime *rt;
        char path[96];

        make_dir();
        rig_init(&r, 0);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        cr_assert_eq(strata_plan(&c, &off), STRATA_OK);
        snprintf(path, sizeof(path), "%s/p.json", dir);
        c.trace.path = path;
        c.trace.events = 1000;
        cr_assert_eq(strata_plan(&c, &on), STRATA_OK);
        cr_assert_geq(on.bytes - off.bytes, 2 * 1000 * 40, "%zu vs %zu", on.bytes, off.bytes);
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        cr_assert_eq(strata_memory(rt, &mem), STRATA_OK);
        cr_assert_eq(mem.used, mem.planned);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        remove_dir();
}

/* A buffer too small for one step drops events: counted, said on stderr and in the file. */
Test(trace, overflow_is_reported_never_silent)
{
        struct rig r;
        struct strata_config c;
        struct strata_runtime *rt;
        char path[96], err[4096], cmd[256];
        uint64_t written, dropped;

        make_dir();
        rig_init(&r, 1);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 1);
        snprintf(path, sizeof(path), "%s/small.json", dir);
        c.trace.path = path;
        c.trace.events = 16;
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        capture(1, NULL, 0);
        rig_steps(&r, rt, 4, NULL);
        cr_assert_eq(strata_flush_trace(rt), STRATA_OK);
        /* More drops, another flush: said once, not once a flush (issue 58, item 8). */
        rig_steps(&r, rt, 4, NULL);
        cr_assert_eq(strata_flush_trace(rt), STRATA_OK);
        capture(0, err, sizeof(err));
        cr_assert_eq(strata_trace_counts(rt, &written, &dropped), STRATA_OK);
        cr_assert_gt(dropped, 0);
        cr_assert_gt(written, 0);
        cr_assert_not_null(strstr(err, "events dropped"), "stderr: %s", err);
        cr_assert_null(strstr(strstr(err, "events dropped") + 1, "events dropped"),
                       "said more than once: %s", err);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        check_trace(path, 2, "'trace events dropped'");
        snprintf(cmd, sizeof(cmd), "grep -q '\"dropped\":%llu' %s", (unsigned long long)dropped,
                 path);
        cr_assert_eq(system(cmd), 0, "the file must say how many were dropped");
        remove_dir();
}

Test(trace, bad_input_is_refused_and_leaves_nothing)
{
        struct rig r;
        struct strata_config c;
        struct strata_plan_info pl;
        struct strata_runtime *rt = (struct strata_runtime *)&r;
        uint64_t a, b;

        rig_init(&r, 0);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        c.trace.path = "/nonexistent-strata-dir/t.json";
        cr_assert_eq(strata_init(&rt, &c), STRATA_EIO);
        cr_assert_not_null(strstr(strata_last_error(), "/nonexistent-strata-dir/t.json"),
                           "%s", strata_last_error());
        cr_assert_eq(rt, (struct strata_runtime *)&r, "a failed init leaves *rt untouched");
        c.trace.path = "";
        cr_assert_eq(strata_plan(&c, &pl), STRATA_EINVAL);
        c.trace.path = "/tmp/x.json";
        c.trace.events = 3;
        cr_assert_eq(strata_plan(&c, &pl), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "events"), "%s", strata_last_error());
        c.trace.events = 0;
        c.trace.stall_s = 0.0 / 0.0;
        cr_assert_eq(strata_plan(&c, &pl), STRATA_EINVAL);
        cr_assert_eq(strata_flush_trace(NULL), STRATA_EINVAL);
        cr_assert_eq(strata_trace_counts(NULL, &a, &b), STRATA_EINVAL);
}

/*
 * A write that fails (file size limit) is an error with a message; no partial file stays, and
 * teardown says again that the trace was not written.
 */
Test(trace, write_error_is_reported_and_leaves_no_partial_file)
{
        struct rig r;
        struct strata_config c;
        struct strata_runtime *rt;
        struct rlimit lim = { 8192, 8192 };
        char path[96], tmp[128];
        int rc;

        make_dir();
        signal(SIGXFSZ, SIG_IGN);
        rig_init(&r, 0);
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        snprintf(path, sizeof(path), "%s/limited.json", dir);
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        c.trace.path = path;
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
        rig_steps(&r, rt, 8, NULL);
        rc = strata_flush_trace(rt);
        cr_assert_eq(rc, STRATA_EIO);
        cr_assert_not_null(strstr(strata_last_error(), "limited.json"), "%s",
                           strata_last_error());
        rig_steps(&r, rt, 2, NULL); /* training goes on without the trace */
        cr_assert_eq(strata_teardown(rt), STRATA_EIO);
        cr_assert_not_null(strstr(strata_last_error(), "limited.json not written"), "%s",
                           strata_last_error());
        cr_assert(!exists(tmp) && !exists(path), "no partial trace may remain");
        snprintf(tmp, sizeof(tmp), "rmdir %s", dir);
        cr_assert_eq(system(tmp), 0, "no temporary file may remain either");
        mkdir(dir, 0700);
        remove_dir();
}

/* ---- stall report ---- */

static void sleepy_forward(struct strata_layer *l, const struct strata_step_ctx *c,
                           const float *x, float *y, int rows)
{
        struct timespec ts = { 1, 0 };

        if (c->rank == 1 && c->train && c->step == 0)
                nanosleep(&ts, NULL);
        strata_relu.forward(l, c, x, y, rows);
}

/* The rig as linear, sleepy (relu that sleeps), BatchNorm, linear: ddp on 2, synced BN. */
static struct strata_config sleepy_rig(struct rig *r, struct strata_module_ops *sleepy)
{
        *sleepy = strata_relu;
        sleepy->name = "sleepy";
        sleepy->forward = sleepy_forward;
        rig_init(r, 1);
        r->mods[0] = (struct strata_module){ .ops = &strata_linear, .out = 16 };
        r->mods[1] = (struct strata_module){ .ops = sleepy };
        r->mods[2] = (struct strata_module){ .ops = &strata_batchnorm1d };
        r->mods[3] = (struct strata_module){ .ops = &strata_linear, .out = RIG_CLASSES };
        r->model.nmodules = 4;
        return rig_cfg(r, STRATA_STRATEGY_DDP, 2, 1);
}

/*
 * Device 1 sleeps 1 s in a module of step 0 while device 0 waits for it in SyncBatchNorm's
 * all_reduce: past the 0.2 s bound the report names the late device and where it is, and the
 * step still succeeds (the timeout is 10 s).
 */
Test(stall, report_names_late_device_and_where_it_is)
{
        struct strata_module_ops sleepy;
        struct strata_runtime *rt;
        struct rig r;
        struct strata_config c;
        char err[4096];

        make_dir();
        c = sleepy_rig(&r, &sleepy);
        c.trace.stall_s = 0.2;
        c.device.timeout_s = 10.0;
        cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        capture(1, NULL, 0);
        rig_steps(&r, rt, 2, NULL);
        capture(0, err, sizeof(err));
        cr_assert_not_null(strstr(err, "stall: device 0 has waited"), "stderr: %s", err);
        cr_assert_not_null(strstr(err, "all_reduce"), "stderr: %s", err);
        cr_assert_not_null(strstr(err, "not arrived: device 1 (step 0, in forward (sleepy))"),
                           "stderr: %s", err);
        cr_assert_null(strstr(err, "device 0 (step"), "device 0 is not late: %s", err);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        remove_dir();
}

/* A wait shorter than the bound, or a bound turned off, reports nothing. */
Test(stall, no_report_below_the_bound_or_when_off)
{
        struct strata_module_ops sleepy;
        struct strata_runtime *rt;
        struct rig r;
        struct strata_config c;
        char err[4096];

        make_dir();
        for (int off = 0; off < 2; off++) {
                c = sleepy_rig(&r, &sleepy);
                c.trace.stall_s = off ? -1.0 : 0.0; /* the default bound (60 s), then never */
                cr_assert_eq(strata_init(&rt, &c), STRATA_OK, "%s", strata_last_error());
                cr_assert_eq(strata_connect(rt), STRATA_OK);
                capture(1, NULL, 0);
                rig_steps(&r, rt, 2, NULL);
                capture(0, err, sizeof(err));
                cr_assert_null(strstr(err, "stall"), "stall_s %g: %s", c.trace.stall_s, err);
                cr_assert_eq(strata_teardown(rt), STRATA_OK);
        }
        remove_dir();
}
