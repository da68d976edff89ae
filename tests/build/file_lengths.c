/*
 * Issue 53: every source file of the library (alloc, arch, base, kernel, drivers, data, nn,
 * strategy) holds at most 700 lines, so that a file is one concept a reader takes in whole;
 * a file that grows past it is split along its seams (decisions 0054, 0055, 0056).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#define MAX_LINES 700

Test(file_lengths, library_files_at_most_700_lines)
{
        char cmd[1024], line[1024], over[4096] = "";
        int files = 0;
        FILE *p;

        snprintf(cmd, sizeof(cmd), "cd %s && find alloc arch base kernel drivers data nn "
                 "strategy -type f \\( -name '*.c' -o -name '*.h' -o -name '*.cu' \\) "
                 "-exec wc -l {} + | grep -v ' total$'", STRATA_SOURCE_DIR);
        p = popen(cmd, "r");
        cr_assert_not_null(p);
        while (fgets(line, sizeof(line), p)) {
                char name[512];
                int n;

                if (sscanf(line, "%d %511s", &n, name) != 2)
                        continue;
                files++;
                if (n > MAX_LINES && strlen(over) + strlen(name) + 32 < sizeof(over))
                        snprintf(over + strlen(over), sizeof(over) - strlen(over), " %s (%d)",
                                 name, n);
        }
        cr_assert_eq(pclose(p), 0);
        cr_assert_gt(files, 100, "the library's files were not found under %s",
                     STRATA_SOURCE_DIR);
        cr_assert_eq(over[0], '\0', "longer than %d lines:%s", MAX_LINES, over);
}
