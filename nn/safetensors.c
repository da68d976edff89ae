/*
 * The safetensors header as a stream (nn/safetensors.h): a small JSON reader over a fixed
 * window, enough of JSON for the format (objects, arrays, strings with escapes, non-negative
 * integers) plus a bounded skip of any other value in metadata. Every failure names the file
 * and the byte of the header where it was found.
 */
#include <string.h>

#include "base/base.h"
#include "strata/status.h"
#include "nn/safetensors.h"

/* Nesting a skipped value may have. */
#define SKIP_DEPTH 16

static int st_error(const struct strata__st_reader *r, const char *what)
{
        uint64_t at = r->at - r->len + r->pos - 8;

        return strata__fail(STRATA_EFORMAT, "'%s': safetensors header, byte %llu: %s", r->path,
                            (unsigned long long)at, what);
}

/*
 * The next byte of the header without taking it; -1 at its end, -2 on a read error (its
 * status in r->rc).
 */
static int peek(struct strata__st_reader *r)
{
        if (r->pos == r->len) {
                size_t n = r->end - r->at < sizeof(r->buf) ? (size_t)(r->end - r->at)
                                                            : sizeof(r->buf);
                int rc;

                if (!n)
                        return -1;
                rc = r->io->read_at(r->h, r->buf, n, r->at);
                if (rc != STRATA_OK) {
                        r->rc = rc;
                        return -2;
                }
                r->at += n;
                r->len = n;
                r->pos = 0;
        }
        return r->buf[r->pos];
}

static int take(struct strata__st_reader *r)
{
        int c = peek(r);

        if (c >= 0)
                r->pos++;
        return c;
}

/* The next byte past JSON whitespace, not taken. */
static int peek_ws(struct strata__st_reader *r)
{
        int c;

        while ((c = peek(r)) == ' ' || c == '\t' || c == '\n' || c == '\r')
                r->pos++;
        return c;
}

/* Take @p want, after whitespace. */
static int expect(struct strata__st_reader *r, int want, const char *what)
{
        int c = peek_ws(r);

        if (c < -1)
                return r->rc;
        if (c != want)
                return st_error(r, what);
        r->pos++;
        return STRATA_OK;
}

/* Four hex digits of a \u escape. */
static int hex4(struct strata__st_reader *r, unsigned *u)
{
        *u = 0;
        for (int i = 0; i < 4; i++) {
                int c = take(r);

                if (c >= '0' && c <= '9')
                        *u = *u * 16 + (unsigned)(c - '0');
                else if ((c | 32) >= 'a' && (c | 32) <= 'f')
                        *u = *u * 16 + (unsigned)((c | 32) - 'a' + 10);
                else
                        return st_error(r, "bad \\u escape");
        }
        return STRATA_OK;
}

/* One escaped character (after the backslash) as UTF-8 into @p out; its length in *@p n. */
static int unescape(struct strata__st_reader *r, char out[4], size_t *n)
{
        static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
        const char *p;
        int c = take(r);
        unsigned u;

        *n = 1;
        if (c > 0 && c != 'u' && (p = strchr(from, c))) {
                out[0] = to[p - from];
                return STRATA_OK;
        }
        if (c != 'u')
                return st_error(r, "bad escape in a string");
        STRATA_TRY(hex4(r, &u));
        if (u >= 0xd800 && u < 0xe000)
                return st_error(r, "a surrogate \\u escape (not read)");
        if (u < 0x80) {
                out[0] = (char)u;
        } else if (u < 0x800) {
                out[0] = (char)(0xc0 | u >> 6);
                out[1] = (char)(0x80 | (u & 63));
                *n = 2;
        } else {
                out[0] = (char)(0xe0 | u >> 12);
                out[1] = (char)(0x80 | (u >> 6 & 63));
                out[2] = (char)(0x80 | (u & 63));
                *n = 3;
        }
        return STRATA_OK;
}

/*
 * A string into @p out (@p cap bytes with the terminator; NULL: skipped). Longer than fits:
 * refused when @p cut is 0, else cut.
 */
static int string(struct strata__st_reader *r, char *out, size_t cap, int cut)
{
        size_t at = 0;

        STRATA_TRY(expect(r, '"', "a string was expected"));
        for (;;) {
                char u[4];
                size_t n = 1;
                int c = take(r);

                if (c < -1)
                        return r->rc;
                if (c < 0)
                        return st_error(r, "the header ends inside a string");
                if (c == '"')
                        break;
                if (c < 0x20)
                        return st_error(r, "a control character in a string");
                u[0] = (char)c;
                if (c == '\\')
                        STRATA_TRY(unescape(r, u, &n));
                if (!out)
                        continue;
                if (at + n >= cap) {
                        if (!cut)
                                return st_error(r, "a string too long");
                        continue;
                }
                memcpy(out + at, u, n);
                at += n;
        }
        if (out)
                out[at] = '\0';
        return STRATA_OK;
}

/* A non-negative integer below 2^63. */
static int integer(struct strata__st_reader *r, uint64_t *v)
{
        int c = peek_ws(r), digits = 0;

        *v = 0;
        while (c >= '0' && c <= '9') {
                if (*v > (UINT64_MAX / 2 - 9) / 10)
                        return st_error(r, "an integer too large");
                *v = *v * 10 + (uint64_t)(c - '0');
                r->pos++;
                digits++;
                c = peek(r);
        }
        if (c < -1)
                return r->rc;
        if (!digits)
                return st_error(r, "a non-negative integer was expected");
        return STRATA_OK;
}

/* ',' (1) or the closing @p close (0) after an element. */
static int more(struct strata__st_reader *r, int close)
{
        int c = peek_ws(r);

        if (c < -1)
                return r->rc;
        r->pos++;
        if (c == ',')
                return 1;
        if (c == close)
                return 0;
        r->pos--;
        return st_error(r, close == '}' ? "',' or '}' was expected" : "',' or ']' was expected");
}

/* An array of at most @p cap integers into @p v; their number in *@p n. */
static int int_array(struct strata__st_reader *r, uint64_t *v, int cap, int *n)
{
        int rc;

        *n = 0;
        STRATA_TRY(expect(r, '[', "'[' was expected"));
        if (peek_ws(r) == ']') {
                r->pos++;
                return STRATA_OK;
        }
        do {
                if (*n == cap)
                        return st_error(r, "an array too long");
                STRATA_TRY(integer(r, &v[(*n)++]));
        } while ((rc = more(r, ']')) == 1);
        return rc;
}

/* A literal's remaining letters (true, false, null). */
static int literal(struct strata__st_reader *r, const char *rest)
{
        for (; *rest; rest++)
                if (take(r) != *rest)
                        return st_error(r, "an unknown literal");
        return STRATA_OK;
}

/* Any JSON value, skipped; containers nested at most @p depth deep. */
static int skip(struct strata__st_reader *r, int depth)
{
        int c = peek_ws(r), rc;

        if (c < -1)
                return r->rc;
        if (c == '"')
                return string(r, NULL, 0, 1);
        if (c == '{' || c == '[') {
                int close = c == '{' ? '}' : ']';

                if (depth == 0)
                        return st_error(r, "values nested too deeply");
                r->pos++;
                if (peek_ws(r) == close) {
                        r->pos++;
                        return STRATA_OK;
                }
                do {
                        if (close == '}') {
                                STRATA_TRY(string(r, NULL, 0, 1));
                                STRATA_TRY(expect(r, ':', "':' was expected"));
                        }
                        STRATA_TRY(skip(r, depth - 1));
                } while ((rc = more(r, close)) == 1);
                return rc;
        }
        r->pos++;
        if (c == 't')
                return literal(r, "rue");
        if (c == 'f')
                return literal(r, "alse");
        if (c == 'n')
                return literal(r, "ull");
        if (c == '-' || (c >= '0' && c <= '9')) { /* a number's characters */
                while ((c = peek(r)) >= 0 && (strchr("0123456789+-.eE", c) && c))
                        r->pos++;
                return STRATA_OK;
        }
        r->pos--;
        return st_error(r, "a value was expected");
}

/* "__metadata__": an object whose values are kept where @p meta names their key. */
static int metadata(struct strata__st_reader *r, struct strata__st_meta *meta)
{
        char key[STRATA__ST_NAME];
        int rc;

        STRATA_TRY(expect(r, '{', "'__metadata__' is not an object"));
        if (peek_ws(r) == '}') {
                r->pos++;
                return STRATA_OK;
        }
        do {
                int k = meta ? meta->n : 0;

                STRATA_TRY(string(r, key, sizeof(key), 1));
                STRATA_TRY(expect(r, ':', "':' was expected"));
                while (k > 0 && strcmp(meta->keys[k - 1], key) != 0)
                        k--;
                if (k > 0 && peek_ws(r) == '"')
                        STRATA_TRY(string(r, meta->values[k - 1], STRATA__ST_VALUE, 1));
                else
                        STRATA_TRY(skip(r, SKIP_DEPTH));
        } while ((rc = more(r, '}')) == 1);
        return rc;
}

static const struct {
        const char *name;
        enum strata__st_dtype type;
} dtypes[] = {
        { "F32", STRATA__ST_F32 },
        { "F64", STRATA__ST_F64 },
        { "BF16", STRATA__ST_BF16 },
        { "F16", STRATA__ST_F16 },
};

size_t strata__st_dtype_size(enum strata__st_dtype t)
{
        return t == STRATA__ST_F64 ? 8 : t == STRATA__ST_F32 ? 4 : t == STRATA__ST_OTHER ? 0 : 2;
}

/* The entry's three keys' values into @p e (each once, all of them). */
static int entry_fields(struct strata__st_reader *r, struct strata__st_entry *e)
{
        char key[32];
        unsigned seen = 0;
        int rc;

        STRATA_TRY(expect(r, '{', "a tensor entry is not an object"));
        do {
                unsigned bit;
                uint64_t off[2];
                int n;

                STRATA_TRY(string(r, key, sizeof(key), 1));
                STRATA_TRY(expect(r, ':', "':' was expected"));
                bit = !strcmp(key, "dtype") ? 1 : !strcmp(key, "shape") ? 2 :
                      !strcmp(key, "data_offsets") ? 4 : 0;
                if (!bit)
                        return st_error(r, "a tensor entry has a key other than dtype, shape and "
                                   "data_offsets");
                if (seen & bit)
                        return st_error(r, "a tensor entry repeats a key");
                seen |= bit;
                if (bit == 1) {
                        STRATA_TRY(string(r, e->dtype_name, sizeof(e->dtype_name), 1));
                } else if (bit == 2) {
                        STRATA_TRY(int_array(r, e->shape, STRATA__ST_DIMS, &e->ndim));
                } else {
                        STRATA_TRY(int_array(r, off, 2, &n));
                        if (n != 2)
                                return st_error(r, "data_offsets is not [begin, end]");
                        e->begin = off[0];
                        e->end = off[1];
                }
        } while ((rc = more(r, '}')) == 1);
        if (rc < 0)
                return rc;
        if (seen != 7)
                return st_error(r, "a tensor entry lacks dtype, shape or data_offsets");
        return STRATA_OK;
}

/* The entry's offsets lie in the data, and span its shape's elements of its dtype. */
static int entry_check(struct strata__st_reader *r, struct strata__st_entry *e)
{
        uint64_t count = 1, size = strata__st_dtype_size(e->dtype);

        if (e->begin > e->end || e->end > r->size - r->data)
                return strata__fail(STRATA_EFORMAT, "'%s': tensor '%s' has data_offsets "
                                    "[%llu, %llu] outside the file's %llu data bytes (truncated?)",
                                    r->path, e->name, (unsigned long long)e->begin,
                                    (unsigned long long)e->end,
                                    (unsigned long long)(r->size - r->data));
        for (int d = 0; d < e->ndim; d++)
                if (e->shape[d] && count > UINT64_MAX / e->shape[d])
                        return strata__fail(STRATA_EFORMAT, "'%s': tensor '%s' has a shape too "
                                            "large", r->path, e->name);
                else
                        count *= e->shape[d];
        if (size && (count > UINT64_MAX / size || count * size != e->end - e->begin))
                return strata__fail(STRATA_EFORMAT, "'%s': tensor '%s' has %llu data bytes for "
                                    "%llu elements of %s", r->path, e->name,
                                    (unsigned long long)(e->end - e->begin),
                                    (unsigned long long)count, e->dtype_name);
        return STRATA_OK;
}

int strata__st_open(struct strata__st_reader *r, const struct strata_checkpoint_io *io,
                    struct strata_ckpt_handle *h, uint64_t size, const char *path)
{
        unsigned char le[8];
        uint64_t n = 0;

        memset(r, 0, offsetof(struct strata__st_reader, buf));
        r->io = io;
        r->h = h;
        r->path = path;
        r->size = size;
        if (size < 10)
                return strata__fail(STRATA_EFORMAT, "'%s' is not a safetensors file (%llu bytes)",
                                    path, (unsigned long long)size);
        STRATA_TRY(io->read_at(h, le, sizeof(le), 0));
        for (int i = 7; i >= 0; i--)
                n = n << 8 | le[i];
        if (n < 2 || n > STRATA__ST_HEADER_MAX || n > size - 8)
                return strata__fail(STRATA_EFORMAT, "'%s': safetensors header of %llu bytes in a "
                                    "file of %llu (at most %u; truncated or not safetensors?)",
                                    path, (unsigned long long)n, (unsigned long long)size,
                                    STRATA__ST_HEADER_MAX);
        r->at = 8;
        r->end = 8 + n;
        r->data = 8 + n;
        return expect(r, '{', "the header is not a JSON object");
}

/* The end of the header: the object closed, nothing but whitespace after it. */
static int header_end(struct strata__st_reader *r)
{
        int c = peek_ws(r);

        if (c < -1)
                return r->rc;
        if (c != -1)
                return st_error(r, "bytes after the header's object");
        r->done = 1;
        return 0;
}

int strata__st_next(struct strata__st_reader *r, struct strata__st_entry *e,
                    struct strata__st_meta *meta)
{
        for (;;) {
                int c;

                if (r->done)
                        return 0;
                c = peek_ws(r);
                if (c < -1)
                        return r->rc;
                if (r->started) {
                        int rc = more(r, '}');

                        if (rc < 0)
                                return rc;
                        if (rc == 0)
                                return header_end(r);
                } else if (c == '}') {
                        r->pos++;
                        return header_end(r);
                }
                r->started = 1;
                memset(e, 0, sizeof(*e));
                STRATA_TRY(string(r, e->name, sizeof(e->name), 0));
                STRATA_TRY(expect(r, ':', "':' was expected"));
                if (!strcmp(e->name, "__metadata__")) {
                        STRATA_TRY(metadata(r, meta));
                        continue;
                }
                STRATA_TRY(entry_fields(r, e));
                for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
                        if (!strcmp(e->dtype_name, dtypes[i].name))
                                e->dtype = dtypes[i].type;
                STRATA_TRY(entry_check(r, e));
                return 1;
        }
}

/* An f16's bits as f32 (exact: every f16 is an f32). */
static float f16_value(uint16_t h)
{
        uint32_t sign = (uint32_t)(h >> 15) << 31, e = h >> 10 & 31, m = h & 1023, bits;
        float f;

        if (e == 31) {
                bits = sign | 0x7f800000u | m << 13;
        } else if (e) {
                bits = sign | (e + 112) << 23 | m << 13;
        } else {
                f = (float)m * 0x1p-24f; /* subnormal: exact in f32 */
                return sign ? -f : f;
        }
        memcpy(&f, &bits, sizeof(f));
        return f;
}

void strata__st_to_f32(enum strata__st_dtype t, const void *src, float *dst, size_t n)
{
        const unsigned char *s = src;

        for (size_t i = 0; i < n; i++) {
                uint16_t h;
                uint32_t b;
                double d;

                switch (t) {
                case STRATA__ST_F32:
                        memcpy(&dst[i], s + 4 * i, 4);
                        break;
                case STRATA__ST_F64:
                        memcpy(&d, s + 8 * i, 8);
                        dst[i] = (float)d;
                        break;
                case STRATA__ST_BF16:
                        memcpy(&h, s + 2 * i, 2);
                        b = (uint32_t)h << 16;
                        memcpy(&dst[i], &b, 4);
                        break;
                case STRATA__ST_F16:
                        memcpy(&h, s + 2 * i, 2);
                        dst[i] = f16_value(h);
                        break;
                default:
                        dst[i] = 0.0f;
                }
        }
}
