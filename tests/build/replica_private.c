/*
 * The replica's struct stays private to nn/ (decision 0056): no file of the library outside
 * nn/ includes nn/replica_private.h, so strategies, checkpoints and the fingerprint can only
 * use the view and the functions of nn/replica.h (the compiler refuses a field read on the
 * incomplete struct). Tests sit above everything and may include it. The check is shown able
 * to fail on synthetic text.
 */
#include <criterion/criterion.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>

#define PRIVATE "\"nn/replica_private.h\""

static char found[8][512]; /* the offenders, the first few */
static int nfound;

/* Whether @p text includes the private header (a quoted #include line). */
static int includes_private(const char *text)
{
        for (const char *p = strstr(text, PRIVATE); p; p = strstr(p + 1, PRIVATE)) {
                const char *bol = p;

                while (bol > text && bol[-1] != '\n')
                        bol--;
                while (*bol == ' ' || *bol == '\t')
                        bol++;
                if (strncmp(bol, "#include", 8) == 0)
                        return 1;
        }
        return 0;
}

static int visit(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
        static char text[1 << 20];
        size_t n, len = strlen(path);
        FILE *f;

        (void)st;
        (void)ftw;
        if (type != FTW_F || len < 2 || (strcmp(path + len - 2, ".c") != 0 &&
                                         strcmp(path + len - 2, ".h") != 0))
                return 0;
        f = fopen(path, "r");
        if (!f)
                return 0;
        n = fread(text, 1, sizeof(text) - 1, f);
        fclose(f);
        text[n] = '\0';
        if (includes_private(text) && nfound < 8)
                snprintf(found[nfound++], sizeof(found[0]), "%s", path);
        return 0;
}

Test(replica_private, the_checker_sees_an_include)
{
        cr_assert(includes_private("#include \"nn/replica_private.h\"\n"));
        cr_assert(includes_private("int x;\n  #include \"nn/replica_private.h\"\n"));
        cr_assert(!includes_private("/* see \"nn/replica_private.h\" */\n"));
        cr_assert(!includes_private("#include \"nn/replica.h\"\n"));
}

Test(replica_private, no_file_outside_nn_includes_it)
{
        static const char *const dirs[] = { "arch", "base", "alloc", "kernel", "drivers",
                                            "data", "strategy", "include", "tools" };
        char root[1024];

        nfound = 0;
        for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
                snprintf(root, sizeof(root), "%s/%s", STRATA_SOURCE_DIR, dirs[i]);
                nftw(root, visit, 16, FTW_PHYS);
        }
        for (int i = 0; i < nfound; i++)
                cr_log_error("%s includes nn/replica_private.h", found[i]);
        cr_assert_eq(nfound, 0, "%d file(s) outside nn/ include the replica's private header",
                     nfound);
}
