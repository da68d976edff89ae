/* Running a built tool from a test. */
#ifndef STRATA_TESTS_CLI_H
#define STRATA_TESTS_CLI_H

#include <stddef.h>

/**
 * Run `bin args` with stderr folded into stdout; up to @p n - 1 bytes of its output land in
 * @p out (NUL-terminated). Returns the exit status, or -1 when it did not exit normally.
 */
int cli_run(const char *bin, const char *args, char *out, size_t n);

#endif
