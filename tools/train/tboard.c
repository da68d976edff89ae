/*
 * strata-train's TensorBoard log (--tensorboard DIR): the scalars the metrics log has, as an
 * event file TensorBoard reads (DIR/events.out.tfevents.TIME.HOST.PID.0, a new file each run,
 * as TensorBoard's own writers name them). The file is a sequence of TFRecords: the data's
 * length (u64, little-endian), the masked CRC-32C of those 8 bytes, the data, the masked
 * CRC-32C of the data. Each record's data is an Event protocol buffer: wall_time (field 1,
 * double), step (2, int64), and either file_version (3, "brain.Event:2", the first record) or
 * a summary (5) of one value (1) holding its tag (1) and simple_value (2, float). The encoder
 * is these few fields by hand: no protobuf library. Records are appended whole (one write per
 * flush, published at the first): a run that dies leaves every record flushed before it
 * readable. Nothing allocates: records wait in a static buffer. Only the job's first process
 * writes.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tools/train/train.h"

static struct {
        struct strata__out out; /* the file (base/output.h), open while `on` */
        int on;
        int failed;             /* a write failed: reported once, the exit status says so */
        size_t fill;            /* bytes of records waiting in buf */
        unsigned char buf[1 << 14];
        char path[PATH_BUF];
        char opath[STRATA__OUT_PATH], otmp[STRATA__OUT_PATH];
} tb;

/* CRC-32C (Castagnoli, reflected polynomial 0x82f63b78), bit by bit: records are short. */
static uint32_t crc32c(const unsigned char *p, size_t n)
{
        uint32_t c = 0xffffffffu;

        for (size_t i = 0; i < n; i++) {
                c ^= p[i];
                for (int k = 0; k < 8; k++)
                        c = c >> 1 ^ (0x82f63b78u & -(c & 1u));
        }
        return ~c;
}

/* TFRecord's masked CRC: rotated right by 15 bits, plus a constant. */
static uint32_t masked_crc(const unsigned char *p, size_t n)
{
        uint32_t c = crc32c(p, n);

        return (c >> 15 | c << 17) + 0xa282ead8u;
}

/* Little-endian bytes of @p v (@p n of them) at @p p; returns the end. */
static unsigned char *put_le(unsigned char *p, uint64_t v, int n)
{
        for (int i = 0; i < n; i++)
                *p++ = (unsigned char)(v >> (8 * i));
        return p;
}

/* A protobuf varint. */
static unsigned char *put_varint(unsigned char *p, uint64_t v)
{
        for (; v >= 0x80; v >>= 7)
                *p++ = (unsigned char)(v | 0x80);
        *p++ = (unsigned char)v;
        return p;
}

/* A length-delimited field @p field of @p n bytes at @p data. */
static unsigned char *put_bytes(unsigned char *p, int field, const void *data, size_t n)
{
        p = put_varint(p, (uint64_t)field << 3 | 2);
        p = put_varint(p, n);
        memcpy(p, data, n);
        return p + n;
}

/* One TFRecord of the @p n bytes at @p data into the buffer (written first when full). */
static void record(const unsigned char *data, size_t n)
{
        unsigned char *p;

        if (sizeof(tb.buf) - tb.fill < n + 16)
                tb_flush();
        if (sizeof(tb.buf) - tb.fill < n + 16)
                return;
        p = tb.buf + tb.fill;
        put_le(p, n, 8);
        put_le(p + 8, masked_crc(p, 8), 4);
        memcpy(p + 12, data, n);
        put_le(p + 12 + n, masked_crc(data, n), 4);
        tb.fill += n + 16;
}

/* An Event's wall_time and step fields (the time now, as TensorBoard's writers give it). */
static unsigned char *event_head(unsigned char *p, long step)
{
        struct timespec ts;
        double wall;
        uint64_t bits;

        clock_gettime(CLOCK_REALTIME, &ts);
        wall = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
        memcpy(&bits, &wall, sizeof(bits));
        *p++ = 1 << 3 | 1; /* wall_time: 64-bit */
        p = put_le(p, bits, 8);
        *p++ = 2 << 3; /* step: varint */
        return put_varint(p, (uint64_t)step);
}

/** @brief One scalar @p v named @p tag at global step @p step (NaN, inf: not written). */
void tb_scalar(const char *tag, double v, long step)
{
        unsigned char ev[256], val[160], sum[176], *p;
        size_t tn = strlen(tag);
        float f = (float)v;
        uint32_t bits;

        if (!tb.on || tb.failed || !isfinite(v) || tn > 120)
                return;
        memcpy(&bits, &f, sizeof(bits));
        p = put_bytes(val, 1, tag, tn);
        *p++ = 2 << 3 | 5; /* simple_value: 32-bit */
        p = put_le(p, bits, 4);
        p = put_bytes(sum, 1, val, (size_t)(p - val));
        p = put_bytes(event_head(ev, step), 5, sum, (size_t)(p - sum));
        record(ev, (size_t)(p - ev));
}

/* A failed write: reported once; the run goes on and its exit status says so. */
static void tb_check(int rc)
{
        if (rc == STRATA_OK || tb.failed)
                return;
        tb.failed = 1;
        fprintf(stderr, "strata-train: --tensorboard %s: write failed (%s); TensorBoard "
                        "logging stopped\n", tb.path, strata_last_error());
}

/** @brief The records waiting, appended to the file whole. */
void tb_flush(void)
{
        if (tb.on && !tb.failed && tb.fill)
                tb_check(strata__out_write(&tb.out, tb.buf, tb.fill));
        tb.fill = 0;
}

/** @brief Whether the log is on (the step rows are computed for it). */
int tb_on(void)
{
        return tb.on && !tb.failed;
}

/**
 * @brief --tensorboard DIR: the directory made when missing, the run's event file created
 *        there with its first record (file_version) and published. 0, or 2 after the message.
 */
int tb_open(const char *dir)
{
        unsigned char ev[64], *p;
        char host[64] = "localhost";
        struct stat st;

        if (mkdir(dir, 0777) != 0 && errno != EEXIST)
                return bad("--tensorboard %s: cannot be made (%s)", dir, strerror(errno));
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
                return bad("--tensorboard %s: not a directory", dir);
        gethostname(host, sizeof(host) - 1);
        host[sizeof(host) - 1] = '\0';
        if (snprintf(tb.path, sizeof(tb.path), "%s/events.out.tfevents.%ld.%s.%d.0", dir,
                     (long)time(NULL), host, (int)getpid()) >= (int)sizeof(tb.path))
                return bad("--tensorboard %s: the path is too long", dir);
        tb.out = (struct strata__out){ .fd = -1, .path = tb.opath, .tmp = tb.otmp,
                                       .what = "--tensorboard" };
        if (strata__out_open(&tb.out, tb.path) != 0)
                return bad("%s", strata_last_error());
        tb.on = 1;
        p = put_bytes(event_head(ev, 0), 3, "brain.Event:2", 13);
        record(ev, (size_t)(p - ev));
        tb_flush();
        if (!tb.failed)
                tb_check(strata__out_publish(&tb.out));
        return tb.failed ? 2 : 0;
}

/** @brief Close the log (its records made durable); 1 when any write failed. */
int tb_close(void)
{
        if (!tb.on)
                return 0;
        tb_flush();
        if (!tb.failed)
                tb_check(strata__out_commit(&tb.out));
        else
                strata__out_abort(&tb.out);
        tb.on = 0;
        return tb.failed;
}
