/*
 * strata-train --help (every option, what it does, and its default), the one shape of every
 * usage error (exit status 2) and the number parsers every option file shares.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/train/train.h"

/** @brief The help text into @p f. */
void usage(FILE *f)
{
        fprintf(f,
                "usage: strata-train [options]\n"
                "  --data DIR          Fashion-MNIST IDX files (default " DEFAULT_DATA ")\n"
                "  --synthetic N       N synthetic samples (and 10000 test ones) instead,\n"
                "                      shaped by --model: its input width, its output's\n"
                "                      classes (2..256); a line without input(...) takes\n"
                "                      Fashion-MNIST's 1x28x28\n"
                "  --synthetic-regression N  N synthetic rows of float targets instead (and\n"
                "                      2000 test rows): t = tanh(xW) + 0.1 sin(3xW), W fixed\n"
                "  --loss L            ce (default), mse, l1, huber or bce (float targets in\n"
                "                      [0, 1]). Each epoch evaluates the loss on the evaluation\n"
                "                      set and the metric that fits it: accuracy (ce; bce: of\n"
                "                      the probabilities at 0.5), MSE and MAE (mse, l1, huber;\n"
                "                      a model of several outputs: where one takes floats)\n"
                "  --huber-beta B      huber's beta (default 1.0)\n"
                "  --data FILE.h5 --inputs NAME --targets NAME\n"
                "                      train on two datasets of an HDF5 file (inputs f32 or f64;\n"
                "                      the first dimension the sample, the others flattened):\n"
                "                      float targets (regression: --loss mse|l1|huber|bce) or\n"
                "                      integer class labels (ce), one a sample.\n"
                "                      --model defaults to IN-256-128-OUT from the file\n"
                "  --test-data FILE.h5 the same datasets of another file evaluate (test_*)\n"
                "  --val-fraction F    the LAST fraction F of --data's samples evaluate, not\n"
                "                      trained on (val_*); with a test set (Fashion-MNIST's,\n"
                "                      synthetic, --test-data) validation each epoch and the\n"
                "                      test set once at the end; an HDF5 file with neither:\n"
                "                      the training samples evaluate (train_eval_*)\n"
                "  --model SPEC        layer widths, e.g. 784-256-128-10 (default), or a line of\n"
                "                      modules with PyTorch's arguments, e.g. 'conv2d(32,3,\n"
                "                      padding=1) relu maxpool2d(2) flatten linear(10)'; its\n"
                "                      input layout is the images' (1x28x28) or a leading\n"
                "                      input(C,H,W); output(LOSS,weight=W) after a module makes\n"
                "                      it one of several outputs (mse, l1, huber, bce, ce; none:\n"
                "                      --loss), whose float targets row holds each output's\n"
                "                      values in turn, one class index for a ce output.\n"
                "                      Fourier layers (docs/guide.md): spectralconv1d(out,modes)\n"
                "                      on (C,W), spectralconv2d(out,modes1,modes2) on (C,H,W),\n"
                "                      spectralconv3d(out,modes1,modes2,modes3) on (C,D,H,W): out\n"
                "                      channels and the lowest frequencies kept along each dim\n"
                "                      (along W at most W/2+1, along D and H at most half the\n"
                "                      extent), by position or name; no bias. An FNO block:\n"
                "                      'spectralconv2d(8,6,6) conv2d(8,1,from=K) add(from=K+1)\n"
                "                      gelu', K the block input's module.\n"
                "                      Sequences: input(L,E) is L tokens of E features\n"
                "                      (batch_first); mha(heads,causal=0|1) self-attention (heads\n"
                "                      divides E; causal default 0); rmsnorm(eps=X,dims=K) and\n"
                "                      layernorm(eps=X,dims=K) over the last K dims (default 0:\n"
                "                      the whole sample; 1: each token; eps default FLT_EPSILON\n"
                "                      and 1e-5); posembed (a learned [L,E] added) and tokens\n"
                "                      ((C,H,W) to (H*W,C): a patch embedding after\n"
                "                      conv2d(E,P,stride=P)) take no arguments.\n"
                "                      Graphs: input(C,nodes); gather(side=src|dst) (default src)\n"
                "                      to (C,edges) and scatter(reduce=sum|mean) (default sum)\n"
                "                      back to (C,nodes), over the edges of --mesh.\n"
                "                      --bn, --dropout, --activation: widths only\n"
                "  --mesh FILE.h5      a graph model's mesh: dataset edge_index, integers\n"
                "                      [2, edges] (sources, destinations; 0-based), its\n"
                "                      attribute nodes the node count (default: largest + 1)\n"
                "  --bn                BatchNorm1d after each hidden linear\n"
                "  --dropout P         dropout after each hidden activation\n"
                "  --activation A      between the linears: relu (default), tanh, sigmoid, gelu,\n"
                "                      gelu-tanh, silu, leaky-relu (slope 0.01) or none\n"
                "  --epochs N          (default 10)      --batch N   global batch (default 128)\n"
                "  --drop-last         skip each epoch's last, partial batch (default: trained,\n"
                "                      its loss the mean over its rows, as PyTorch's DataLoader)\n"
                "  --lr X              (default 0.05)    --momentum X   (default 0.9)\n"
                "  --optim sgd|adamw   (default sgd)     --weight-decay X (default 0)\n"
                "  --betas B1,B2       AdamW's moment decays (default 0.9,0.999); --momentum\n"
                "                      is SGD's. An option the run ignores is named on stderr\n"
                "  --seed N            (default 0)\n"
                "  --lr-schedule S     constant (default), step:N:GAMMA (decay every N optimizer\n"
                "                      steps), cosine[:MIN] (to MIN over the run),\n"
                "                      multistep:M1,M2,...:GAMMA (decay at those optimizer\n"
                "                      steps), onecycle[:PCT] (--lr the peak, PCT rising,\n"
                "                      default 0.3), plateau[:PATIENCE[:FACTOR[:MIN]]]\n"
                "                      (ReduceLROnPlateau on --monitor at epoch ends;\n"
                "                      defaults 10, 0.1, 0)\n"
                "  --warmup N          linear warm-up over the first N optimizer steps\n"
                "  --fast-dev-run [N]  a quick trial: N batches (default 1) of training and of\n"
                "                      evaluation in one epoch; no file written\n"
                "  --limit-train-batches L, --limit-val-batches L  batches an epoch trains and\n"
                "                      an evaluation takes: a count (10) or a fraction (0.25);\n"
                "                      --limit-val-batches 0 skips evaluations\n"
                "  --tensorboard DIR   TensorBoard event files in DIR (the scalars of\n"
                "                      --metrics-csv: train_loss_step, train_loss_epoch, lr,\n"
                "                      the evaluation's loss and metric)\n"
                "  --raw-pixels        image features = pixel / 255 (default: standardised with\n"
                "                      the training set's mean and std; arrays of an HDF5 file\n"
                "                      and synthetic regression rows are used as they are)\n"
                "  --strategy single|dp|ddp|zero1|zero2|fsdp|spawn|mpi (default ddp) --devices N\n"
                "                      (default: one per core of this process's CPU set, e.g.\n"
                "                      under taskset). zero1: optimizer state sharded over the\n"
                "                      devices; zero2: also each gradient bucket reduced to its\n"
                "                      shards' owners; fsdp: also the parameters, each layer\n"
                "                      gathered before it computes (all bitwise ddp; fsdp: host\n"
                "                      memory). Over the processes of mpirun/srun, or\n"
                "                      --processes P below (one checkpoint, by process 0).\n"
                "                      spawn: N processes of one device each; mpi: under mpirun\n"
                "                      or srun, N devices per process (best one process a node).\n"
                "                      Under a launcher of several processes (mpirun, srun,\n"
                "                      torchrun) the default is mpi; single, dp, ddp and spawn\n"
                "                      are refused there (each process would train alone)\n"
                "  --processes P       zero1, zero2, fsdp: P processes started here, --devices N\n"
                "                      each, sharding over all P x N devices\n"
                "  --precision P       32 (default), bf16-mixed or 16-mixed (GEMM operands bf16 or\n"
                "                      f16, f32 master weights; 16-mixed scales the loss)\n"
                "  --grad-allreduce T  ddp, spawn, mpi: gradients all-reduced in 32 (default) or\n"
                "                      bf16 (half the bytes; rounded before and after the sum)\n"
                "  --mpi-allreduce     mpi: gradients through MPI_Allreduce (faster; its order is\n"
                "                      Open MPI's, so results are not bitwise reproducible)\n"
                "  --invariant         the same bits on any device count: the batch cut into\n"
                "                      fixed chunks summed by one tree; every strategy but dp,\n"
                "                      on 1 to C devices in all\n"
                "  --chunks C          invariant mode's chunks, a power of two (default 8)\n"
                "  --portable          CPU: the AVX2 kernel set, on every x86-64 with AVX2 (every\n"
                "                      set gives the same bits; this one runs everywhere)\n"
                "  --kernels K         CPU kernel set: native (default: the CPU's own ISA),\n"
                "                      portable, avx512 (refused without it) or scalar\n"
                "  --no-fusion         run every module on its own (by default a convolution\n"
                "                      runs the ReLU and pooling after it sample by sample;\n"
                "                      the same bits)\n"
                "  --accelerator cpu|cuda (default cpu; cuda defaults to single, and dp/ddp run\n"
                "                 --devices logical devices over the GPUs, device d on GPU d mod count)\n"
                "  --tf32              CUDA GEMMs may use TF32 tensor cores\n"
                "  --sync-bn           BatchNorm statistics over all devices\n"
                "  --accumulate K      optimizer step every K batches (no_sync before) and at\n"
                "                      an epoch's last batch\n"
                "  --accumulate-reduce window|each  with --accumulate: reduce the window's sum\n"
                "                      once (window, default), or every batch, adding the\n"
                "                      reduced gradients in order (each: other bits, the same\n"
                "                      under every strategy; zero2 and fsdp then keep only\n"
                "                      their shard of the gradients; a layer's buffer more;\n"
                "                      no effect with one batch a step or --invariant)\n"
                "  --clip-norm X       clip gradients to global norm X\n"
                "  --clip-value X      clip gradients to [-X, X]\n"
                "  --ckpt-dir DIR      checkpoint at every epoch end (DIR/epoch-N.ckpt and\n"
                "                      DIR/latest); a DIR holding files is refused without\n"
                "                      --resume or --overwrite\n"
                "  --overwrite         start afresh in a --ckpt-dir that holds another run's\n"
                "                      files (its checkpoints are removed first)\n"
                "  --ckpt-keep K       the latest K checkpoints in DIR stay, earlier runs' too\n"
                "                      (default 3)\n"
                "  --ckpt-every-steps N  also checkpoint every N optimizer steps of the run\n"
                "  --max-steps N       end the run after N optimizer steps, --max-time S after\n"
                "                      S seconds of training: evaluated and checkpointed there\n"
                "  --val-every-n-steps N  also evaluate every N batches inside epochs\n"
                "  --early-stop P      end once --monitor M (default SET_loss of the evaluation\n"
                "                      set; train_loss, SET_acc, SET_mse, SET_mae) has not\n"
                "                      improved for P epochs (acc: larger is better)\n"
                "  --save-top-k K      keep the K best epoch checkpoints of DIR by --monitor\n"
                "                      (DIR/topk lists them) and the latest\n"
                "  --resume PATH       continue from a checkpoint file, DIR's latest or\n"
                "                      DIR/latest itself\n"
                "                      (a finished run prints the result it stored); auto:\n"
                "                      --ckpt-dir's latest if it has one, else a new run\n"
                "  (SIGTERM or SIGUSR1 checkpoint into --ckpt-dir at the next optimizer step\n"
                "   and exit 128+signal; SIGINT stops there with a summary)\n"
                "  --export-safetensors FILE  the final weights for PyTorch (its directory is\n"
                "                      checked before training)\n"
                "  --init-weights FILE start from a safetensors file's weights (PyTorch\n"
                "                      state_dict names, F32/F64/BF16/F16): every tensor must\n"
                "                      fit; --init-weights-partial FILE loads those that do\n"
                "                      and lists the rest (a new head)\n"
                "  --export-initial FILE  the weights before the first step, as safetensors\n"
                "  --shuffle on|off    permute the training set every epoch (default on)\n"
                "  --evaluate FILE     evaluate a checkpoint's or a safetensors file's weights\n"
                "                      on the evaluation set, train nothing\n"
                "                      (with --export-safetensors: also write its weights)\n"
                "  --predict FILE --predictions OUT.h5  a checkpoint's or safetensors file's\n"
                "                      outputs on every evaluation sample, in order, into\n"
                "                      HDF5 (predictions [N, outputs], classes [N]) on an\n"
                "                      inference-only runtime (one device), train nothing\n"
                "  --trace FILE        timeline of every device (Chrome trace JSON: Perfetto,\n"
                "                      chrome://tracing); --trace-events N buffered per device\n"
                "  --metrics-csv FILE  step, epoch, train_loss, lr, samples_per_s rows, then the\n"
                "                      evaluation's columns (SET_loss, SET_acc or SET_mse and\n"
                "                      SET_mae); a model of several outputs adds train_loss_0..\n"
                "                      (each output's) and SET_loss_0... Two kinds of row: a\n"
                "                      step row every --log-every N batches (train_loss: the\n"
                "                      mean since the previous row; evaluation columns empty)\n"
                "                      and an epoch row (train_loss: the epoch's mean;\n"
                "                      evaluation columns filled); strata-plot FILE draws them\n"
                "  --log-every N       a metrics row every N batches (default 50)\n"
                "  --bind cores|none   pin each device thread to a core of this process's CPU\n"
                "                      set (default), or leave placement to the OS\n"
                "  --allow-nonfinite   keep training when the loss becomes NaN or infinite\n"
                "                      (default: stop with an error naming the step)\n"
                "  --timeout S         bound on every wait between devices (default 300)\n"
                "  --stall-report S    report a device waiting S seconds at a collective, and\n"
                "                      where the late devices are (default 60; 0: never)\n"
                "  --json              one JSON object per epoch and a final one\n"
                "  --plan              print the memory plan (each device, the runtime's and the\n"
                "                      data's arenas, the total, whether this machine holds it)\n"
                "                      and exit without training; with --json as one object\n"
                "  --quiet             nothing on stdout but what --json asks for (errors and\n"
                "                      warnings stay on stderr)\n"
                "  --verbose           placement, memory\n"
                "  --version           the tool's and the library's versions\n"
                "  --help\n"
                "A progress bar on a terminal (not under a launcher); plain lines otherwise.\n");
}

/* A spawned process other than the job's first: its usage errors are the first's too. */
static int silent;

/**
 * @brief A usage error: "strata-train: ", the message and a newline on stderr, in one write
 *        (processes sharing stderr do not interleave); exit status 2.
 */
int bad(const char *fmt, ...)
{
        char msg[2048];
        va_list ap;
        int k = snprintf(msg, sizeof(msg), "strata-train: ");

        va_start(ap, fmt);
        vsnprintf(msg + k, sizeof(msg) - (size_t)k - 1, fmt, ap);
        va_end(ap);
        strcat(msg, "\n");
        if (!silent)
                fputs(msg, stderr);
        return 2;
}

/**
 * @brief From now on bad() prints nothing: in the processes of a job but its first, which
 *        meets the same usage error at the same point and says it once for the job.
 */
void bad_silent(void)
{
        silent = 1;
}

/** @brief An integer option in [lo, hi]: 0, or 2 after the message. */
int parse_long_option(const char *name, const char *s, long lo, long hi, long *out)
{
        char *end;
        long v;

        errno = 0;
        v = strtol(s, &end, 10);
        if (errno || end == s || *end || v < lo || v > hi)
                return bad("--%s: '%s' is not an integer in [%ld, %ld]", name, s, lo, hi);
        *out = v;
        return 0;
}

/** @brief A number option in [lo, hi]: 0, or 2 after the message. */
int parse_float_option(const char *name, const char *s, double lo, double hi, float *out)
{
        char *end;
        double v;

        errno = 0;
        v = strtod(s, &end);
        if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi)
                return bad("--%s: '%s' is not a number in [%g, %g]", name, s, lo, hi);
        *out = (float)v;
        return 0;
}
