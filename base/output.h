/*
 * Safe output (private): how every file Strata writes reaches its path. The trace, checkpoints,
 * safetensors exports, strata-train's `latest` and metrics log all go through it.
 *
 * - A symlink at the path is followed (at most STRATA__OUT_LINKS links) and its target is
 *   replaced atomically: a temporary file in the target's directory, written, given its
 *   final mode, fsynced, renamed over the target, the directory fsynced. The link stays.
 * - A path that is not a regular file is never replaced: a character device or a FIFO (with
 *   a reader) is written in place; a directory, socket or block device is refused.
 * - The temporary file is `<name>.tmp.<pid>.<16 hex digits from getrandom()>`, created with
 *   O_CREAT | O_EXCL | O_NOFOLLOW, mode 0600: nothing planted at a name is ever opened.
 * - Every failure returns a status with a message naming the path; the temporary file is
 *   removed and the output closed, so a failed output needs no further call.
 * - Opening sweeps the directory of temporary files of the same target left by writers
 *   that are dead (kill(pid, 0) fails with ESRCH): regular files only, never through a link.
 *
 * A log (strata__out_append, strata__out_publish) is published once, then grows in place.
 *
 * Nothing is allocated: the caller owns the two path buffers (STRATA__OUT_PATH bytes each).
 * Decision 0022.
 */
#ifndef STRATA_BASE_OUTPUT_H
#define STRATA_BASE_OUTPUT_H

#include <stddef.h>

#define STRATA__OUT_PATH 4096 /* PATH_MAX: the size of each path buffer */
#define STRATA__OUT_LINKS 40  /* symlinks followed at most (the kernel's own bound) */

/** One file being written. */
struct strata__out {
        int fd;           /* where bytes go: the temporary file or the target; -1: closed */
        char *path;       /* STRATA__OUT_PATH bytes: the target, its links followed */
        char *tmp;        /* STRATA__OUT_PATH bytes: the temporary file; "" when in place */
        const char *what; /* the messages' prefix ("trace", "checkpoint", ...) */
};

/**
 * @brief Start writing @p path; nothing at @p path changes before strata__out_commit().
 *        @p o's buffers and @p what must be set; @p o->fd is -1 on failure.
 * @retval STRATA_OK, STRATA_EINVAL (a directory, socket or block device; a FIFO without a
 *         reader; a name too long), STRATA_EIO (a system call failed; the message says which).
 */
int strata__out_open(struct strata__out *o, const char *path);

/**
 * @brief Write all @p n bytes (a short write is retried; one that writes nothing is ENOSPC).
 * @retval STRATA_OK, STRATA_EIO (the output is then abandoned: temporary removed, closed).
 */
int strata__out_write(struct strata__out *o, const void *buf, size_t n);

/**
 * @brief Make the file durable and visible at its path at once, then close it. The final mode
 *        is the replaced file's permissions, or 0666 less the umask for a new file.
 * @retval STRATA_OK, STRATA_EIO (fchmod, fsync, close, rename or the directory's fsync failed;
 *         the temporary is removed; a failed directory fsync leaves the renamed file).
 */
int strata__out_commit(struct strata__out *o);

/**
 * @brief For a log that grows: open @p path in place for appending when it is a regular file
 *        (links followed); otherwise as strata__out_open(). Same return values.
 */
int strata__out_append(struct strata__out *o, const char *path);

/**
 * @brief Commit what is written so far but keep the file open in place (a log's header is
 *        published, its rows follow). Nothing to do for a file already in place.
 * @retval as strata__out_commit(); @p o stays open on success.
 */
int strata__out_publish(struct strata__out *o);

/** @brief Give up: close, remove the temporary file; the path keeps what it had. Idempotent. */
void strata__out_abort(struct strata__out *o);

#endif /* STRATA_BASE_OUTPUT_H */
