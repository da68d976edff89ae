/* Running a built tool from a test. */
#ifndef STRATA_TESTS_CLI_H
#define STRATA_TESTS_CLI_H

#include <stddef.h>

/**
 * Run `bin args` with stderr folded into stdout; up to @p n - 1 bytes of its output land in
 * @p out (NUL-terminated). Returns the exit status, or -1 when it did not exit normally.
 */
int cli_run(const char *bin, const char *args, char *out, size_t n);

/** Run the shell command line @p cmd; what it prints on stdout lands in @p out, as above. */
int cli_sh(const char *cmd, char *out, size_t n);

/**
 * Run `bin args` with stdout on a pseudo-terminal (stderr discarded): what a user at a
 * terminal sees, escape sequences and carriage returns included.
 */
int cli_run_tty(const char *bin, const char *args, char *out, size_t n);

/**
 * Run tests/build/@p script with the source and build directories, its output on stderr;
 * returns its exit status (0: it passed). Skips the test under a sanitizer: what the scripts
 * build and run is checked in the plain build.
 */
int cli_build_script(const char *script);

/** mpirun's options that quiet the sanitizers in the processes it starts (Open MPI leaks);
 *  Open MPI applies them to the first app context only: repeat them after each ":". */
#define SAN_QUIET "-x ASAN_OPTIONS=detect_leaks=0 -x TSAN_OPTIONS=report_bugs=0 "

/** mpirun starting 2 processes as the tests run them (root, no binding, sanitizers quiet). */
#define CLI_MPIRUN_2 "mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 " SAN_QUIET

/**
 * The jobs of several processes run one at a time across the suite (their process and
 * /dev/shm checks see only their own): takes the suite's lock, held until the test's process
 * exits.
 */
void cli_serial_jobs(void);

/** Monotonic time in seconds. */
double cli_now_s(void);

/**
 * Every strata-train process whose command line holds `seed @p seed` (a test's marked jobs,
 * a stopped one too): continued, then killed, by id.
 */
void cli_kill_jobs(const char *seed);

/** 1 when this build has the MPI link and mpirun is installed. */
int cli_have_mpi(void);

/** A fresh directory /tmp/strata-TAG-XXXXXX in @p dir (@p n bytes); fails the test if not. */
void cli_mkdtemp(char *dir, size_t n, const char *tag);

/**
 * `dir/name` in one of 4 static buffers used in turn (up to 4 such paths in one expression);
 * fails the test when it does not fit.
 */
const char *cli_path(const char *dir, const char *name);

/** Remove @p dir and everything in it. */
void cli_rmtree(const char *dir);

/** Files dir/@p a and dir/@p b hold the same bytes; fails the test, with cmp's word, if not. */
void cli_same_files(const char *dir, const char *a, const char *b);

/** The first @p cap bytes of file @p path into @p buf; how many. Fails the test if unreadable. */
long cli_slurp(const char *path, unsigned char *buf, size_t cap);

/**
 * Run `@p launch strata-train @p args --export-safetensors dir/@p name` (@p launch: "" or an
 * mpirun prefix); fails the test, with the command and its output, unless it exits 0.
 */
void cli_train_export(const char *launch, const char *args, const char *dir, const char *name);

/** strata-train --json's line of epoch @p e in @p out, without its timing fields. */
void cli_epoch_line(const char *out, int e, char *line, size_t n);

/**
 * After a stop that checkpointed into @p dir: the epoch a resumed run is compared on (the one
 * DIR/latest's checkpoint is inside, or the next after a completed epoch); @p name gets the
 * checkpoint's name. Fails the test without a readable DIR/latest.
 */
int cli_resume_epoch(const char *dir, char *name, size_t n);

#endif
