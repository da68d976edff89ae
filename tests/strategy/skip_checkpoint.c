/*
 * Merge modules hold no parameters, so checkpoints and exports of a graph model are its
 * other modules': the U-Net (AdamW, ddp on 2 devices) resumes bitwise from a checkpoint taken
 * halfway, and its safetensors export names each parameter group by its module's index in the
 * model (layers.0, layers.3, layers.7, layers.10, as PyTorch's nn.Sequential would: merge
 * modules and the others without parameters take an index and write nothing) with PyTorch's
 * shapes.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/skipnet.h"

#define STEPS 12

static struct strata_config adamw_ddp(void)
{
        struct strata_config c = skipnet_cfg(SKIPNET_UNET, STRATA_STRATEGY_DDP, 2);

        c.optim.kind = STRATA_OPTIM_ADAMW;
        c.optim.momentum = 0.0f;
        c.optim.lr = 0.01f;
        return c;
}

static struct strata_runtime *open_cfg(const struct strata_config *c)
{
        struct strata_runtime *rt;

        cr_assert_eq(strata_init(&rt, c), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_connect(rt), STRATA_OK, "%s", strata_last_error());
        return rt;
}

Test(skip_checkpoint, unet_resumes_bitwise, .timeout = 120)
{
        static struct skipnet_run whole, half;
        struct strata_config c = adamw_ddp();
        char dir[] = "/tmp/strata-skip-XXXXXX", path[128];
        struct strata_runtime *rt;

        skipnet_train(&c, STEPS, &whole);
        cr_assert_not_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/run.ckpt", dir);
        memset(&half, 0, sizeof(half));
        rt = open_cfg(&c);
        skipnet_steps(rt, 0, STEPS / 2, &half);
        cr_assert_eq(strata_save_checkpoint(rt, path, NULL, 0), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        rt = open_cfg(&c);
        cr_assert_eq(strata_load_checkpoint(rt, path, NULL, 0, NULL, NULL), STRATA_OK, "%s",
                     strata_last_error());
        skipnet_steps(rt, STEPS / 2, STEPS, &half);
        skipnet_params(rt, &c, &half);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        cr_assert_eq(memcmp(whole.loss, half.loss, sizeof(whole.loss)), 0, "losses differ");
        cr_assert_eq(memcmp(whole.p, half.p, whole.np * sizeof(float)), 0,
                     "the resumed run differs");
        unlink(path);
        rmdir(dir);
}

/* The export's JSON header: u64 length, then the text. */
static void header(const char *path, char *buf, size_t cap)
{
        FILE *f = fopen(path, "rb");
        unsigned long long n = 0;

        cr_assert_not_null(f, "%s", path);
        cr_assert_eq(fread(&n, 8, 1, f), 1);
        cr_assert_lt(n, cap);
        cr_assert_eq(fread(buf, 1, n, f), n);
        buf[n] = 0;
        fclose(f);
}

Test(skip_checkpoint, unet_export_names_modules_by_index, .timeout = 120)
{
        static const char *const want[] = {
                "\"layers.0.weight\"", "[4,1,3,3]", "\"layers.0.bias\"",
                "\"layers.3.weight\"", "[8,4,3,3]", "\"layers.3.bias\"",
                "\"layers.7.weight\"", "[4,12,3,3]", "\"layers.7.bias\"",
                "\"layers.10.weight\"", "[4,144]", "\"layers.10.bias\"",
        };
        static char text[8192];
        static struct skipnet_run r;
        struct strata_config c = adamw_ddp();
        char dir[] = "/tmp/strata-skip-XXXXXX", st[128];
        struct strata_runtime *rt;
        int tensors = 0;

        cr_assert_not_null(mkdtemp(dir));
        snprintf(st, sizeof(st), "%s/unet.safetensors", dir);
        rt = open_cfg(&c);
        skipnet_steps(rt, 0, 4, &r);
        cr_assert_eq(strata_export_safetensors(rt, st), STRATA_OK, "%s", strata_last_error());
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        header(st, text, sizeof(text));
        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
                cr_assert_not_null(strstr(text, want[i]), "%s not in %s", want[i], text);
        for (const char *p = text; (p = strstr(p, "\"layers.")); p++)
                tensors++;
        cr_assert_eq(tensors, 8, "only the convolutions' and the linear's groups: %s", text);
        unlink(st);
        rmdir(dir);
}
