/*
 * An agent's save and load (contract in include/strata/rl.h): each model's checkpoint through
 * the runtime (PREFIX-K.ckpt), and the agent's five blocks — its buffer, its exploration and
 * smoothing noise, its state normaliser, its own block of counters and scratch — in
 * PREFIX-rl.state: a header (the
 * configuration's digest, each block's size and CRC-32), then the blocks' bytes. The blocks are
 * the whole state of what they hold, so a loaded agent continues bitwise. Loading checks the
 * state file completely (sizes, digests, every block's CRC, read through a stack buffer)
 * before it changes anything; nothing is allocated.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "strata/rl.h"
#include "base/base.h"
#include "base/output.h"
#include "nn/checkpoint.h"
#include "rl/agent.h"
#include "rl/rl.h"

#define STATE_MAGIC 0x4554415453524c53ull /* "SLRSTATE" */
#define STATE_VERSION 1
#define NBLOCKS 5
#define CHUNK 65536

struct state_head {
        uint64_t magic;
        uint32_t version, nblocks;
        uint64_t digest;         /* the agent block's configuration digest */
        uint64_t bytes[NBLOCKS]; /* each block's size */
        uint32_t crc[NBLOCKS];   /* each block's CRC-32 */
        uint32_t head_crc;       /* this header's, with head_crc 0 */
        uint32_t pad;
};

/* The agent's blocks, in the file's order. */
static void blocks(struct strata_rl_agent *ag, void *mem[NBLOCKS], size_t bytes[NBLOCKS])
{
        int td3 = ag->cfg.algo != STRATA_RL_PPO; /* off-policy: a replay */

        mem[0] = td3 ? ag->replay.block : ag->rollout.block;
        bytes[0] = td3 ? ag->replay.bytes : ag->rollout.bytes;
        mem[1] = ag->noise.block, bytes[1] = ag->noise.bytes;
        mem[2] = ag->smooth.block, bytes[2] = ag->smooth.bytes;
        mem[3] = ag->norm.block, bytes[3] = ag->norm.bytes;
        mem[4] = ag->block, bytes[4] = ag->bytes;
}

static int path_of(char *out, const char *prefix, const char *tail)
{
        int n;

        if (!prefix || !*prefix)
                return strata__fail(STRATA_EINVAL, "rl agent: NULL or empty prefix");
        n = snprintf(out, STRATA__OUT_PATH, "%s-%s", prefix, tail);
        if (n < 0 || n >= STRATA__OUT_PATH)
                return strata__fail(STRATA_EINVAL, "rl agent: prefix too long");
        return STRATA_OK;
}

static int live(const struct strata_rl_agent *ag)
{
        if (!ag || !ag->rt || !ag->block)
                return strata__fail(STRATA_EINVAL, "rl agent: not initialised");
        return STRATA_OK;
}

static int models(struct strata_rl_agent *ag, const char *prefix, int load)
{
        char path[STRATA__OUT_PATH], tail[32];
        int n;

        STRATA_TRY(strata_model_count(ag->rt, &n));
        for (int k = 0; k < n; k++) {
                snprintf(tail, sizeof(tail), "%d.ckpt", k);
                STRATA_TRY(path_of(path, prefix, tail));
                if (load)
                        STRATA_TRY(strata_model_load_checkpoint(ag->rt, k, path, NULL, 0, NULL,
                                                                NULL));
                else
                        STRATA_TRY(strata_model_save_checkpoint(ag->rt, k, path, NULL, 0));
        }
        return STRATA_OK;
}

int strata_rl_save(struct strata_rl_agent *ag, const char *prefix)
{
        char path[STRATA__OUT_PATH], tpath[STRATA__OUT_PATH], tmp[STRATA__OUT_PATH];
        struct strata__out o = { -1, tpath, tmp, "rl state" };
        struct state_head h;
        void *mem[NBLOCKS];
        size_t bytes[NBLOCKS];

        STRATA_TRY(live(ag));
        STRATA_TRY(path_of(path, prefix, "rl.state"));
        STRATA_TRY(models(ag, prefix, 0));
        blocks(ag, mem, bytes);
        memset(&h, 0, sizeof(h));
        h.magic = STATE_MAGIC;
        h.version = STATE_VERSION;
        h.nblocks = NBLOCKS;
        h.digest = ((const struct strata__agent_head *)ag->block)->digest;
        for (int i = 0; i < NBLOCKS; i++) {
                h.bytes[i] = bytes[i];
                h.crc[i] = strata__crc32(0, mem[i], bytes[i]);
        }
        h.head_crc = strata__crc32(0, &h, sizeof(h));
        STRATA_TRY(strata__out_open(&o, path));
        STRATA_TRY(strata__out_write(&o, &h, sizeof(h)));
        for (int i = 0; i < NBLOCKS; i++)
                STRATA_TRY(strata__out_write(&o, mem[i], bytes[i]));
        return strata__out_commit(&o);
}

/* Read exactly @p n bytes of @p fd into @p buf. */
static int read_all(int fd, void *buf, size_t n, const char *path)
{
        unsigned char *p = buf;

        while (n > 0) {
                ssize_t r = read(fd, p, n);

                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return strata__fail(STRATA_EIO, "rl agent: reading %s: %s", path,
                                            strerror(errno));
                if (r == 0)
                        return strata__fail(STRATA_EFORMAT, "rl agent: %s is truncated", path);
                p += r;
                n -= (size_t)r;
        }
        return STRATA_OK;
}

/* Check the header against the live agent. */
static int check_head(struct strata_rl_agent *ag, const struct state_head *h, const char *path)
{
        struct state_head c = *h;
        void *mem[NBLOCKS];
        size_t bytes[NBLOCKS];

        c.head_crc = 0;
        if (h->magic != STATE_MAGIC || h->version != STATE_VERSION || h->nblocks != NBLOCKS ||
            strata__crc32(0, &c, sizeof(c)) != h->head_crc)
                return strata__fail(STRATA_EFORMAT, "rl agent: %s is not an agent state of "
                                    "version %d, or its header is damaged", path,
                                    STATE_VERSION);
        if (h->digest != ((const struct strata__agent_head *)ag->block)->digest)
                return strata__fail(STRATA_EINVAL, "rl agent: %s was saved by an agent of "
                                    "another configuration", path);
        blocks(ag, mem, bytes);
        for (int i = 0; i < NBLOCKS; i++)
                if (h->bytes[i] != bytes[i])
                        return strata__fail(STRATA_EINVAL, "rl agent: %s: block %d holds %llu "
                                            "bytes, this agent's %zu", path, i,
                                            (unsigned long long)h->bytes[i], bytes[i]);
        return STRATA_OK;
}

/* Every block's CRC and its first bytes (kind and digest) against the live block's. */
static int check_blocks(struct strata_rl_agent *ag, int fd, const struct state_head *h,
                        const char *path)
{
        unsigned char buf[CHUNK], extra;
        void *mem[NBLOCKS];
        size_t bytes[NBLOCKS];

        blocks(ag, mem, bytes);
        for (int i = 0; i < NBLOCKS; i++) {
                uint32_t crc = 0;

                for (size_t off = 0; off < bytes[i]; off += CHUNK) {
                        size_t n = bytes[i] - off < CHUNK ? bytes[i] - off : CHUNK;

                        STRATA_TRY(read_all(fd, buf, n, path));
                        if (off == 0 && memcmp(buf, mem[i], sizeof(struct strata__rl_head)))
                                return strata__fail(STRATA_EINVAL, "rl agent: %s: block %d is "
                                                    "of another kind or configuration", path, i);
                        crc = strata__crc32(crc, buf, n);
                }
                if (crc != h->crc[i])
                        return strata__fail(STRATA_EFORMAT, "rl agent: %s: block %d is "
                                            "damaged (CRC)", path, i);
        }
        if (read(fd, &extra, 1) != 0)
                return strata__fail(STRATA_EFORMAT, "rl agent: %s has bytes past its blocks",
                                    path);
        return STRATA_OK;
}

static int load_blocks(struct strata_rl_agent *ag, int fd, const char *path)
{
        void *mem[NBLOCKS];
        size_t bytes[NBLOCKS];

        if (lseek(fd, (off_t)sizeof(struct state_head), SEEK_SET) < 0)
                return strata__fail(STRATA_EIO, "rl agent: seeking in %s: %s", path,
                                    strerror(errno));
        blocks(ag, mem, bytes);
        for (int i = 0; i < NBLOCKS; i++)
                STRATA_TRY(read_all(fd, mem[i], bytes[i], path));
        return STRATA_OK;
}

int strata_rl_load(struct strata_rl_agent *ag, const char *prefix)
{
        char path[STRATA__OUT_PATH];
        struct state_head h;
        int fd, rc;

        STRATA_TRY(live(ag));
        STRATA_TRY(path_of(path, prefix, "rl.state"));
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return strata__fail(STRATA_EIO, "rl agent: opening %s: %s", path,
                                    strerror(errno));
        if ((rc = read_all(fd, &h, sizeof(h), path)) == STRATA_OK &&
            (rc = check_head(ag, &h, path)) == STRATA_OK &&
            (rc = check_blocks(ag, fd, &h, path)) == STRATA_OK &&
            (rc = models(ag, prefix, 1)) == STRATA_OK)
                rc = load_blocks(ag, fd, path);
        close(fd);
        return rc;
}
