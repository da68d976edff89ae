/*
 * strata-train's runtime: the model and the configuration from the options, the plan checked
 * against the memory beside the data, the checks that would only fail late, and the runtime
 * started and connected.
 */
#include <stdio.h>
#include <string.h>

#include "arch/simd.h"
#include "kernel/topology.h"
#include "tools/train/train.h"

/* The model: hidden linear [bn] [activation] [dropout], then the output linear. */
static void build_model(struct run *r)
{
        struct strata_module *m = r->mods;
        int nm = 0;

        if (r->layered) { /* the line's modules and input, the options' loss */
                r->model.loss = r->o.loss;
                r->model.loss_beta = r->o.huber_beta;
                return;
        }
        for (int i = 1; i < r->nw; i++) {
                m[nm++] = (struct strata_module){ .ops = &strata_linear, .out = r->widths[i] };
                if (i == r->nw - 1)
                        break;
                if (r->o.bn)
                        m[nm++] = (struct strata_module){ .ops = &strata_batchnorm1d };
                if (r->o.activation)
                        m[nm++] = (struct strata_module){ .ops = r->o.activation };
                if (r->o.dropout > 0.0f)
                        m[nm++] = (struct strata_module){ .ops = &strata_dropout,
                                                          .p = r->o.dropout };
        }
        r->model = (struct strata_model){ .in_features = r->widths[0], .nmodules = nm,
                                          .modules = m, .loss = r->o.loss,
                                          .loss_beta = r->o.huber_beta };
}

/* The trace of a process other than the job's first goes beside it: FILE.<rank>. */
static const char *trace_path(struct run *r)
{
        if (!r->o.trace)
                return NULL;
        if (r->rank <= 0)
                return r->o.trace;
        snprintf(r->tpath, sizeof(r->tpath), "%s.%d", r->o.trace, r->rank);
        return r->tpath;
}

/* The runtime's configuration: the options, field by field. */
static void fill_config(struct run *r)
{
        const struct opts *o = &r->o;
        struct strata_config *cfg = &r->cfg;

        *cfg = (struct strata_config)STRATA_CONFIG_INIT;
        cfg->model = &r->model;
        cfg->batch = o->batch;
        cfg->classes = r->widths[r->nw - 1];
        cfg->strategy.devices = o->devices;
        cfg->strategy.kind = o->strategy;
        cfg->device.accelerator = o->accel;
        cfg->precision.allow_tf32 = o->tf32;
        cfg->seed = o->seed;
        cfg->verbose = o->verbose;
        cfg->optim.kind = o->optim;
        cfg->optim.lr = o->lr;
        cfg->optim.momentum = o->optim == STRATA_OPTIM_SGD ? o->momentum : 0.0f;
        cfg->optim.weight_decay = o->wd;
        if (o->optim == STRATA_OPTIM_ADAMW) {
                cfg->optim.beta1 = o->beta1;
                cfg->optim.beta2 = o->beta2;
        }
        cfg->strategy.sync_bn = o->sync_bn;
        cfg->train.accumulate = o->accumulate;
        cfg->train.accumulate_reduce = o->accumulate_reduce;
        cfg->train.clip_norm = o->clip_norm;
        cfg->train.clip_value = o->clip_value;
        cfg->trace.path = trace_path(r);
        cfg->device.bind = o->bind;
        cfg->train.allow_nonfinite = o->allow_nonfinite;
        cfg->precision.kind = o->precision;
        cfg->strategy.grad_allreduce = o->grad_allreduce;
        cfg->trace.events = (size_t)o->trace_events;
        cfg->trace.stall_s = o->stall_s;
        cfg->device.timeout_s = o->timeout_s;
        cfg->process.mpi_allreduce = o->mpi_allreduce;
        cfg->strategy.invariant = o->invariant;
        cfg->strategy.chunks = o->chunks;
        cfg->device.kernels = o->kernels;
        cfg->device.no_fusion = o->no_fusion;
        /* --predict, and --evaluate where it can: no training state planned (decision 0070) */
        cfg->inference_only = o->predict != NULL ||
                              (o->evaluate && o->strategy == STRATA_STRATEGY_SINGLE &&
                               o->precision == STRATA_PRECISION_32 && !o->invariant);
        if (o->strategy == STRATA_STRATEGY_DP && o->sync_bn)
                strata_patch_replication_callback(cfg);
}

/* The runtime's plan must fit beside the data, under the same memory limit. */
static int check_plan(struct run *r)
{
        struct strata_plan_info plan;

        if (strata_plan(&r->cfg, &plan))
                return bad("%s", strata_last_error());
        if (plan.bytes > r->mem_limit - r->data_bytes)
                return bad("this configuration needs %zu bytes beside the data; %s", plan.bytes,
                           r->why);
        return 0;
}

/* --verbose: the machine, the core each device will run on, how gradients are summed. */
static void show_placement(const struct strata_config *cfg, int devices)
{
        struct strata__topology topo;
        struct strata__placement pl[64];
        char line[128];

        if (cfg->process.mpi_allreduce)
                fprintf(stderr, "strata: gradients summed by MPI_Allreduce (Open MPI's order, "
                                "not bitwise reproducible)\n");
        if (strata__topology_read(&topo) != STRATA_OK ||
            strata__topology_place(devices, pl) != STRATA_OK)
                return;
        fprintf(stderr, "strata: machine: %d package(s), %d NUMA node(s), %d core(s), %d "
                        "PU(s); SIMD %s\n",
                topo.packages, topo.numa_nodes, topo.cores, topo.pus, strata__simd_isa());
        fprintf(stderr, "strata: kernels %s\n",
                strata_kernel_set(cfg->device.kernels, STRATA_F32) ?
                        strata_kernel_set(cfg->device.kernels, STRATA_F32) : "refused on this CPU");
        for (int d = 0; d < devices; d++) {
                strata__placement_describe(&pl[d], line, sizeof(line));
                fprintf(stderr, "strata: %s\n", line);
        }
}

/*
 * Batches per epoch, the last partial one included unless --drop-last (decision 0059), and
 * what would only fail late: an accumulation window that outlasts an epoch (the optimizer
 * would step across epoch ends, or never). A last batch of fewer rows than devices trains and
 * evaluates: the devices past its rows take part with none.
 */
static int check_steps(struct run *r)
{
        const struct opts *o = &r->o;
        uint32_t batch = (uint32_t)o->batch;

        r->steps_per_epoch = (long)(o->drop_last ? r->train.n / batch
                                                 : (r->train.n + batch - 1) / batch);
        if (r->steps_per_epoch == 0)
                return bad("--batch %d is larger than the %u training samples and --drop-last "
                           "drops them all", o->batch, r->train.n);
        if (o->accumulate > r->steps_per_epoch)
                return bad("--accumulate %d is longer than an epoch's %ld batches: use at most "
                           "that many", o->accumulate, r->steps_per_epoch);
        return 0;
}

/* multistep:M1,M2,...:GAMMA's milestones into @p opt (strictly ascending, checked later). */
static int set_milestones(const char *s, struct strata_optim *opt)
{
        const char *p = s + strlen("multistep:"), *colon = strrchr(s, ':');
        unsigned long long m;
        int n = 0, used;
        char tail;

        if (colon <= p || sscanf(colon + 1, "%f%c", &opt->gamma, &tail) != 1)
                return -1;
        while (p < colon) {
                if (n == STRATA_LR_MILESTONES || sscanf(p, "%llu%n", &m, &used) != 1 || !m ||
                    (p[used] != ',' && p + used != colon))
                        return -1;
                opt->milestones[n++] = m;
                p += used + (p + used != colon);
        }
        opt->schedule = STRATA_LR_MULTISTEP;
        return 0;
}

/* plateau[:PATIENCE[:FACTOR[:MIN]]]: ReduceLROnPlateau on --monitor, at every epoch's end. */
static int set_plateau(struct run *r, const char *s)
{
        struct strata_plateau *p = &r->plateau;
        long patience = p->patience;
        char tail;
        int n;

        if (strcmp(s, "plateau") &&
            ((n = sscanf(s, "plateau:%ld:%f:%f%c", &patience, &p->factor, &p->min_lr,
                         &tail)) < 1 || n > 3))
                return -1;
        p->patience = (int)patience;
        p->mode_max = trainer_larger(r);
        if (patience < 0 || patience > 1L << 20 || strata_plateau_start(p, r->cfg.optim.lr))
                return bad("--lr-schedule %s: %s", s, patience < 0 || patience > 1L << 20 ?
                           "patience not in [0, 1048576]" : strata_last_error());
        r->plateau_on = 1;
        return 0;
}

/*
 * --lr-schedule and --warmup into the optimizer; cosine and onecycle anneal over the run's
 * optimizer steps after the warm-up (an epoch's last, partial accumulation window is a step
 * too); plateau is kept by the tool (r->plateau) and applied between epochs. Returns 2 (with
 * a message) on a bad specification.
 */
static int set_schedule(struct run *r)
{
        const struct opts *o = &r->o;
        struct strata_optim *opt = &r->cfg.optim;
        const char *s = o->schedule ? o->schedule : "constant";
        long total = (r->steps_per_epoch + o->accumulate - 1) / o->accumulate * o->epochs;
        unsigned long long n;
        char tail;
        float x;
        int rc;

        opt->warmup = (uint64_t)o->warmup;
        r->plateau = (struct strata_plateau)STRATA_PLATEAU_INIT;
        r->plateau_on = 0;
        if (!strcmp(s, "constant"))
                return 0;
        if (sscanf(s, "step:%llu:%f%c", &n, &x, &tail) == 2) {
                opt->schedule = STRATA_LR_STEP;
                opt->step_size = n;
                opt->gamma = x;
        } else if (!strcmp(s, "cosine") || sscanf(s, "cosine:%f%c", &x, &tail) == 1) {
                opt->schedule = STRATA_LR_COSINE;
                opt->lr_min = strcmp(s, "cosine") ? x : 0.0f;
                opt->t_max = total > o->warmup ? (uint64_t)(total - o->warmup) : 1;
        } else if (!strcmp(s, "onecycle") || sscanf(s, "onecycle:%f%c", &x, &tail) == 1) {
                opt->schedule = STRATA_LR_ONECYCLE;
                opt->pct_start = strcmp(s, "onecycle") ? x : 0.0f;
                opt->t_max = total > o->warmup ? (uint64_t)(total - o->warmup) : 1;
        } else if (!strncmp(s, "multistep:", 10)) {
                if (set_milestones(s, opt))
                        return bad("--lr-schedule: '%s' is not multistep:M1,M2,...:GAMMA (at "
                                   "most %d milestones, optimizer steps > 0)", s,
                                   STRATA_LR_MILESTONES);
        } else if (!strncmp(s, "plateau", 7) && (rc = set_plateau(r, s)) >= 0) {
                return rc;
        } else {
                return bad("--lr-schedule: '%s' is not constant, step:N:GAMMA, cosine[:MIN], "
                           "multistep:M1,M2,...:GAMMA, onecycle[:PCT] or "
                           "plateau[:PATIENCE[:FACTOR[:MIN]]]", s);
        }
        if (strata_optim_check(opt))
                return bad("--lr-schedule: %s", strata_last_error());
        return 0;
}

/*
 * zero1, zero2 and fsdp over several processes save together: every process calls the save
 * (and fsdp's export: its parameters are sharded; zero's other processes write nothing).
 */
static int saves_together(const struct run *r)
{
        return (r->o.strategy == STRATA_STRATEGY_ZERO1 || r->o.strategy == STRATA_STRATEGY_ZERO2 ||
                r->o.strategy == STRATA_STRATEGY_FSDP) &&
               strata_world_size(r->rt) > r->o.devices;
}

/**
 * @brief The model and the runtime's configuration from the options (nothing started), with
 *        the checks that need no memory. 0, or 2 after the message.
 */
int config_fill(struct run *r)
{
        build_model(r);
        fill_config(r);
        if (r->o.mpi_allreduce && r->o.strategy != STRATA_STRATEGY_MPI)
                return bad("--mpi-allreduce: gradients go through MPI only under --strategy "
                           "mpi");
        return 0;
}

/**
 * @brief What training refuses before it starts, --plan too (issue 58, item 10): batches per
 *        epoch against the data and the accumulation, the schedule. 0, or 2 after the message.
 */
int config_check(struct run *r)
{
        return check_steps(r) || trial_limit_train(r) || set_schedule(r) ? 2 : 0;
}

/**
 * @brief The model and the configuration from the options, checked (plan, steps, schedule);
 *        then the runtime started and connected. Only the job's first process keeps a voice.
 */
int config_start(struct run *r)
{
        if (config_fill(r) || check_plan(r))
                return 2;
        if (r->o.verbose)
                show_placement(&r->cfg, r->o.devices);
        if (config_check(r))
                return 2;
        if (strata_init(&r->rt, &r->cfg) || strata_connect(r->rt))
                return bad("%s", strata_last_error());
        if (agree_options(r)) {
                strata_teardown(r->rt);
                r->rt = NULL;
                return 2;
        }
        if (!strata_is_global_zero(r->rt)) { /* one voice per job: global rank 0's */
                r->o.quiet = 1;
                r->o.json = 0;
                r->o.metrics_csv = NULL;
                r->o.tensorboard = NULL;
                if (!saves_together(r)) {
                        r->o.ckpt_dir = NULL;
                        r->o.export_st = NULL;
                }
        }
        return 0;
}
