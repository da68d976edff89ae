/*
 * The options of strata-train that the library does not see but every process of a job must
 * share, because they decide how many steps each takes or when it stops (issue 58, item 3):
 * a process given other --epochs would wait for a step the others never take. Compared right
 * after connect, with the runtime's own collectives (a maximum and a minimum over every
 * device), so every process refuses alike, naming the option and both values.
 */
#include <stdio.h>
#include <string.h>

#include "tools/train/train.h"

/* The options compared, and their values in this process. */
struct shared_opt {
        const char *name;
        double v;
};

/* MULTISTEP's milestones, weighed by their place: the library's fingerprint has no array. */
static uint64_t milestones(const struct strata_optim *o)
{
        uint64_t sum = 0;

        for (int i = 0; i < STRATA_LR_MILESTONES; i++)
                sum += o->milestones[i] * (uint64_t)(i + 1);
        return sum;
}

static int shared_opts(const struct run *r, struct shared_opt *s)
{
        const struct opts *o = &r->o;
        int n = 0;

        s[n++] = (struct shared_opt){ "--epochs", o->epochs };
        s[n++] = (struct shared_opt){ "steps an epoch (training samples / --batch)",
                                      (double)r->steps_per_epoch };
        s[n++] = (struct shared_opt){ "--max-steps", (double)o->max_steps };
        s[n++] = (struct shared_opt){ "--max-time", o->max_time };
        s[n++] = (struct shared_opt){ "--val-every-n-steps", (double)o->val_every };
        s[n++] = (struct shared_opt){ "--early-stop", (double)o->patience };
        s[n++] = (struct shared_opt){ "--save-top-k", (double)o->top_k };
        s[n++] = (struct shared_opt){ "--ckpt-every-steps", (double)o->ckpt_every };
        s[n++] = (struct shared_opt){ "--drop-last", o->drop_last };
        s[n++] = (struct shared_opt){ "--shuffle off", o->no_shuffle };
        s[n++] = (struct shared_opt){ "--lr-schedule multistep's milestones (their sum)",
                                      (double)milestones(&r->cfg.optim) };
        s[n++] = (struct shared_opt){ "--val-fraction", o->val_fraction };
        s[n++] = (struct shared_opt){ "--limit-val-batches (given)", o->limit_val_set };
        s[n++] = (struct shared_opt){ "--limit-val-batches", o->limit_val };
        s[n++] = (struct shared_opt){ "--lr-schedule plateau", r->plateau_on };
        s[n++] = (struct shared_opt){ "--lr-schedule plateau's patience", r->plateau.patience };
        s[n++] = (struct shared_opt){ "--lr-schedule plateau's factor", r->plateau.factor };
        s[n++] = (struct shared_opt){ "--lr-schedule plateau's floor", r->plateau.min_lr };
        return n;
}

#define MAX_SHARED 24

/**
 * @brief Every process of the job has the same step-deciding options: 0, or 2 after the
 *        message, on every process alike (one process's runtime can hold several devices:
 *        each gives its process's values).
 */
int agree_options(struct run *r)
{
        static double hi[STRATA_MAX_DEVICES][MAX_SHARED], lo[STRATA_MAX_DEVICES][MAX_SHARED];
        void *bh[STRATA_MAX_DEVICES], *bl[STRATA_MAX_DEVICES];
        struct shared_opt s[MAX_SHARED];
        int n = shared_opts(r, s), local = r->o.devices > 0 ? r->o.devices : 1;

        if (strata_world_size(r->rt) == local)
                return 0; /* one process */
        for (int d = 0; d < local && d < STRATA_MAX_DEVICES; d++) {
                for (int i = 0; i < n; i++)
                        hi[d][i] = lo[d][i] = s[i].v;
                bh[d] = hi[d];
                bl[d] = lo[d];
        }
        if (strata_reduce(r->rt, bh, (size_t)n, STRATA_F64, STRATA_OP_MAX) ||
            strata_reduce(r->rt, bl, (size_t)n, STRATA_F64, STRATA_OP_MIN))
                return bad("%s", strata_last_error());
        for (int i = 0; i < n; i++)
                if (hi[0][i] != lo[0][i])
                        return bad("the processes are configured differently: %s is %g in some "
                                   "and %g in others, %g in this one (every process must be "
                                   "given the same options)", s[i].name, lo[0][i], hi[0][i],
                                   s[i].v);
        return 0;
}
