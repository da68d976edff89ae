/*
 * strata_load_weights(): an export loads back bitwise under every strategy (fsdp's devices
 * fill their shards, ddp's every replica) and precision; a state_dict written by PyTorch in
 * F64, BF16, F16 and F32 loads converted; a file that does not fit is refused naming every
 * offending tensor with both shapes and changes nothing; the partial mode loads what fits and
 * lists the rest; optimizer state starts at zero; the same file loaded twice gives bitwise the
 * same run; every bad argument is refused with nothing changed.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/rig.h"

static char dir[64], st[128], st2[128];

static void dir_init(void)
{
        snprintf(dir, sizeof(dir), "/tmp/strata-weights-XXXXXX");
        cr_assert_not_null(mkdtemp(dir));
        snprintf(st, sizeof(st), "%s/a.safetensors", dir);
        snprintf(st2, sizeof(st2), "%s/b.safetensors", dir);
}

static void dir_fini(void)
{
        char cmd[160];

        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        cr_assert_eq(system(cmd), 0);
}

/* Every group of device @p dev's model, values concatenated into @p out; their count. */
static size_t all_values(struct strata_runtime *rt, int dev, float *out, size_t cap)
{
        struct strata_param p;
        size_t n = 0, k;

        for (int g = 0; strata_parameter(rt, dev, g, &p) == STRATA_OK; g++) {
                cr_assert_eq(strata_parameter_copy(rt, dev, g, out + n, cap - n, &k), STRATA_OK,
                             "%s", strata_last_error());
                n += k;
        }
        return n;
}

/* The bytes of file @p path into @p buf (at most @p cap); their count. */
static size_t file_bytes(const char *path, unsigned char *buf, size_t cap)
{
        FILE *f = fopen(path, "rb");
        size_t n;

        cr_assert_not_null(f, "%s", path);
        n = fread(buf, 1, cap, f);
        fclose(f);
        return n;
}

/* The full rig trained @p steps steps under @p c, exported to @p path. */
static void export_trained(struct rig *r, const struct strata_config *c, int steps,
                           const char *path)
{
        struct strata_runtime *rt = rig_open(c);

        rig_steps(r, rt, steps, NULL);
        cr_assert_eq(strata_export_safetensors(rt, path), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
}

Test(load_weights, export_round_trip_bitwise, .timeout = 60)
{
        static float want[4096], got[4096];
        struct strata_weights_info info;
        struct strata_runtime *rt;
        struct rig r;
        size_t n, m;

        dir_init();
        rig_init_full(&r);
        rt = rig_open(&r.cfg);
        rig_steps(&r, rt, 6, NULL);
        n = all_values(rt, 0, want, 4096);
        cr_assert_eq(strata_export_safetensors(rt, st), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);

        rt = rig_open(&r.cfg);
        cr_assert_eq(strata_load_weights(rt, st, STRATA_WEIGHTS_STRICT, &info), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(info.loaded, 8, "two linears' weight and bias, BatchNorm's four: %d",
                     info.loaded);
        cr_assert_eq(info.missing + info.mismatched + info.unexpected, 0);
        cr_assert_str_empty(info.left);
        m = all_values(rt, 0, got, 4096);
        cr_assert_eq(m, n);
        cr_assert_eq(memcmp(want, got, n * sizeof(float)), 0, "the export loads back bitwise");
        cr_assert_eq(strata_export_safetensors(rt, st2), STRATA_OK);
        {
                static unsigned char a[65536], b[65536];
                size_t na = file_bytes(st, a, sizeof(a)), nb = file_bytes(st2, b, sizeof(b));

                cr_assert_eq(na, nb);
                cr_assert_eq(memcmp(a, b, na), 0, "exported again, the same file");
        }
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        dir_fini();
}

Test(load_weights, pytorch_state_dict_in_four_dtypes, .timeout = 120)
{
        static float want[4096], got[4096];
        struct strata_weights_info info;
        struct strata_runtime *rt;
        char cmd[512], exp[160];
        struct rig r;
        FILE *f;
        size_t n, m;

        if (system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0)
                cr_skip_test("python3-torch is not installed (make deps installs it)");
        dir_init();
        snprintf(exp, sizeof(exp), "%s/expected.f32", dir);
        snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s/tests/tools/torch_weights.py %s %s",
                 STRATA_SOURCE_DIR, st, exp);
        cr_assert_eq(system(cmd), 0, "%s", cmd);
        f = fopen(exp, "rb");
        cr_assert_not_null(f);
        n = fread(want, sizeof(float), 4096, f);
        fclose(f);

        rig_init_full(&r);
        rt = rig_open(&r.cfg);
        cr_assert_eq(strata_load_weights(rt, st, STRATA_WEIGHTS_STRICT, &info), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(info.unexpected, 0, "num_batches_tracked is passed over: %s", info.left);
        m = all_values(rt, 0, got, 4096);
        cr_assert_eq(m, n, "%zu values loaded, %zu written", m, n);
        cr_assert_eq(memcmp(want, got, n * sizeof(float)), 0,
                     "F64 rounded, BF16 and F16 widened exactly, F32 as is");
        rig_steps(&r, rt, 2, NULL); /* it trains from them */
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        dir_fini();
}

/* The rig with another first width (24, not 16) and a head of 3 classes, not 4. */
static void other_rig(struct rig *r)
{
        rig_init_full(r);
        r->mods[0].out = 24;
        r->mods[4].out = 3;
        r->cfg.classes = 3;
}

Test(load_weights, strict_refusal_names_every_tensor, .timeout = 60)
{
        static const char *const named[] = {
                "layers.0.weight: file [16, 20] F32, model [24, 20]",
                "layers.0.bias: file [16] F32, model [24]",
                "layers.1.weight: file [16] F32, model [24]",
                "layers.1.bias: file [16] F32, model [24]",
                "layers.1.running_mean: file [16] F32, model [24]",
                "layers.1.running_var: file [16] F32, model [24]",
                "layers.4.weight: file [4, 16] F32, model [3, 24]",
                "layers.4.bias: file [4] F32, model [3]",
        };
        static float before[4096], after[4096];
        struct strata_weights_info info;
        struct strata_runtime *rt;
        struct rig r, o;
        const char *e;

        dir_init();
        rig_init_full(&r);
        export_trained(&r, &r.cfg, 2, st);
        other_rig(&o);
        o.cfg.model = &o.model;
        rt = rig_open(&o.cfg);
        all_values(rt, 0, before, 4096);
        cr_assert_eq(strata_load_weights(rt, st, STRATA_WEIGHTS_STRICT, &info), STRATA_EINVAL);
        e = strata_last_error();
        for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
                cr_assert_not_null(strstr(e, named[i]), "%s not in: %s", named[i], e);
                cr_assert_not_null(strstr(info.left, named[i]), "%s", info.left);
        }
        cr_assert_eq(info.mismatched, 8, "every group differs: %s", info.left);
        cr_assert_eq(info.loaded, 0);
        all_values(rt, 0, after, 4096);
        cr_assert_eq(memcmp(before, after, sizeof(before)), 0, "a refusal changes nothing");
        cr_assert_eq(strata_state(rt), STRATA_STATE_READY);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);

        /* a model without BatchNorm: the file's four BatchNorm tensors are unexpected, and
         * the last Linear of the file is module 4 where the model's is module 2 */
        rig_init(&o, 0);
        rt = rig_open(&o.cfg);
        cr_assert_eq(strata_load_weights(rt, st, 0, &info), STRATA_EINVAL);
        cr_assert_eq(info.unexpected, 6, "%s", info.left);
        cr_assert_eq(info.missing, 2, "%s", info.left);
        cr_assert_not_null(strstr(info.left, "layers.2.weight: file none, model [4, 16]"), "%s",
                           info.left);
        cr_assert_not_null(strstr(info.left, "layers.1.running_mean: file [16] F32, model none"),
                           "%s", info.left);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        dir_fini();
}

Test(load_weights, partial_loads_what_fits_and_lists_the_rest, .timeout = 60)
{
        static float file[4096], got[4096], before[4096];
        struct strata_weights_info info;
        struct strata_runtime *rt;
        struct strata_param p;
        struct rig r, o;
        size_t k;

        dir_init();
        rig_init_full(&r);
        rt = rig_open(&r.cfg);
        rig_steps(&r, rt, 3, NULL);
        all_values(rt, 0, file, 4096);
        cr_assert_eq(strata_export_safetensors(rt, st), STRATA_OK);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);

        /* fine-tuning a new head: the same body, 3 classes */
        rig_init_full(&o);
        o.mods[4].out = 3;
        o.cfg.classes = 3;
        rt = rig_open(&o.cfg);
        all_values(rt, 0, before, 4096);
        cr_assert_eq(strata_load_weights(rt, st, STRATA_WEIGHTS_PARTIAL, &info), STRATA_OK,
                     "%s", strata_last_error());
        cr_assert_eq(info.loaded, 6);
        cr_assert_eq(info.mismatched, 2);
        cr_assert_eq(info.missing + info.unexpected, 0);
        cr_assert_str_eq(info.left, "layers.4.weight: file [4, 16] F32, model [3, 16]; "
                         "layers.4.bias: file [4] F32, model [3]");
        /* the body is the file's, the head as it was */
        k = 16 * 20 + 16 + 4 * 16;
        all_values(rt, 0, got, 4096);
        cr_assert_eq(memcmp(got, file, k * sizeof(float)), 0);
        cr_assert_eq(strata_parameter(rt, 0, 6, &p), STRATA_OK);
        cr_assert_str_eq(p.name, "layers.4.weight");
        cr_assert_eq(memcmp(got + k, before + k, 3 * 16 * sizeof(float)), 0);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);

        /* a file of which nothing fits is refused even in partial mode */
        rig_init(&o, 0);
        o.mods[0].out = 8;
        rt = rig_open(&o.cfg);
        cr_assert_eq(strata_load_weights(rt, st, STRATA_WEIGHTS_PARTIAL, &info), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "no tensor of"), "%s",
                           strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        dir_fini();
}

/* Train @p steps after loading @p path under @p c; parameters of device 0 into @p out. */
static size_t loaded_run(struct rig *r, const struct strata_config *c, const char *path,
                         int steps, float *out)
{
        struct strata_runtime *rt = rig_open(c);
        size_t n;

        cr_assert_eq(strata_load_weights(rt, path, 0, NULL), STRATA_OK, "%s",
                     strata_last_error());
        rig_steps(r, rt, steps, NULL);
        n = all_values(rt, 0, out, 4096);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        return n;
}

Test(load_weights, same_file_twice_same_run_and_fresh_optimizer, .timeout = 60)
{
        static float a[4096], b[4096];
        struct strata_runtime *rt;
        struct strata_param p;
        struct rig r;
        size_t n;

        dir_init();
        rig_init_full(&r);
        r.cfg.optim.kind = STRATA_OPTIM_ADAMW;
        r.cfg.optim.lr = 1e-3f;
        export_trained(&r, &r.cfg, 4, st);
        n = loaded_run(&r, &r.cfg, st, 5, a);
        cr_assert_eq(loaded_run(&r, &r.cfg, st, 5, b), n);
        cr_assert_eq(memcmp(a, b, n * sizeof(float)), 0, "bitwise the same run");

        /*
         * Loaded on a trained runtime, the optimizer's state and step count start again at
         * zero: without Dropout (whose masks follow the global step, which the load keeps)
         * the run is the one of a fresh runtime that loaded the file.
         */
        rig_init(&r, 1);
        r.cfg.optim.kind = STRATA_OPTIM_ADAMW;
        r.cfg.optim.lr = 1e-3f;
        export_trained(&r, &r.cfg, 4, st);
        n = loaded_run(&r, &r.cfg, st, 5, a);
        rt = rig_open(&r.cfg);
        rig_steps(&r, rt, 3, NULL);
        cr_assert_eq(strata_load_weights(rt, st, 0, NULL), STRATA_OK, "%s", strata_last_error());
        for (int g = 0; strata_parameter(rt, 0, g, &p) == STRATA_OK; g++)
                for (int s = 0; s < p.opt_slots; s++)
                        for (size_t i = 0; i < p.shard_hi - p.shard_lo; i++)
                                cr_assert_eq(p.opt_state[s][i], 0.0f, "%s slot %d", p.name, s);
        rig_steps(&r, rt, 5, NULL);
        all_values(rt, 0, b, 4096);
        cr_assert_eq(memcmp(a, b, n * sizeof(float)), 0, "the trained runtime's run is the same");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        dir_fini();
}

Test(load_weights, ddp_and_fsdp_fill_every_device, .timeout = 120)
{
        static float want[4096], got[4096], single[4096], other[4096];
        static unsigned char a[65536], b[65536];
        static const enum strata_strategy_kind kinds[] = {
                STRATA_STRATEGY_DDP, STRATA_STRATEGY_FSDP, STRATA_STRATEGY_ZERO1,
                STRATA_STRATEGY_ZERO2, STRATA_STRATEGY_DP,
        };
        struct strata_runtime *rt;
        struct strata_config c;
        struct rig r;
        size_t n, na;

        dir_init();
        rig_init_full(&r);
        rt = rig_open(&r.cfg);
        rig_steps(&r, rt, 4, NULL);
        n = all_values(rt, 0, want, 4096);
        cr_assert_eq(strata_export_safetensors(rt, st), STRATA_OK);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        na = file_bytes(st, a, sizeof(a));
        for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
                c = rig_cfg(&r, kinds[i], 2, 0);
                rt = rig_open(&c);
                rig_steps(&r, rt, 1, NULL); /* trained: every value is replaced */
                cr_assert_eq(strata_load_weights(rt, st, 0, NULL), STRATA_OK, "%s",
                             strata_last_error());
                if (kinds[i] != STRATA_STRATEGY_FSDP) { /* fsdp: each device holds a shard */
                        for (int d = 0; d < 2; d++) {
                                cr_assert_eq(all_values(rt, d, got, 4096), n);
                                cr_assert_eq(memcmp(want, got, n * sizeof(float)), 0,
                                             "strategy %d device %d", (int)kinds[i], d);
                        }
                }
                cr_assert_eq(strata_export_safetensors(rt, st2), STRATA_OK, "%s",
                             strata_last_error());
                cr_assert_eq(file_bytes(st2, b, sizeof(b)), na);
                cr_assert_eq(memcmp(a, b, na), 0, "strategy %d exports what it loaded",
                             (int)kinds[i]);
                cr_assert_eq(strata_teardown(rt), STRATA_OK);
        }
        /* after the load, fsdp's run is bitwise ddp's */
        c = rig_cfg(&r, STRATA_STRATEGY_DDP, 2, 0);
        n = loaded_run(&r, &c, st, 3, single);
        c = rig_cfg(&r, STRATA_STRATEGY_FSDP, 2, 0);
        rt = rig_open(&c);
        cr_assert_eq(strata_load_weights(rt, st, 0, NULL), STRATA_OK, "%s", strata_last_error());
        rig_steps(&r, rt, 3, NULL);
        cr_assert_eq(strata_export_safetensors(rt, st2), STRATA_OK);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        c = rig_cfg(&r, STRATA_STRATEGY_SINGLE, 1, 0);
        rt = rig_open(&c);
        cr_assert_eq(strata_load_weights(rt, st2, 0, NULL), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(all_values(rt, 0, other, 4096), n);
        cr_assert_eq(memcmp(single, other, n * sizeof(float)), 0, "fsdp after load is ddp");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        dir_fini();
}

Test(load_weights, mixed_precision_masters, .timeout = 60)
{
        static float want[4096], got[4096];
        static const enum strata_precision kinds[] = { STRATA_PRECISION_BF16_MIXED,
                                                            STRATA_PRECISION_16_MIXED };
        struct strata_runtime *rt;
        struct strata_config c;
        struct rig r;
        size_t n;

        dir_init();
        rig_init_full(&r);
        rt = rig_open(&r.cfg);
        rig_steps(&r, rt, 2, NULL);
        n = all_values(rt, 0, want, 4096);
        cr_assert_eq(strata_export_safetensors(rt, st), STRATA_OK);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        for (int i = 0; i < 2; i++) {
                c = r.cfg;
                c.precision.kind = kinds[i];
                rt = rig_open(&c);
                cr_assert_eq(strata_load_weights(rt, st, 0, NULL), STRATA_OK, "%s",
                             strata_last_error());
                cr_assert_eq(all_values(rt, 0, got, 4096), n);
                cr_assert_eq(memcmp(want, got, n * sizeof(float)), 0, "precision %d", i);
                rig_steps(&r, rt, 2, NULL);
                cr_assert_eq(strata_teardown(rt), STRATA_OK);
        }
        dir_fini();
}

Test(load_weights, bad_arguments_change_nothing, .timeout = 60)
{
        static float before[4096], after[4096];
        struct strata_runtime *rt;
        struct strata_batch b;
        struct rig r;

        dir_init();
        rig_init_full(&r);
        export_trained(&r, &r.cfg, 1, st);
        cr_assert_eq(strata_load_weights(NULL, st, 0, NULL), STRATA_EINVAL);
        r.cfg.train.accumulate = 2;
        cr_assert_eq(strata_init(&rt, &r.cfg), STRATA_OK);
        cr_assert_eq(strata_load_weights(rt, st, 0, NULL), STRATA_EBADSTATE, "before connect");
        cr_assert_not_null(strstr(strata_last_error(), "not READY"), "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK);
        all_values(rt, 0, before, 4096);
        cr_assert_eq(strata_load_weights(rt, NULL, 0, NULL), STRATA_EINVAL);
        cr_assert_eq(strata_load_weights(rt, "", 0, NULL), STRATA_EINVAL);
        cr_assert_eq(strata_load_weights(rt, st, 6u, NULL), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "unknown flags 0x6"), "%s",
                           strata_last_error());
        cr_assert_neq(strata_load_weights(rt, "/nonexistent/w.safetensors", 0, NULL),
                      STRATA_OK);
        all_values(rt, 0, after, 4096);
        cr_assert_eq(memcmp(before, after, sizeof(before)), 0, "refusals change nothing");
        strata_loader_reset(&r.loader, r.idx, 256);
        cr_assert(strata_loader_next(&r.loader, &b));
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_load_weights(rt, st, 0, NULL), STRATA_EBADSTATE);
        cr_assert_not_null(strstr(strata_last_error(), "accumulation window"), "%s",
                           strata_last_error());
        cr_assert_eq(strata_train_step(rt, &b, NULL), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_load_weights(rt, st, 0, NULL), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        dir_fini();
}

Test(load_weights, export_metadata_round_trip_and_refusals, .timeout = 60)
{
        static char longv[STRATA_WEIGHTS_META + 8];
        static const char model[] = "input(20) linear(16) batchnorm1d relu dropout(0.25) "
                                    "linear(4) \"quoted\" back\\slash\nnewline\ttab \xc3\xa9";
        struct strata_meta_entry meta[STRATA_EXPORT_META + 1] = {
                { "strata.model", model },
                { "strata.transform", "standardize mean=0.5 std=0.25" },
        };
        struct strata_weights_info info;
        struct strata_runtime *rt;
        char cmd[512], line[2048];
        struct rig r;
        FILE *py;

        dir_init();
        rig_init_full(&r);
        rt = rig_open(&r.cfg);
        cr_assert_eq(strata_export_safetensors_meta(rt, st, meta, 2), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_load_weights(rt, st, 0, &info), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_str_eq(info.model, model);
        cr_assert_str_eq(info.transform, "standardize mean=0.5 std=0.25");
        /* Python's json reads the same strings */
        snprintf(cmd, sizeof(cmd), "/usr/bin/python3 -c 'import json,struct,sys; "
                 "b=open(sys.argv[1],\"rb\").read(); n=struct.unpack(\"<Q\",b[:8])[0]; "
                 "m=json.loads(b[8:8+n])"
                 "[\"__metadata__\"]; print(m[\"format\"], m[\"producer\"], "
                 "repr(m[\"strata.model\"]))' %s", st);
        py = popen(cmd, "r");
        cr_assert_not_null(py);
        cr_assert_not_null(fgets(line, sizeof(line), py));
        cr_assert_eq(pclose(py), 0);
        cr_assert_str_eq(line, "pt strata 'input(20) linear(16) batchnorm1d relu dropout(0.25) "
                         "linear(4) \"quoted\" back\\\\slash\\nnewline\\ttab \xc3\xa9'\n");
        /* a file without them reports none */
        cr_assert_eq(strata_export_safetensors(rt, st2), STRATA_OK);
        cr_assert_eq(strata_load_weights(rt, st2, 0, &info), STRATA_OK);
        cr_assert_str_empty(info.model);
        cr_assert_str_empty(info.transform);

        /* refusals: nothing written */
        unlink(st2);
        cr_assert_eq(strata_export_safetensors_meta(rt, st2, meta, -1), STRATA_EINVAL);
        cr_assert_eq(strata_export_safetensors_meta(rt, st2, meta, STRATA_EXPORT_META + 1),
                     STRATA_EINVAL);
        cr_assert_eq(strata_export_safetensors_meta(rt, st2, NULL, 1), STRATA_EINVAL);
        meta[2] = (struct strata_meta_entry){ NULL, "x" };
        cr_assert_eq(strata_export_safetensors_meta(rt, st2, meta, 3), STRATA_EINVAL);
        meta[2] = (struct strata_meta_entry){ "", "x" };
        cr_assert_eq(strata_export_safetensors_meta(rt, st2, meta, 3), STRATA_EINVAL);
        meta[2] = (struct strata_meta_entry){ "k", NULL };
        cr_assert_eq(strata_export_safetensors_meta(rt, st2, meta, 3), STRATA_EINVAL);
        memset(longv, 'v', sizeof(longv) - 1);
        meta[2] = (struct strata_meta_entry){ "k", longv };
        cr_assert_eq(strata_export_safetensors_meta(rt, st2, meta, 3), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "too long"), "%s", strata_last_error());
        meta[2] = (struct strata_meta_entry){ "format", "x" };
        cr_assert_eq(strata_export_safetensors_meta(rt, st2, meta, 3), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "the export's own"), "%s",
                           strata_last_error());
        meta[2] = (struct strata_meta_entry){ "strata.model", "x" };
        cr_assert_eq(strata_export_safetensors_meta(rt, st2, meta, 3), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "given twice"), "%s",
                           strata_last_error());
        cr_assert_eq(access(st2, F_OK), -1, "a refused export writes nothing");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        dir_fini();
}

Test(load_weights, checkpoint_of_any_optimizer_and_strategy, .timeout = 120)
{
        static float want[4096], got[4096];
        static unsigned char a[65536], b[65536];
        struct strata_weights_info info;
        struct strata_runtime *rt;
        struct strata_config c;
        struct rig r, o;
        size_t n, na;
        FILE *f;
        long at;

        dir_init();
        /* an AdamW checkpoint of fsdp on 2 devices: its weights into an SGD runtime */
        rig_init_full(&r);
        r.cfg.optim.kind = STRATA_OPTIM_ADAMW;
        r.cfg.optim.lr = 1e-3f;
        c = rig_cfg(&r, STRATA_STRATEGY_FSDP, 2, 0);
        rt = rig_open(&c);
        rig_steps(&r, rt, 3, NULL);
        cr_assert_eq(strata_save_checkpoint(rt, st, "x", 1), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_export_safetensors(rt, st2), STRATA_OK);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        na = file_bytes(st2, a, sizeof(a));
        rig_init_full(&o);
        rt = rig_open(&o.cfg);
        rig_steps(&o, rt, 1, NULL);
        cr_assert_eq(strata_load_weights(rt, st, 0, &info), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(info.loaded, 8);
        cr_assert_str_empty(info.left);
        cr_assert_eq(strata_export_safetensors(rt, st2), STRATA_OK);
        cr_assert_eq(file_bytes(st2, b, sizeof(b)), na);
        cr_assert_eq(memcmp(a, b, na), 0, "the checkpoint's weights, as fsdp exported them");
        n = all_values(rt, 0, want, 4096);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);

        /* a model of another width is refused naming each tensor (the table's 2-D shapes) */
        rig_init_full(&o);
        o.mods[0].out = 24;
        rt = rig_open(&o.cfg);
        cr_assert_eq(strata_load_weights(rt, st, 0, &info), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "layers.0.weight: file [16, 20] F32, "
                                  "model [24, 20]"), "%s", strata_last_error());
        cr_assert_not_null(strstr(strata_last_error(), "layers.4.weight: file [4, 16] F32, "
                                  "model [4, 24]"), "%s", strata_last_error());
        cr_assert_eq(info.mismatched, 7, "%s", info.left);
        cr_assert_eq(info.loaded, 1, "layers.4.bias fits");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);

        /* a corrupt value is refused by its checksum, nothing changed */
        f = fopen(st, "r+b");
        cr_assert_not_null(f);
        fseek(f, 0, SEEK_END);
        at = ftell(f) - 4; /* in the step counts: training state, passed over */
        fseek(f, at, SEEK_SET);
        fputc(0x5a, f);
        fclose(f);
        rt = rig_open(&r.cfg);
        cr_assert_eq(strata_load_weights(rt, st, 0, NULL), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(all_values(rt, 0, got, 4096), n);
        cr_assert_eq(memcmp(want, got, n * sizeof(float)), 0);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        f = fopen(st, "r+b");
        cr_assert_not_null(f);
        {
                uint64_t off; /* the first table entry's data offset, after name, dtype, ndim,
                               * shape: the first group's values */

                fseek(f, 512 + 80 + 4 + 4 + 16, SEEK_SET);
                cr_assert_eq(fread(&off, sizeof(off), 1, f), 1);
                fseek(f, (long)off + 8, SEEK_SET);
        }
        fputc(0x5a, f);
        fclose(f);
        rt = rig_open(&r.cfg);
        all_values(rt, 0, want, 4096);
        cr_assert_eq(strata_load_weights(rt, st, 0, NULL), STRATA_EFORMAT);
        cr_assert_not_null(strstr(strata_last_error(), "checksum mismatch"), "%s",
                           strata_last_error());
        all_values(rt, 0, got, 4096);
        cr_assert_eq(memcmp(want, got, n * sizeof(float)), 0, "nothing changed");
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        dir_fini();
}

Test(load_weights, conv_model_checkpoint_and_export, .timeout = 60)
{
        static float want[4096], got[4096];
        struct strata_runtime *rt;
        struct rig r;
        size_t n;

        dir_init();
        rig_init_conv(&r);
        rt = rig_open(&r.cfg);
        rig_steps(&r, rt, 3, NULL);
        n = all_values(rt, 0, want, 4096);
        cr_assert_eq(strata_save_checkpoint(rt, st, NULL, 0), STRATA_OK);
        cr_assert_eq(strata_export_safetensors(rt, st2), STRATA_OK);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        for (int i = 0; i < 2; i++) { /* a Conv2d weight [4, 1, 3, 3]: flat in the table */
                rt = rig_open(&r.cfg);
                cr_assert_eq(strata_load_weights(rt, i ? st2 : st, 0, NULL), STRATA_OK, "%s",
                             strata_last_error());
                cr_assert_eq(all_values(rt, 0, got, 4096), n);
                cr_assert_eq(memcmp(want, got, n * sizeof(float)), 0, "file %d", i);
                cr_assert_eq(strata_teardown(rt), STRATA_OK);
        }
        dir_fini();
}
