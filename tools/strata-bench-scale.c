/*
 * strata-bench-scale: the alpha-beta model of Strata's collectives across processes (issue 46,
 * item 3; decision 0037). From a link's alpha (s per message), beta (s per byte) and the
 * reduction's gamma (s per byte of a two-source f32 sum on one core, measured here with the
 * library's kernel), the time, steps and MPI messages of every collective the net transport
 * runs (drivers/net/net.c, decision 0035: direct schedules to 4 processes, the butterfly from
 * 5), step by step as the code runs them, beside the ring and Rabenseifner bounds and the
 * all-to-all schedule before 0035; then every collective of a ddp, zero2 and fsdp training
 * step of a model (the lists the strategies issue, one device per process, fp32).
 *
 * Cost of one step of a schedule, for the busiest process (the critical path): per peer it
 * sends to, alpha + bytes x beta; plus gamma per byte it sums. A message of more than
 * STRATA__NET_SMALL bytes travels as two MPI messages (a header piece, then the data), which
 * the message counts show and the time charges alpha once for (they leave back to back).
 *
 * Usage:
 *   strata-bench-scale --rate                        gamma: the f32 sum kernel's bytes/s
 *   strata-bench-scale --alpha S --beta S [--gamma S] [--dir DIR] [--max-procs P]
 *       tables on stdout (all_reduce at 8 B, 1 MiB, 64 MiB against the bounds at 1 024 and
 *       16 384 processes; the step's collectives); with --dir, gnuplot data files there
 *   strata-bench-scale --alpha S --beta S --counts P [--op KIND] BYTES...
 *       "procs bytes steps msgs model_us" of one f32 all_reduce (or broadcast from rank 0, or
 *       all_gather of BYTES per rank), checked against strata-bench-sched's measured counts
 *       and times by tools/bench-scale.sh
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/reduce.h"
#include "drivers/net.h"
#include "tools/timing.h"

#define LANE STRATA__NET_DATA          /* a round of a large reduction: 1 MiB, one device */
#define SPLIT_MIN ((double)(64 << 10))  /* direct all_reduce: split from here (net.c) */
#define TREE_SMALL ((double)(32 << 10)) /* butterfly: a reduction rides it up to here */
#define LINE 64.0                       /* segments and parts end on cache lines */
#define MAX_LAYERS 16

/* A link and the reduction: seconds per message, per byte sent, per byte summed. */
struct link {
        double a, b, g;
};

/* What one collective costs the busiest process. */
struct cost {
        double t;   /* seconds */
        long steps; /* link steps */
        long msgs;  /* MPI messages it sends */
};

enum coll { ALL_REDUCE, REDUCE, BROADCAST, ALL_GATHER };

/*
 * One step: @p peers messages of @p bytes each arrive (the critical path), then @p sum bytes
 * are summed; the busiest process itself sends @p peers messages of @p sent bytes.
 */
static void step_as(struct cost *c, const struct link *l, int peers, double bytes, double sum,
                    double sent)
{
        c->steps++;
        c->msgs += (long)peers * (sent > (double)STRATA__NET_SMALL ? 2 : 1);
        c->t += peers * (l->a + bytes * l->b) + sum * l->g;
}

/* One step in which the busiest process sends what it receives. */
static void step(struct cost *c, const struct link *l, int peers, double bytes, double sum)
{
        step_as(c, l, peers, bytes, sum, bytes);
}

static int log2_floor(long p)
{
        int k = 0;

        while ((2L << k) <= p)
                k++;
        return k;
}

static int log2_ceil(long p)
{
        int k = 0;

        while ((1L << k) < p)
                k++;
        return k;
}

/* The first half of [0, m) kept by halving, as net.c's segment(): the line-rounded middle. */
static double upper_half(double m)
{
        double mid = ceil(m / 2.0 / LINE) * LINE;

        return mid > m ? 0.0 : m - mid;
}

/* The butterfly's headers alone (k steps, + 2 with pairs): arguments agreed. */
static void butterfly(struct cost *c, const struct link *l, long p, double ride)
{
        int k = log2_floor(p), pairs = p > (1L << k);

        if (pairs) /* rank 0, even, receives its pair's data and sends a header */
                step_as(c, l, 1, ride, ride, 0.0);
        for (int j = 0; j < k; j++)
                step(c, l, 1, ride, ride);
        if (pairs)
                step(c, l, 1, ride, 0.0);
}

/* A large reduction's round of @p m bytes: pairs fold, halving, gathering, pairs unfold. */
static void tree_round(struct cost *c, const struct link *l, long p, double m)
{
        int k = log2_floor(p), pairs = p > (1L << k);
        double seg[64];

        if (pairs)
                step_as(c, l, 1, m, m, 0.0);
        seg[0] = m;
        for (int j = 0; j < k; j++) { /* rank 0 keeps the lower half, sends the upper */
                double up = upper_half(seg[j]);

                step(c, l, 1, up, seg[j] - up);
                seg[j + 1] = seg[j] - up;
        }
        for (int j = k - 1; j >= 0; j--)
                step(c, l, 1, seg[j + 1], 0.0);
        if (pairs)
                step(c, l, 1, m, 0.0);
}

/* Strata's schedule since decision 0035 (one device per process), @p n bytes per rank. */
static struct cost strata(enum coll kind, long p, double n, const struct link *l)
{
        struct cost c = { 0 };
        int red = kind == ALL_REDUCE || kind == REDUCE;

        if (p <= STRATA__NET_DIRECT) {
                for (double lo = 0; lo < n || lo == 0; lo += LANE) {
                        double b = n - lo < LANE ? n - lo : LANE;
                        double part = ceil(b / p / LINE) * LINE;

                        if (kind == ALL_REDUCE && n >= SPLIT_MIN) {
                                step(&c, l, (int)p - 1, part, (p - 1) * part);
                                step(&c, l, (int)p - 1, part, 0.0);
                        } else {
                                step(&c, l, (int)p - 1, b, red ? (p - 1) * b : 0.0);
                        }
                        if (n == 0)
                                break;
                }
                return c;
        }
        if (red && n <= TREE_SMALL) {
                butterfly(&c, l, p, n);
                return c;
        }
        butterfly(&c, l, p, 0.0);
        if (red) {
                for (double lo = 0; lo < n; lo += LANE)
                        tree_round(&c, l, p, n - lo < LANE ? n - lo : LANE);
        } else if (kind == BROADCAST) {
                for (double lo = 0; lo < n; lo += LANE)
                        for (int j = 0; j < log2_ceil(p); j++)
                                step(&c, l, 1, n - lo < LANE ? n - lo : LANE, 0.0);
        } else { /* Bruck: rounds of 1 MiB / p bytes per rank (at least one element) */
                double per = floor((double)LANE / (double)p / 4.0) * 4.0;

                per = per < 4.0 ? 4.0 : per;
                for (double lo = 0; lo < n; lo += per) {
                        double blk = n - lo < per ? n - lo : per;

                        for (long d = 1; d < p; d *= 2)
                                step(&c, l, 1, (double)(d < p - d ? d : p - d) * blk, 0.0);
                }
        }
        return c;
}

/* The all-to-all schedule before decision 0035: header and data apart, every peer each step. */
static struct cost all_to_all(long p, double n, const struct link *l)
{
        struct cost c = { 0 };

        for (double lo = 0; lo < n; lo += LANE) {
                double b = n - lo < LANE ? n - lo : LANE, part = b / p;

                if (n >= SPLIT_MIN) {
                        step(&c, l, (int)p - 1, part, (p - 1) * part);
                        step(&c, l, (int)p - 1, part, 0.0);
                        c.msgs += 2 * (p - 1) - 2 * (p - 1) * (part > STRATA__NET_SMALL);
                } else {
                        step(&c, l, (int)p - 1, b, (p - 1) * b);
                        c.msgs += (p - 1) * (b <= STRATA__NET_SMALL);
                }
        }
        return c;
}

/* The bounds: ring 2(p-1) alpha, Rabenseifner 2 log2 p alpha; both 2(p-1)/p n beta. */
static double ring(long p, double n, const struct link *l)
{
        return 2.0 * (p - 1) * l->a + (2.0 * (p - 1) / p * l->b + (p - 1.0) / p * l->g) * n;
}

static double rabenseifner(long p, double n, const struct link *l)
{
        return 2.0 * log2((double)p) * l->a +
               (2.0 * (p - 1) / p * l->b + (p - 1.0) / p * l->g) * n;
}

/* ---- a training step's collectives ---- */

struct model {
        const char *spec;
        int nl;                  /* Linear layers */
        size_t np[MAX_LAYERS];   /* parameters of each */
        size_t total;
};

static int parse_model(const char *spec, struct model *m)
{
        long w[MAX_LAYERS + 1];
        int n = 0;
        char *end;

        memset(m, 0, sizeof(*m));
        m->spec = spec;
        for (const char *s = spec; n <= MAX_LAYERS; s = end + 1) {
                errno = 0;
                w[n] = strtol(s, &end, 10);
                if (errno || end == s || w[n] < 1)
                        return -1;
                n++;
                if (*end != '-')
                        break;
        }
        if (n < 2 || *end)
                return -1;
        m->nl = n - 1;
        for (int i = 0; i < m->nl; i++) {
                m->np[i] = (size_t)w[i] * (size_t)w[i + 1] + (size_t)w[i + 1];
                m->total += m->np[i];
        }
        return 0;
}

/* What a step issues: the collectives and their sum. */
struct step_cost {
        struct cost c;
        long colls;
};

static void add(struct step_cost *s, struct cost c)
{
        s->c.t += c.t;
        s->c.steps += c.steps;
        s->c.msgs += c.msgs;
        s->colls++;
}

/*
 * strata()'s collective rooted at process @p root: the same time (the busiest process's), and
 * process 0's messages: a broadcast's root sends the data, the others (direct: a header to
 * every peer; binomial: only where process 0 forwards) less; a reduce's counts do not depend
 * on the root.
 */
static struct cost rooted(enum coll kind, long p, double n, long root, const struct link *l)
{
        struct cost c = strata(kind, p, n, l);

        if (kind != BROADCAST || !root)
                return c;
        if (p <= STRATA__NET_DIRECT) { /* every round: a header to every peer */
                c.msgs = 0;
                for (double lo = 0; lo < n || lo == 0; lo += LANE) {
                        c.msgs += p - 1;
                        if (n == 0)
                                break;
                }
                return c;
        }
        for (double lo = 0; lo < n; lo += LANE) {
                double m = n - lo < LANE ? n - lo : LANE;
                long rel = (p - root) % p;

                for (long mask = 1; mask < p; mask *= 2)
                        if (!(rel < mask && rel + mask < p))
                                c.msgs -= m > (double)STRATA__NET_SMALL ? 2 : 1;
        }
        return c;
}

/* Each shard's piece of every layer (zero2's reduces, fsdp's broadcasts), @p times over. */
static void per_piece(struct step_cost *s, const struct model *m, long p, enum coll kind,
                      const struct link *l, int skip_last)
{
        size_t len = (m->total + (size_t)p - 1) / (size_t)p, lo = 0;

        len = (len + 15) / 16 * 16; /* strata__shard_len_for: whole cache lines */
        for (int i = 0; i < m->nl; lo += m->np[i], i++) {
                size_t hi = lo + m->np[i];

                if (skip_last && i == m->nl - 1)
                        continue;
                for (size_t g = lo / len; g < (size_t)p && g * len < hi; g++) {
                        size_t a = g * len > lo ? g * len : lo;
                        size_t b = (g + 1) * len < hi ? (g + 1) * len : hi;

                        add(s, rooted(kind, p, 4.0 * (double)(b - a), (long)g, l));
                }
        }
}

/*
 * The collectives over blocks (decision 0045) of one layer's span [lo, lo + n) (elements) cut
 * in shards of @p len, one device per process: a reduce-scatter (@p rs) or an all-gather. As
 * net.c runs them: direct to 4 processes, a step per round of 1 MiB to every peer with its
 * region; from 5, the butterfly's headers, then per round recursive halving whose segments are
 * the owners' pieces (rs; pairs fold before, the odd one's piece after) or Bruck's
 * dissemination of the pieces. Time: the largest segment or window any process receives in
 * a step (the critical path); messages: process 0's.
 */
static double piece_b(size_t lo, size_t n, size_t len, long g, size_t x, size_t y)
{
        size_t a = (size_t)g * len, e = a + len, s0 = lo + x, s1 = lo + y;

        a = a < s0 ? s0 : a > s1 ? s1 : a;
        e = e < s0 ? s0 : e > s1 ? s1 : e;
        (void)n;
        return 4.0 * (double)(e - a);
}

static void step_n(struct cost *c, const struct link *l, int peers, double bytes, double sum,
                   long msgs)
{
        c->steps++;
        c->msgs += msgs;
        c->t += peers * (l->a + bytes * l->b) + sum * l->g;
}

static long nmsg(double bytes)
{
        return bytes > (double)STRATA__NET_SMALL ? 2 : 1;
}

/*
 * The halving over the pieces of a round of @p m bytes (virtual ranks' bytes @p vs): its steps
 * added to @p c, or, where its critical path moves more than 2 m bytes (net.c's rsb_cost: one
 * owner holds most of the round), nothing, and 1 returned.
 */
static int rs_steps(struct cost *c, const struct link *l, const double *vs, long q, long r,
                    int k, size_t lo, size_t n, size_t len, size_t x, size_t y, double m)
{
        double kept[64], sent0[64], odd = 0.0, total = 0.0;

        for (int j = 0; j < k; j++) { /* segments: classes mod 2^(j+1) */
                long mod = 2L << j;

                kept[j] = sent0[j] = 0.0;
                for (long cl = 0; cl < mod; cl++) {
                        double seg = 0.0;

                        for (long u = cl; u < q; u += mod)
                                seg += vs[u];
                        kept[j] = seg > kept[j] ? seg : kept[j];
                        if (cl == (1L << j))
                                sent0[j] = seg;
                }
                total += kept[j];
        }
        for (long u = 0; u < r; u++) {
                double b = piece_b(lo, n, len, 2 * u + 1, x, y);

                odd = b > odd ? b : odd;
        }
        if (total + odd > 2.0 * m)
                return 1;
        if (r)
                step_n(c, l, 1, m, m, 1);
        for (int j = 0; j < k; j++)
                step_n(c, l, 1, kept[j], kept[j], nmsg(sent0[j]));
        if (r)
                step_n(c, l, 1, odd, 0.0, nmsg(piece_b(lo, n, len, 1, x, y)));
        return 0;
}

static struct cost blocks(int rs, long p, size_t lo, size_t n, size_t len, const struct link *l,
                          double *vs)
{
        size_t per = LANE / 4;
        int k = log2_floor(p);
        long q = 1L << k, r = p - q;
        struct cost c = { 0 };

        if (p > STRATA__NET_DIRECT)
                butterfly(&c, l, p, 0.0);
        for (size_t x = 0; x < n || x == 0; x += per) {
                size_t y = n - x < per ? n : x + per;
                double big = 0.0, m = 4.0 * (double)(y - x);
                long msgs = 0;

                if (p <= STRATA__NET_DIRECT) {
                        for (long g = 0; g < p; g++) {
                                double b = piece_b(lo, n, len, g, x, y);

                                big = b > big ? b : big;
                                msgs += g && rs ? nmsg(b) : 0;
                        }
                        if (!rs)
                                msgs = (p - 1) * nmsg(piece_b(lo, n, len, 0, x, y));
                        step_n(&c, l, (int)p - 1, big, rs ? (p - 1) * big : 0.0, msgs);
                        if (n == 0)
                                break;
                        continue;
                }
                if (!rs) { /* Bruck over the pieces: windows of cnt pieces from me + dist */
                        for (long d = 1; d < p; d *= 2) {
                                long cnt = d < p - d ? d : p - d;
                                double win = 0.0, mine = 0.0;

                                for (long g = 0; g < p; g++)
                                        vs[g] = piece_b(lo, n, len, g, x, y);
                                for (long j = 0; j < cnt; j++) {
                                        win += vs[(d + j) % p];
                                        mine += vs[j];
                                }
                                big = win;
                                for (long me = 1; me < p; me++) {
                                        win += vs[(me + d + cnt - 1) % p] - vs[(me + d - 1) % p];
                                        big = win > big ? win : big;
                                }
                                step_n(&c, l, 1, big, 0.0, nmsg(mine));
                        }
                        continue;
                }
                for (long u = 0; u < q; u++) { /* virtual ranks: a pair's two pieces */
                        long g = u < r ? 2 * u : u + r;

                        vs[u] = piece_b(lo, n, len, g, x, y) +
                                (u < r ? piece_b(lo, n, len, g + 1, x, y) : 0.0);
                }
                if (rs_steps(&c, l, vs, q, r, k, lo, n, len, x, y, m))
                        tree_round(&c, l, p, m); /* net.c's rsb_whole: cheaper here */
        }
        return c;
}

/* One collective over blocks per layer (@p skip_last: the last layer's kept). */
static void per_layer(struct step_cost *s, const struct model *m, long p, int rs,
                      const struct link *l, int skip_last, double *vs)
{
        size_t len = ((m->total + (size_t)p - 1) / (size_t)p + 15) / 16 * 16, lo = 0;

        for (int i = 0; i < m->nl; lo += m->np[i], i++)
                if (!(skip_last && i == m->nl - 1))
                        add(s, blocks(rs, p, lo, m->np[i], len, l, vs));
}

enum strategy { DDP, ZERO2, FSDP, ZERO2_PIECES, FSDP_PIECES, STRATEGIES };

static const char *const strategy_names[] = { "ddp", "zero2", "fsdp", "zero2_0037",
                                              "fsdp_0037" };

/*
 * One optimizer step, fp32, one device per process, no clipping, no accumulation: the batch
 * agreement (an all_gather of 2 i32 per process) in every strategy; ddp: the gradient's all_reduce (one 25 MiB bucket holds either model), the non-finite
 * check (an i32 all_reduce), the metrics' all_gather (4 doubles per process);
 * zero2: a reduce-scatter over the shards per layer (decision 0045), the check, the shards'
 * all_gather, metrics; fsdp: an all-gather over the shards per layer before its forward and
 * its backward (the last layer's kept between them), the reduce-scatters, the check, metrics.
 * zero2_0037 and fsdp_0037: the lists before 0045, a reduce (fsdp: and two broadcasts) per
 * shard piece of every layer.
 */
static struct step_cost train_step(enum strategy s, const struct model *m, long p,
                                   const struct link *l, double *vs)
{
        struct step_cost c = { { 0 }, 0 };
        size_t len = ((m->total + (size_t)p - 1) / (size_t)p + 15) / 16 * 16;

        if (s == DDP)
                add(&c, strata(ALL_REDUCE, p, 4.0 * (double)m->total, l));
        if (s == FSDP_PIECES) {
                per_piece(&c, m, p, BROADCAST, l, 0);
                per_piece(&c, m, p, BROADCAST, l, 1);
        }
        if (s == FSDP) {
                per_layer(&c, m, p, 0, l, 0, vs);
                per_layer(&c, m, p, 0, l, 1, vs);
        }
        if (s == ZERO2_PIECES || s == FSDP_PIECES)
                per_piece(&c, m, p, REDUCE, l, 0);
        if (s == ZERO2 || s == FSDP)
                per_layer(&c, m, p, 1, l, 0, vs);
        add(&c, strata(ALL_GATHER, p, 8.0, l)); /* the batch agreement: 2 i32 per process */
        add(&c, strata(ALL_REDUCE, p, 4.0, l));
        if (s == ZERO2 || s == ZERO2_PIECES)
                add(&c, strata(ALL_GATHER, p, 4.0 * (double)len, l));
        add(&c, strata(ALL_GATHER, p, 32.0, l));
        return c;
}

/* ---- measurement of the reduction ---- */

/* gamma: seconds per byte of dst = a + b (f32, 1 MiB each, in cache as a round's), median. */
static double measure_gamma(void)
{
        static float a[1 << 18], b[1 << 18], d[1 << 18];
        const void *src[2] = { a, b };
        void *dst[1] = { d };
        size_t n = sizeof(a) / sizeof(a[0]);
        double t[15];

        for (size_t i = 0; i < n; i++) {
                a[i] = (float)i;
                b[i] = 1.0f;
        }
        for (int r = 0; r < 15; r++) {
                double t0 = strata_tool_now();

                for (int i = 0; i < 50; i++)
                        strata__reduce_many(STRATA_F32, STRATA__SUM, dst, 1, src, 2, 0, n, 0);
                t[r] = (strata_tool_now() - t0) / 50.0 / (double)(n * sizeof(float));
        }
        return strata_tool_median(t, 15);
}

/* ---- output ---- */

/* The sizes the issue asks the model at: 8 B, 1 MiB, 64 MiB. */
static const double sizes[] = { 8.0, 1048576.0, 67108864.0 };

/* dir/name, opened for writing with its header line (NULL: it could not be). */
static FILE *data_file(const char *dir, const char *name, const char *header)
{
        char path[512];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        if ((f = fopen(path, "w")))
                fprintf(f, "# %s\n", header);
        return f;
}

static void bounds_table(const struct link *l)
{
        static const long procs[] = { 1024, 16384 };

        printf("all_reduce f32 against the alpha-beta lower bound 2 log2(p) alpha + "
               "2 (p-1)/p n beta + (p-1)/p n gamma\n%7s %10s %12s %12s %8s %7s %7s %s\n",
               "procs", "bytes", "model_us", "bound_us", "ratio", "steps", "msgs", "within 2x");
        for (int i = 0; i < 2; i++)
                for (int j = 0; j < 3; j++) {
                        struct cost c = strata(ALL_REDUCE, procs[i], sizes[j], l);
                        double b = rabenseifner(procs[i], sizes[j], l);

                        printf("%7ld %10.0f %12.1f %12.1f %8.2f %7ld %7ld %s\n", procs[i],
                               sizes[j], c.t * 1e6, b * 1e6, c.t / b, c.steps, c.msgs,
                               c.t <= 2.0 * b ? "yes" : "NO");
                }
}

static int curves(const struct link *l, const char *dir, long maxp)
{
        for (int j = 0; j < 3; j++) {
                char name[64];
                FILE *f;

                snprintf(name, sizeof(name), "allreduce-%.0f.dat", sizes[j]);
                if (!(f = data_file(dir, name, "procs strata_us all_to_all_us ring_us "
                                               "rabenseifner_us strata_msgs all_to_all_msgs")))
                        return -1;
                for (long p = 2; p <= maxp; p *= 2) {
                        struct cost s = strata(ALL_REDUCE, p, sizes[j], l);
                        struct cost o = all_to_all(p, sizes[j], l);

                        fprintf(f, "%ld %.3f %.3f %.3f %.3f %ld %ld\n", p, s.t * 1e6, o.t * 1e6,
                                ring(p, sizes[j], l) * 1e6, rabenseifner(p, sizes[j], l) * 1e6,
                                s.msgs, o.msgs);
                }
                fclose(f);
        }
        return 0;
}

static int step_table(const struct link *l, const char *dir, long maxp, double *vs)
{
        static const char *const specs[] = { "784-256-128-10", "784-2048-2048-10" };

        printf("\na training step's collectives (fp32, 1 device per process): modeled time "
               "(us), collectives, messages of the busiest process\n%-17s %7s", "model",
               "procs");
        for (int s = 0; s < STRATEGIES; s++)
                printf(" %12s %7s %8s", strategy_names[s], "colls", "msgs");
        printf("\n");
        for (int i = 0; i < 2; i++) {
                struct model m;
                char name[64];
                FILE *f = NULL;

                snprintf(name, sizeof(name), "step-%s.dat", specs[i]);
                if (parse_model(specs[i], &m) ||
                    (dir && !(f = data_file(dir, name, "procs ddp_us zero2_us fsdp_us ddp_colls "
                                                       "zero2_colls fsdp_colls zero2_0037_us "
                                                       "fsdp_0037_us zero2_0037_colls "
                                                       "fsdp_0037_colls"))))
                        return -1;
                for (long p = 2; p <= maxp; p *= 2) {
                        struct step_cost c[STRATEGIES];

                        for (int s = 0; s < STRATEGIES; s++)
                                c[s] = train_step((enum strategy)s, &m, p, l, vs);
                        if (p <= 16 || p == 128 || p == 1024 || p == 16384) {
                                printf("%-17s %7ld", specs[i], p);
                                for (int s = 0; s < STRATEGIES; s++)
                                        printf(" %12.1f %7ld %8ld", c[s].c.t * 1e6, c[s].colls,
                                               c[s].c.msgs);
                                printf("\n");
                        }
                        if (f)
                                fprintf(f, "%ld %.3f %.3f %.3f %ld %ld %ld %.3f %.3f %ld %ld\n",
                                        p, c[0].c.t * 1e6, c[1].c.t * 1e6, c[2].c.t * 1e6,
                                        c[0].colls, c[1].colls, c[2].colls, c[3].c.t * 1e6,
                                        c[4].c.t * 1e6, c[3].colls, c[4].colls);
                }
                if (f)
                        fclose(f);
        }
        return 0;
}

/* The collective named @p s (strata-bench-sched's --op), or -1. */
static int coll_of(const char *s)
{
        return !strcmp(s, "all_reduce") ? ALL_REDUCE : !strcmp(s, "broadcast") ? BROADCAST
               : !strcmp(s, "all_gather") ? ALL_GATHER : -1;
}

static int usage(void)
{
        fprintf(stderr, "usage: strata-bench-scale --rate | --alpha S --beta S [--gamma S] "
                        "[--dir DIR] [--max-procs P] [--counts P [--op KIND] BYTES...]\n");
        return 2;
}

/* A positive number of seconds (or a count), else -1. */
static double positive(const char *s)
{
        char *end;
        double v;

        errno = 0;
        v = strtod(s, &end);
        return errno || end == s || *end || !(v > 0.0) || !isfinite(v) ? -1.0 : v;
}

int main(int argc, char **argv)
{
        static const struct option lo[] = {
                { "rate", 0, 0, 'r' },  { "alpha", 1, 0, 'a' }, { "beta", 1, 0, 'b' },
                { "gamma", 1, 0, 'g' }, { "dir", 1, 0, 'd' },   { "counts", 1, 0, 'c' },
                { "max-procs", 1, 0, 'm' }, { "op", 1, 0, 'o' }, { 0, 0, 0, 0 }
        };
        int kind = ALL_REDUCE;
        struct link l = { -1.0, -1.0, 0.0 };
        const char *dir = NULL;
        long counts = 0, maxp = 16384;
        int rate = 0, o, rc = 0;
        double *vs;

        while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
                double v = o == 'r' || o == 'd' || o == 'o' || o == '?' ? 1.0 : positive(optarg);

                if (v < 0.0) {
                        const struct option *x = lo;

                        while (x->name && x->val != o)
                                x++;
                        fprintf(stderr, "strata-bench-scale: --%s: '%s' is not a positive "
                                        "number\n", x->name ? x->name : "?", optarg);
                        return 2;
                }
                if (o == 'r')
                        rate = 1;
                else if (o == 'a')
                        l.a = v;
                else if (o == 'b')
                        l.b = v;
                else if (o == 'g')
                        l.g = v;
                else if (o == 'd')
                        dir = optarg;
                else if (o == 'c')
                        counts = (long)v;
                else if (o == 'm')
                        maxp = (long)v;
                else if (o == 'o')
                        kind = coll_of(optarg);
                else
                        return usage();
        }
        if (rate) {
                double g = measure_gamma();

                printf("gamma_s_per_byte %.4e GBs %.3f\n", g, 1e-9 / g);
                return 0;
        }
        if (l.a < 0.0 || l.b < 0.0 || kind < 0 || maxp < 2 || maxp > (1L << 20) ||
            (counts && counts < 2) || (counts && optind == argc) || (!counts && optind < argc))
                return usage();
        if (l.g == 0.0)
                l.g = measure_gamma();
        if (counts) {
                for (int i = optind; i < argc; i++) {
                        double n = positive(argv[i]);
                        struct cost c;

                        if (n < 0.0)
                                return usage();
                        c = strata((enum coll)kind, counts, n, &l);
                        printf("%ld %.0f %ld %ld %.3f\n", counts, n, c.steps, c.msgs, c.t * 1e6);
                }
                return 0;
        }
        printf("link: alpha %.3f us, beta %.4f ns/B (%.3f GB/s); sum: gamma %.4f ns/B "
               "(%.3f GB/s)\n", l.a * 1e6, l.b * 1e9, 1e-9 / l.b, l.g * 1e9, 1e-9 / l.g);
        bounds_table(&l);
        if (dir && curves(&l, dir, maxp)) {
                fprintf(stderr, "strata-bench-scale: cannot write in %s\n", dir);
                return 1;
        }
        if (!(vs = malloc((size_t)maxp * sizeof(*vs))) || step_table(&l, dir, maxp, vs)) {
                fprintf(stderr, "strata-bench-scale: %s\n",
                        vs ? "cannot write the step's data files" : "out of memory");
                rc = 1;
        }
        free(vs);
        return rc;
}
