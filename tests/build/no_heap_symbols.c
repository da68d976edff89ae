/* The library's objects reference no libc heap function (checked with nm -u on the archive). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

static const char *const forbidden[] = {
        "malloc", "calloc", "realloc", "free", "strdup", "strndup",
        "aligned_alloc", "posix_memalign", "valloc", "memalign", "reallocarray",
};

Test(no_heap_symbols, archive_references_no_heap_function)
{
        char cmd[1024], line[512];
        int symbols = 0;
        FILE *p;

        snprintf(cmd, sizeof(cmd), "nm -u %s/libstrata.a 2>&1", STRATA_BUILD_DIR);
        p = popen(cmd, "r");
        cr_assert_not_null(p);
        while (fgets(line, sizeof(line), p)) {
                char name[256];

                if (sscanf(line, " U %255s", name) != 1)
                        continue;
                symbols++;
                for (size_t i = 0; i < sizeof(forbidden) / sizeof(forbidden[0]); i++)
                        cr_expect_neq(strcmp(name, forbidden[i]), 0,
                                      "libstrata.a references %s", name);
        }
        cr_assert_eq(pclose(p), 0, "nm failed");
        cr_assert_gt(symbols, 10, "nm listed too few undefined symbols to be credible");
}
