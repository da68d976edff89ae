/*
 * What each make target installs (issue 58, item 19): `make deps` (and so `make run`) only
 * what the library, strata-train and strata-plot need; `make test` adds what the suite
 * drives; every `make bench-*` adds the peers' needs. CI runs `make deps` then `make test` on
 * a fresh machine, so DEPS and TEST_DEPS together must hold everything the suite needs.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

/* The Makefile's three package sets, read through make itself (its own parse). */
static char sets[3][1024];

/* The output of @p cmd into @p out (cap bytes); the exit status. */
static int run(const char *cmd, char *out, size_t cap)
{
        size_t n = 0, got;
        FILE *p = popen(cmd, "r");

        cr_assert_not_null(p, "%s", cmd);
        while (n + 1 < cap && (got = fread(out + n, 1, cap - 1 - n, p)) > 0)
                n += got;
        out[n] = '\0';
        return pclose(p);
}

static void read_sets(void)
{
        static char out[4096];
        char *save = NULL, *field;
        int i = 0;

        cr_assert_eq(run("printf 'show-deps:\\n\\t@echo \"$(DEPS)|$(TEST_DEPS)|$(BENCH_DEPS)\"\\n' "
                         "| env -u MAKEFLAGS -u MFLAGS make -s -C " STRATA_SOURCE_DIR
                         " -f Makefile -f - show-deps", out, sizeof(out)), 0, "%s", out);
        out[strcspn(out, "\n")] = '\0';
        for (field = strtok_r(out, "|", &save); field && i < 3; field = strtok_r(NULL, "|", &save))
                snprintf(sets[i++], sizeof(sets[0]), " %s ", field);
        cr_assert_eq(i, 3, "make printed %d package sets, not 3", i);
}

static int holds(int set, const char *package)
{
        char word[128];

        snprintf(word, sizeof(word), " %s ", package);
        return strstr(sets[set], word) != NULL;
}

Test(deps_sets, the_main_job_installs_only_what_the_library_and_its_tools_need)
{
        static const char *const needed[] = { "libhwloc-dev", "libnuma-dev", "libxsmm-dev",
                                              "zlib1g-dev", "libhdf5-dev",
                                              "dataset-fashion-mnist", "gnuplot-nox" };
        static const char *const not_needed[] = { "python3-torch", "libdnnl-dev",
                                                  "libopenblas-pthread-dev",
                                                  "libcriterion-dev", "clang", "bc",
                                                  "libtorch-dev", "python3-h5py" };

        read_sets();
        for (size_t i = 0; i < sizeof(needed) / sizeof(needed[0]); i++)
                cr_expect(holds(0, needed[i]), "make deps lacks %s: [%s]", needed[i], sets[0]);
        for (size_t i = 0; i < sizeof(not_needed) / sizeof(not_needed[0]); i++)
                cr_expect(!holds(0, not_needed[i]), "make deps installs %s, which only tests or "
                          "benchmarks use: [%s]", not_needed[i], sets[0]);
}

Test(deps_sets, make_test_adds_what_the_suite_drives)
{
        static const char *const suite[] = { "libcriterion-dev", "openmpi-bin", "libopenmpi-dev",
                                             "gfortran", "python3-torch",
                                             "libopenblas-pthread-dev", "clang",
                                             "python3-h5py", "python3-onnx" };

        read_sets();
        for (size_t i = 0; i < sizeof(suite) / sizeof(suite[0]); i++)
                cr_expect(holds(0, suite[i]) || holds(1, suite[i]),
                          "neither make deps nor make test installs %s", suite[i]);
}

Test(deps_sets, make_bench_adds_what_the_peers_need)
{
        static const char *const bench[] = { "python3-torch", "libdnnl-dev", "openmpi-bin",
                                             "libopenmpi-dev", "gfortran", "bc",
                                             "libtorch-dev" };

        read_sets();
        for (size_t i = 0; i < sizeof(bench) / sizeof(bench[0]); i++)
                cr_expect(holds(0, bench[i]) || holds(2, bench[i]),
                          "make bench-* does not install %s", bench[i]);
}

/* Which target installs which set: make's database of the parsed Makefile. */
Test(deps_sets, each_target_asks_for_its_own_set)
{
        static char out[8192];
        char *line, *save = NULL;
        int benches = 0;

        cr_assert_eq(run("printf 'nothing:\\n\\t@:\\n' | env -u MAKEFLAGS -u MFLAGS make -pn -s -C "
                         STRATA_SOURCE_DIR " -f Makefile -f - nothing 2>/dev/null | grep -E "
                         "'^(test|run|bench-[a-z-]+):'", out, sizeof(out)), 0, "%s", out);
        for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                if (!strncmp(line, "test:", 5)) {
                        cr_expect(strstr(line, "test-deps"), "%s", line);
                } else if (!strncmp(line, "run:", 4)) {
                        cr_expect(strstr(line, " deps") && !strstr(line, "test-deps") &&
                                  !strstr(line, "bench-deps"), "%s", line);
                } else if (strncmp(line, "bench-deps:", 11)) {
                        cr_expect(strstr(line, "bench-deps"), "%s", line);
                        benches++;
                }
        }
        cr_expect_geq(benches, 10, "only %d bench-* targets found", benches);
}

Test(deps_sets, ci_installs_then_tests)
{
        static char out[256];

        cr_expect_eq(run("grep -n -e '^make deps$' -e '^make -j2 test$' " STRATA_SOURCE_DIR
                         "/.ci/run | cut -d: -f2 | tr '\\n' ' '", out, sizeof(out)), 0);
        cr_expect_str_eq(out, "make deps make -j2 test ", ".ci/run does not run make deps "
                         "then make test: %s", out);
}
