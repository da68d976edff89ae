/*
 * IDX files (plain or gzip), datasets, the distributed sampler and the batch loader.
 *
 * Files are read with read(2) in fixed chunks and inflated with zlib whose state is carved
 * from a scratch arena on the caller's stack, so loading never touches the heap.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "strata/data.h"
#include "strata/status.h"
#include "base/base.h"
#include "kernel/philox.h"
#include "arch/simd.h"
#include "nn/gather.h"

#define CHUNK 16384
#define ZSCRATCH (64 * 1024) /* inflate state (~7 KiB) + 32 KiB window, with room */
#define IDX_MAX_BYTES ((size_t)1 << 34)

struct reader {
        const char *path;
        int fd;
        int gz;
        int zinit;
        int eof;
        z_stream zs;
        size_t have, off; /* plain files: bytes buffered and consumed in `in` */
        struct strata_arena scratch;
        unsigned char in[CHUNK];
        _Alignas(64) unsigned char zmem[ZSCRATCH];
};

static voidpf zalloc_arena(voidpf opaque, uInt items, uInt size)
{
        void *p = NULL;

        if (strata_arena_alloc(opaque, (size_t)items * size, 16, &p) != STRATA_OK)
                return Z_NULL;
        return p;
}

static void zfree_arena(voidpf opaque, voidpf p)
{
        (void)opaque;
        (void)p; /* the scratch arena dies with the reader */
}

static int fill_in(struct reader *r, size_t *got)
{
        ssize_t n;

        do
                n = read(r->fd, r->in, sizeof(r->in));
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return strata__fail(STRATA_EIO, "%s: read failed: %s", r->path, strerror(errno));
        *got = (size_t)n;
        if (n == 0)
                r->eof = 1;
        return STRATA_OK;
}

static int reader_open(struct reader *r, const char *path)
{
        struct stat st;
        size_t got = 0;

        memset(r, 0, offsetof(struct reader, in));
        r->path = path;
        /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below. */
        r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (r->fd < 0)
                return strata__fail(STRATA_EIO, "%s: cannot open: %s", path, strerror(errno));
        if (fstat(r->fd, &st) != 0 || !S_ISREG(st.st_mode))
                return strata__fail(STRATA_EINVAL, "%s: not a regular file (%s)", path,
                                    S_ISDIR(st.st_mode)    ? "a directory"
                                    : S_ISFIFO(st.st_mode) ? "a FIFO"
                                    : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                    : S_ISSOCK(st.st_mode) ? "a socket"
                                                           : "not a file");
        (void)fcntl(r->fd, F_SETFL, fcntl(r->fd, F_GETFL) & ~O_NONBLOCK);
        STRATA_TRY(fill_in(r, &got));
        r->have = got;
        r->gz = got >= 2 && r->in[0] == 0x1f && r->in[1] == 0x8b;
        if (!r->gz)
                return STRATA_OK;
        STRATA_TRY(strata_arena_init(&r->scratch, r->zmem, sizeof(r->zmem), NULL));
        r->zs.zalloc = zalloc_arena;
        r->zs.zfree = zfree_arena;
        r->zs.opaque = &r->scratch;
        r->zs.next_in = r->in;
        r->zs.avail_in = (uInt)got;
        if (inflateInit2(&r->zs, 16 + MAX_WBITS) != Z_OK)
                return strata__fail(STRATA_EFORMAT, "%s: cannot start gzip inflation", path);
        r->zinit = 1;
        return STRATA_OK;
}

static void reader_close(struct reader *r)
{
        if (r->zinit)
                inflateEnd(&r->zs);
        if (r->fd >= 0)
                close(r->fd);
        r->fd = -1;
}

/* Read up to n bytes; *got < n only at the end of the data. */
static int reader_read(struct reader *r, unsigned char *dst, size_t n, size_t *got)
{
        size_t done = 0;

        while (done < n) {
                if (!r->gz) {
                        size_t k;

                        if (r->off == r->have) {
                                if (r->eof)
                                        break;
                                STRATA_TRY(fill_in(r, &r->have));
                                r->off = 0;
                                continue;
                        }
                        k = r->have - r->off < n - done ? r->have - r->off : n - done;
                        memcpy(dst + done, r->in + r->off, k);
                        r->off += k;
                        done += k;
                } else {
                        size_t want = n - done > (1u << 30) ? (1u << 30) : n - done;
                        int zrc;

                        if (r->zs.avail_in == 0 && !r->eof) {
                                size_t k = 0;

                                STRATA_TRY(fill_in(r, &k));
                                r->zs.next_in = r->in;
                                r->zs.avail_in = (uInt)k;
                        }
                        r->zs.next_out = dst + done;
                        r->zs.avail_out = (uInt)want;
                        zrc = inflate(&r->zs, Z_NO_FLUSH);
                        done += want - r->zs.avail_out;
                        if (zrc == Z_STREAM_END) {
                                /* Another gzip member may follow (gzip -t accepts those). */
                                if (r->zs.avail_in == 0 && !r->eof) {
                                        size_t k = 0;

                                        STRATA_TRY(fill_in(r, &k));
                                        r->zs.next_in = r->in;
                                        r->zs.avail_in = (uInt)k;
                                }
                                if (r->zs.avail_in == 0)
                                        break;
                                if (inflateReset(&r->zs) != Z_OK)
                                        return strata__fail(STRATA_EFORMAT, "%s: gzip member "
                                                            "reset failed", r->path);
                                continue;
                        }
                        if (zrc != Z_OK && !(zrc == Z_BUF_ERROR && !r->eof))
                                return strata__fail(STRATA_EFORMAT, "%s: corrupt gzip data (%s)",
                                                    r->path, r->zs.msg ? r->zs.msg : "zlib error");
                        if (r->eof && r->zs.avail_in == 0 && want == r->zs.avail_out)
                                return strata__fail(STRATA_EFORMAT,
                                                    "%s: gzip stream ends early (truncated)",
                                                    r->path);
                }
        }
        *got = done;
        return STRATA_OK;
}

static int read_header(struct reader *r, struct strata_idx_info *info)
{
        unsigned char h[4 + 16];
        size_t got, bytes = 1;

        STRATA_TRY(reader_read(r, h, 4, &got));
        if (got < 4)
                return strata__fail(STRATA_EFORMAT, "%s: shorter than an IDX header", r->path);
        if (h[0] != 0 || h[1] != 0)
                return strata__fail(STRATA_EFORMAT, "%s: bad IDX magic %02x%02x%02x%02x",
                                    r->path, h[0], h[1], h[2], h[3]);
        if (h[2] != 0x08)
                return strata__fail(STRATA_EFORMAT,
                                    "%s: IDX element type 0x%02x unsupported (need 0x08, u8)",
                                    r->path, h[2]);
        if (h[3] < 1 || h[3] > 4)
                return strata__fail(STRATA_EFORMAT, "%s: IDX has %d dimensions (1..4)", r->path,
                                    h[3]);
        info->ndims = h[3];
        STRATA_TRY(reader_read(r, h + 4, 4u * h[3], &got));
        if (got < 4u * h[3])
                return strata__fail(STRATA_EFORMAT, "%s: truncated IDX header", r->path);
        for (int i = 0; i < info->ndims; i++) {
                const unsigned char *d = h + 4 + 4 * i;

                info->dims[i] = (uint32_t)d[0] << 24 | (uint32_t)d[1] << 16 |
                                (uint32_t)d[2] << 8 | d[3];
                if (info->dims[i] == 0)
                        return strata__fail(STRATA_EFORMAT, "%s: dimension %d is 0", r->path, i);
                if (strata__mul_size(bytes, info->dims[i], &bytes) || bytes > IDX_MAX_BYTES)
                        return strata__fail(STRATA_EFORMAT, "%s: payload too large", r->path);
        }
        info->bytes = bytes;
        return STRATA_OK;
}

int strata_idx_info(const char *path, struct strata_idx_info *info)
{
        struct reader r;
        struct strata_idx_info tmp;
        int rc;

        if (!path || !info)
                return strata__fail(STRATA_EINVAL, "idx info: NULL argument");
        rc = reader_open(&r, path);
        if (rc == STRATA_OK)
                rc = read_header(&r, &tmp);
        reader_close(&r);
        if (rc == STRATA_OK)
                *info = tmp;
        return rc;
}

int strata_idx_load(const char *path, struct strata_arena *arena, struct strata_idx_info *info,
                    const uint8_t **data)
{
        struct reader r;
        struct strata_idx_info tmp;
        unsigned char extra;
        void *p = NULL;
        size_t got = 0;
        int rc;

        if (!path || !arena || !info || !data)
                return strata__fail(STRATA_EINVAL, "idx load: NULL argument");
        STRATA_TRY_GOTO(rc, reader_open(&r, path), out);
        STRATA_TRY_GOTO(rc, read_header(&r, &tmp), out);
        STRATA_TRY_GOTO(rc, strata_arena_alloc(arena, tmp.bytes, 64, &p), out);
        STRATA_TRY_GOTO(rc, reader_read(&r, p, tmp.bytes, &got), out);
        if (got < tmp.bytes) {
                rc = strata__fail(STRATA_EFORMAT, "%s: truncated: %zu of %zu payload bytes",
                                  path, got, tmp.bytes);
                goto out;
        }
        STRATA_TRY_GOTO(rc, reader_read(&r, &extra, 1, &got), out);
        if (got != 0) {
                rc = strata__fail(STRATA_EFORMAT, "%s: trailing data after %zu payload bytes",
                                  path, tmp.bytes);
                goto out;
        }
        *info = tmp;
        *data = p;
out:
        reader_close(&r);
        return rc;
}

/*
 * The two files of a data set agree: 3-D images whose rows x columns fit a model's input
 * width (an int: 2^31 - 1; their 32-bit product wrapped silently before), 1-D labels, one
 * label per image.
 */
static int dataset_shape(const char *images, const struct strata_idx_info *a,
                         const char *labels, const struct strata_idx_info *b, uint32_t *dim)
{
        uint64_t d;

        if (a->ndims != 3)
                return strata__fail(STRATA_EFORMAT, "%s: images must be 3-D, got %d-D", images,
                                    a->ndims);
        if (b->ndims != 1)
                return strata__fail(STRATA_EFORMAT, "%s: labels must be 1-D, got %d-D", labels,
                                    b->ndims);
        if (a->dims[0] != b->dims[0])
                return strata__fail(STRATA_EFORMAT, "%s has %u images but %s has %u labels",
                                    images, a->dims[0], labels, b->dims[0]);
        d = (uint64_t)a->dims[1] * a->dims[2];
        if (d > INT32_MAX)
                return strata__fail(STRATA_EFORMAT, "%s: images of %u x %u pixels are too "
                                    "large (at most 2^31 - 1 features)", images, a->dims[1],
                                    a->dims[2]);
        *dim = (uint32_t)d;
        return STRATA_OK;
}

int strata_dataset_bytes(const char *images, const char *labels, size_t *bytes)
{
        struct strata_idx_info a, b;
        uint32_t dim;

        if (!bytes)
                return strata__fail(STRATA_EINVAL, "dataset bytes: NULL argument");
        STRATA_TRY(strata_idx_info(images, &a));
        STRATA_TRY(strata_idx_info(labels, &b));
        STRATA_TRY(dataset_shape(images, &a, labels, &b, &dim));
        *bytes = STRATA__ALIGN_UP(a.bytes, 64) + STRATA__ALIGN_UP(b.bytes, 64);
        return STRATA_OK;
}

int strata_dataset_load(struct strata_dataset *ds, struct strata_arena *arena,
                        const char *images, const char *labels)
{
        struct strata_idx_info a, b;
        const uint8_t *x, *y;
        uint32_t dim;
        int maxl = 0;

        if (!ds || !arena || !images || !labels)
                return strata__fail(STRATA_EINVAL, "dataset load: NULL argument");
        STRATA_TRY(strata_idx_info(images, &a));
        STRATA_TRY(strata_idx_info(labels, &b));
        STRATA_TRY(dataset_shape(images, &a, labels, &b, &dim)); /* before any payload */
        STRATA_TRY(strata_idx_load(images, arena, &a, &x));
        STRATA_TRY(strata_idx_load(labels, arena, &b, &y));
        STRATA_TRY(dataset_shape(images, &a, labels, &b, &dim)); /* the files may have changed */
        for (uint32_t i = 0; i < b.dims[0]; i++)
                maxl = y[i] > maxl ? y[i] : maxl;
        *ds = (struct strata_dataset){ .images = x, .labels = y, .n = a.dims[0], .dim = dim,
                                       .classes = maxl + 1 };
        return STRATA_OK;
}

int strata_dataset_synthetic(struct strata_dataset *ds, struct strata_arena *arena, uint32_t n,
                             uint32_t dim, int classes, uint64_t seed)
{
        uint8_t *x, *y;
        void *p;
        size_t bytes;

        if (!ds || !arena || n == 0 || dim == 0 || classes < 2 || classes > 256)
                return strata__fail(STRATA_EINVAL, "synthetic dataset: bad argument");
        if (strata__mul_size(n, dim, &bytes))
                return strata__fail(STRATA_EOVERFLOW, "synthetic dataset: size overflows");
        STRATA_TRY(strata_arena_alloc(arena, bytes, 64, &p));
        x = p;
        STRATA_TRY(strata_arena_alloc(arena, n, 64, &p));
        y = p;
        for (uint32_t i = 0; i < n; i++) {
                /* The label picks a band of features that is brighter: learnable, not trivial. */
                int label = (int)(strata__uniform_at(seed, 1, i) * (float)classes);
                uint32_t band = dim / (uint32_t)classes;

                y[i] = (uint8_t)label;
                for (uint32_t k = 0; k < dim; k++) {
                        float u = strata__uniform_at(seed, 2 + (uint64_t)i, k);
                        int hot = band && k / band == (uint32_t)label;

                        x[(size_t)i * dim + k] = (uint8_t)(u * (hot ? 255.0f : 160.0f));
                }
        }
        *ds = (struct strata_dataset){ .images = x, .labels = y, .n = n, .dim = dim,
                                       .classes = classes };
        return STRATA_OK;
}

int strata_sampler_init(struct strata_sampler *s, struct strata_arena *arena, uint32_t n,
                        int world, int rank, int shuffle, int drop_last, uint64_t seed)
{
        uint32_t per;
        void *a, *b;

        if (!s || !arena || n == 0 || world <= 0 || rank < 0 || rank >= world)
                return strata__fail(STRATA_EINVAL, "sampler: n %u, world %d, rank %d invalid", n,
                                    world, rank);
        if (drop_last && n < (uint32_t)world)
                return strata__fail(STRATA_EINVAL, "sampler: drop_last with %u samples < %d ranks",
                                    n, world);
        /* PyTorch: drop the tail so every rank has n / world, or pad up to ceil(n / world). */
        per = drop_last ? n / (uint32_t)world : (n + (uint32_t)world - 1) / (uint32_t)world;
        STRATA_TRY(strata_arena_alloc(arena, (size_t)per * sizeof(uint32_t), 0, &a));
        STRATA_TRY(strata_arena_alloc(arena, (size_t)n * sizeof(uint32_t), 0, &b));
        *s = (struct strata_sampler){ .n = n, .world = world, .rank = rank, .shuffle = shuffle,
                                      .drop_last = drop_last, .seed = seed, .per_rank = per,
                                      .indices = a, .perm = b };
        strata_sampler_set_epoch(s, 0);
        return STRATA_OK;
}

void strata_sampler_set_epoch(struct strata_sampler *s, uint64_t epoch)
{
        uint32_t n = s->n;

        for (uint32_t i = 0; i < n; i++)
                s->perm[i] = i;
        if (s->shuffle) {
                for (uint32_t i = n - 1; i > 0; i--) {
                        struct strata__philox4 r = strata__philox(s->seed + epoch, 7, i);
                        uint32_t j = (uint32_t)(((uint64_t)r.v[0] * (i + 1)) >> 32);
                        uint32_t t = s->perm[i];

                        s->perm[i] = s->perm[j];
                        s->perm[j] = t;
                }
        }
        /* Global position k of this rank's i-th sample is rank + i * world; past n it wraps. */
        for (uint32_t i = 0; i < s->per_rank; i++) {
                uint64_t k = (uint64_t)s->rank + (uint64_t)i * (uint64_t)s->world;

                s->indices[i] = s->perm[k % n];
        }
}

int strata_loader_init(struct strata_loader *l, struct strata_arena *arena,
                       const struct strata_dataset *ds, int batch, int drop_last)
{
        void *x, *y;
        size_t fl;

        if (!l || !arena || !ds || batch <= 0)
                return strata__fail(STRATA_EINVAL, "loader: bad argument (batch %d)", batch);
        if (strata__mul_size((size_t)batch, ds->dim, &fl) ||
            strata__mul_size(fl, sizeof(float), &fl))
                return strata__fail(STRATA_EOVERFLOW, "loader: batch %d too large", batch);
        STRATA_TRY(strata_arena_alloc(arena, fl, 0, &x));
        STRATA_TRY(strata_arena_alloc(arena, (size_t)batch * sizeof(int32_t), 0, &y));
        *l = (struct strata_loader){ .ds = ds, .batch = batch, .drop_last = drop_last,
                                     .scale = 1.0f / 255.0f, .x = x, .y = y };
        return STRATA_OK;
}

int strata_loader_reset(struct strata_loader *l, const uint32_t *indices, uint32_t count)
{
        if (!l || !l->ds || (count && !indices))
                return strata__fail(STRATA_EINVAL, "loader reset: NULL loader or indices");
        l->indices = indices;
        l->count = 0;
        l->pos = 0;
        for (uint32_t i = 0; i < count; i++)
                if (indices[i] >= l->ds->n)
                        return strata__fail(STRATA_EINVAL, "loader reset: index %u (entry %u) "
                                            "is not below the %u samples", indices[i], i,
                                            l->ds->n);
        l->count = count;
        return STRATA_OK;
}

void strata__gather_rows(const uint8_t *images, const uint32_t *index, int rows, int dim,
                         float scale, float shift, float *dst)
{
        /* The rows are scattered over the data set: ask for all their lines first, so the
         * cache misses overlap instead of being taken one row at a time. */
        for (int r = 0; r < rows; r++)
                for (int k = 0; k < dim; k += 64)
                        __builtin_prefetch(images + (size_t)index[r] * (size_t)dim + k, 0, 0);
        for (int r = 0; r < rows; r++)
                strata__bytes_to_float(images + (size_t)index[r] * (size_t)dim,
                                       dst + (size_t)r * (size_t)dim, scale, shift,
                                       (uint32_t)dim);
}

STRATA_SIMD void strata__bytes_to_float(const uint8_t *restrict src, float *restrict dst,
                                        float scale, float shift, uint32_t n)
{
        for (uint32_t k = 0; k < n; k++)
                dst[k] = (float)src[k] * scale + shift;
}

void strata_loader_standardize(struct strata_loader *l, const struct strata_dataset *stats)
{
        /* Pixels are bytes: count them per value (four tables, so that equal neighbours do
         * not wait on one counter), then the sums are exact integers in double. */
        uint64_t h[4][256] = { { 0 } };
        size_t n = (size_t)stats->n * stats->dim, i = 0;
        const uint8_t *px = stats->images;
        double s = 0.0, s2 = 0.0, mean, sd;

        for (; i + 4 <= n; i += 4) {
                h[0][px[i]]++;
                h[1][px[i + 1]]++;
                h[2][px[i + 2]]++;
                h[3][px[i + 3]]++;
        }
        for (; i < n; i++)
                h[0][px[i]]++;
        for (int v = 0; v < 256; v++) {
                double c = (double)(h[0][v] + h[1][v] + h[2][v] + h[3][v]);

                s += c * v;
                s2 += c * v * v;
        }
        mean = n ? s / (double)n : 0.0;
        sd = n ? sqrt(s2 / (double)n - mean * mean) : 0.0;
        if (!(sd > 0.0))
                sd = 1.0;
        l->scale = (float)(1.0 / sd);
        l->shift = (float)(-mean / sd);
}

int strata_loader_next(struct strata_loader *l, struct strata_batch *b)
{
        uint32_t left, rows, dim;

        if (!l || !b || !l->ds)
                return 0;
        left = l->count - l->pos;
        dim = l->ds->dim;
        if (left == 0 || (l->drop_last && left < (uint32_t)l->batch))
                return 0;
        rows = left < (uint32_t)l->batch ? left : (uint32_t)l->batch;
        for (uint32_t r = 0; r < rows; r++) {
                uint32_t idx = l->indices[l->pos + r];
                strata__bytes_to_float(l->ds->images + (size_t)idx * dim,
                                       l->x + (size_t)r * dim, l->scale, l->shift, dim);
                l->y[r] = l->ds->labels[idx];
        }
        l->pos += rows;
        *b = (struct strata_batch){ .x = l->x, .y = l->y, .rows = (int)rows, .dim = (int)dim };
        return 1;
}

int strata_loader_next_indexed(struct strata_loader *l, struct strata_batch *b)
{
        uint32_t left, rows;

        if (!l || !b || !l->ds)
                return 0;
        left = l->count - l->pos;
        if (left == 0 || (l->drop_last && left < (uint32_t)l->batch))
                return 0;
        rows = left < (uint32_t)l->batch ? left : (uint32_t)l->batch;
        for (uint32_t r = 0; r < rows; r++)
                l->y[r] = l->ds->labels[l->indices[l->pos + r]];
        *b = (struct strata_batch){ .y = l->y, .rows = (int)rows, .dim = (int)l->ds->dim,
                                    .images = l->ds->images, .index = l->indices + l->pos,
                                    .nimages = l->ds->n, .scale = l->scale,
                                    .shift = l->shift };
        l->pos += rows;
        return 1;
}
