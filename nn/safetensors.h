/*
 * Reading a safetensors file (internal): an 8-byte little-endian header length, a JSON object
 * of tensor entries ({"dtype", "shape", "data_offsets"}, offsets into the data that follows
 * the header) and an optional "__metadata__" object of strings. The header is parsed as a
 * stream through a CheckpointIO's read_at, a window of fixed size at a time, so a header of
 * any length costs no memory beyond the reader: nothing is allocated, every string and shape
 * is bounded, nesting is bounded, and any malformed byte is a status with a message naming
 * the file and the header's offset, never a crash.
 */
#ifndef STRATA_NN_SAFETENSORS_H
#define STRATA_NN_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "strata/checkpoint.h"

/* A header longer than this is refused (the format's own readers refuse 100 MB). */
#define STRATA__ST_HEADER_MAX (100u << 20)
/* A tensor name's bytes, terminator included; longer names are refused. */
#define STRATA__ST_NAME 256
/* Dimensions of a tensor's shape. */
#define STRATA__ST_DIMS 8
/* A metadata value the caller keeps, terminator included (longer ones are cut). */
#define STRATA__ST_VALUE 1024

/* The element types read (others are recognised by name, not converted). */
enum strata__st_dtype {
        STRATA__ST_OTHER,
        STRATA__ST_F32,
        STRATA__ST_F64,
        STRATA__ST_BF16,
        STRATA__ST_F16,
};

/* One tensor entry of the header. */
struct strata__st_entry {
        char name[STRATA__ST_NAME];
        char dtype_name[16];            /* as written ("F32", "I64"...), cut at 15 bytes */
        enum strata__st_dtype dtype;
        int ndim;
        uint64_t shape[STRATA__ST_DIMS];
        uint64_t begin, end;            /* its bytes in the data: [begin, end) */
};

/* Metadata values the caller asked for (keys[i] into values[i]; "" when absent). */
struct strata__st_meta {
        int n;
        const char *keys[4];
        char values[4][STRATA__ST_VALUE];
};

/* The header's reader: a window over the file's header bytes. */
struct strata__st_reader {
        const struct strata_checkpoint_io *io;
        struct strata_ckpt_handle *h;
        const char *path;
        uint64_t at, end;               /* file offset of the window's next refill; header end */
        uint64_t data, size;            /* where the data starts; the file's size */
        size_t pos, len;
        int started, done;
        int rc;                         /* a read's failure */
        unsigned char buf[4096];
};

/*
 * Open the header of the file @p h (@p size bytes, read through @p io; @p path for messages):
 * its length is checked against the file and STRATA__ST_HEADER_MAX and the object's opening
 * brace read. STRATA_EFORMAT with a message when it is not a safetensors file.
 */
int strata__st_open(struct strata__st_reader *r, const struct strata_checkpoint_io *io,
                    struct strata_ckpt_handle *h, uint64_t size, const char *path);

/*
 * The next tensor entry into @p e (its offsets checked against the data's bytes, its extent
 * against its dtype's size when the dtype is read); "__metadata__" is consumed on the way,
 * keeping the values @p meta asks for (@p meta may be NULL). 1 for an entry, 0 at the
 * header's end (the rest of it checked: only spaces follow), a negative status on a
 * malformed header.
 */
int strata__st_next(struct strata__st_reader *r, struct strata__st_entry *e,
                    struct strata__st_meta *meta);

/* Bytes of one element of @p t; 0 for a type not read. */
size_t strata__st_dtype_size(enum strata__st_dtype t);

/*
 * @p n elements of type @p t at @p src (little-endian, any alignment) into f32 at @p dst:
 * f64 rounded to nearest, bf16 and f16 exactly.
 */
void strata__st_to_f32(enum strata__st_dtype t, const void *src, float *dst, size_t n);

#endif /* STRATA_NN_SAFETENSORS_H */
