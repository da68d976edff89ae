/* The IDX reader's internal entry points, for the library's tools (not installed). */
#ifndef STRATA_DATA_IDX_H
#define STRATA_DATA_IDX_H

struct strata_idx_info;

/*
 * The data @p info (@p path's header) claims fits the file: exactly for a plain file, within
 * deflate's largest expansion for gzip; else STRATA_EFORMAT naming it truncated. Checked
 * before anything is sized from the header (strata_idx_load, strata_dataset_bytes).
 */
int strata__idx_fits(const char *path, const struct strata_idx_info *info);

/*
 * Read @p path's whole payload through a stack buffer, keeping nothing: STRATA_OK when the
 * file holds every byte its header claims, else STRATA_EFORMAT naming it truncated (or
 * corrupt). For a header too large for memory: a cut file is then told from a large one.
 */
int strata__idx_check_payload(const char *path);

#endif /* STRATA_DATA_IDX_H */
