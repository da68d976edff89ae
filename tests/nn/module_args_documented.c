/*
 * Every argument of the surrogate modules (Fourier, sequence and graph families: issue 55,
 * decision 0083) is documented where a user looks: `strata-train --help` and docs/guide.md
 * show each module's model-line form with all its arguments, and the number of arguments the
 * form shows is the number the registry (nn/registry.c) gives the module, so an argument added
 * to one of them fails here until both say what it is.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "nn/registry.h"
#include "tests/support/cli.h"

#define BIN STRATA_BUILD_DIR "/bin/strata-train"
#define GUIDE STRATA_SOURCE_DIR "/docs/guide.md"

/* A module, how many arguments its documented form shows, and that form in each place. */
struct doc {
        const char *module;
        int nargs;
        const char *help;
        const char *guide;
};

static const struct doc docs[] = {
        { "spectralconv1d", 2, "spectralconv1d(out,modes)", "`spectralconv1d(out, modes)`" },
        { "spectralconv2d", 3, "spectralconv2d(out,modes1,modes2)",
          "`spectralconv2d(out, modes1, modes2)`" },
        { "spectralconv3d", 4, "spectralconv3d(out,modes1,modes2,modes3)",
          "`spectralconv3d(out, modes1, modes2, modes3)`" },
        { "mha", 2, "mha(heads,causal=0|1)", "`mha(heads, causal=0\\|1)` (heads by position" },
        { "rmsnorm", 2, "rmsnorm(eps=X,dims=K)", "`rmsnorm(eps=X, dims=K)`" },
        { "layernorm", 2, "layernorm(eps=X,dims=K)", "`layernorm(eps=X, dims=K)`" },
        { "posembed", 0, "posembed (a learned [L,E] added) and tokens",
          "| `strata_posembed` | `posembed` |" },
        { "tokens", 0, "take no arguments", "| `strata_tokens` | `tokens` |" },
        { "gather", 1, "gather(side=src|dst) (default src)",
          "`gather(src\\|dst)` (`side=`; default src)" },
        { "scatter", 1, "scatter(reduce=sum|mean) (default sum)",
          "`scatter(sum\\|mean)` (`reduce=`; default sum)" },
};

static char help[65536], guide[131072];

static int registry_args(const char *module)
{
        const struct strata__module_entry *e = strata__module_entry(module);
        int n = 0;

        cr_assert_not_null(e, "no built-in module %s", module);
        while (n <= STRATA__ARGS_MAX && e->args[n] != STRATA__ARG_NONE)
                n++;
        return n;
}

static void read_guide(void)
{
        FILE *f = fopen(GUIDE, "r");
        size_t n;

        cr_assert_not_null(f, "%s", GUIDE);
        n = fread(guide, 1, sizeof(guide) - 1, f);
        fclose(f);
        cr_assert_lt(n, sizeof(guide) - 1, "docs/guide.md is larger than the test reads");
        guide[n] = '\0';
}

Test(module_args_documented, help_and_guide_show_every_argument)
{
        cr_assert_eq(cli_run(BIN, "--help", help, sizeof(help)), 0, "%s", help);
        read_guide();
        for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
                const struct doc *d = &docs[i];

                cr_expect_eq(registry_args(d->module), d->nargs,
                             "%s takes %d arguments, its documented form shows %d: document "
                             "the new one in --help and docs/guide.md", d->module,
                             registry_args(d->module), d->nargs);
                cr_expect_not_null(strstr(help, d->help), "--help lacks '%s'", d->help);
                cr_expect_not_null(strstr(guide, d->guide), "docs/guide.md lacks '%s'",
                                   d->guide);
        }
}

