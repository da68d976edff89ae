// Strata from C++ on the application's own arrays: learn y = A x (a fixed 8 -> 3 linear map)
// from f64 inputs and targets held in std::vector, with MSE on 2 devices (ddp), then predict
// one sample at a time (batch 1) into the caller's array. Built and run by `make test`
// (tests/build/examples.sh) against the installed headers and pkg-config.
#include <cmath>
#include <cstdio>
#include <vector>

#include <strata/strata.h>

static const int IN = 8, OUT = 3, N = 512;

// The map the model must learn: a fixed matrix, so the test knows the answer.
static double target(int o, const double *x)
{
        double s = 0.0;

        for (int i = 0; i < IN; i++)
                s += std::sin(1.0 + o * IN + i) * x[i];
        return s;
}

// Mean squared error of batch-1 predictions over the first @p n samples.
static double predict_mse(strata_runtime *rt, const std::vector<double> &x,
                          const std::vector<double> &t, int n)
{
        double se = 0.0;
        float out[OUT];

        for (int s = 0; s < n; s++) {
                strata_batch b = {};
                b.x = &x[(size_t)s * IN];
                b.xtype = STRATA_F64;
                b.rows = 1;
                b.dim = IN;
                if (strata_predict_step(rt, &b, out, OUT) != STRATA_OK) {
                        std::fprintf(stderr, "predict: %s\n", strata_last_error());
                        return INFINITY;
                }
                for (int o = 0; o < OUT; o++)
                        se += (out[o] - t[(size_t)s * OUT + o]) * (out[o] - t[(size_t)s * OUT + o]);
        }
        return se / (n * OUT);
}

int main()
{
        std::vector<double> x((size_t)N * IN), t((size_t)N * OUT);

        for (int s = 0; s < N; s++) {
                for (int i = 0; i < IN; i++)
                        x[(size_t)s * IN + i] = std::cos(0.37 * s + 1.3 * i);
                for (int o = 0; o < OUT; o++)
                        t[(size_t)s * OUT + o] = target(o, &x[(size_t)s * IN]);
        }
        strata_module mods[1] = {};
        mods[0].ops = &strata_linear;
        mods[0].out = OUT;
        strata_model model = {};
        model.in_features = IN;
        model.nmodules = 1;
        model.modules = mods;
        model.loss = &strata_mse;

        strata_config cfg;
        strata_config_init(&cfg);
        cfg.model = &model;
        cfg.batch = 32;
        cfg.classes = OUT;
        cfg.optim.kind = STRATA_OPTIM_ADAMW;
        cfg.optim.lr = 0.05f;
        cfg.strategy.kind = STRATA_STRATEGY_DDP;
        cfg.strategy.devices = 2;

        strata_runtime *rt = nullptr;
        if (strata_init(&rt, &cfg) != STRATA_OK || strata_connect(rt) != STRATA_OK) {
                std::fprintf(stderr, "init: %s\n", strata_last_error());
                return 1;
        }
        double before = predict_mse(rt, x, t, 64);
        for (int epoch = 0; epoch < 20; epoch++)
                for (int s = 0; s < N; s += 32) {
                        strata_batch b = {};
                        strata_metrics m;
                        b.x = &x[(size_t)s * IN];
                        b.xtype = STRATA_F64;
                        b.t = &t[(size_t)s * OUT];
                        b.ttype = STRATA_F64;
                        b.tdim = OUT;
                        b.rows = 32;
                        b.dim = IN;
                        if (strata_train_step(rt, &b, &m) != STRATA_OK) {
                                std::fprintf(stderr, "step: %s\n", strata_last_error());
                                return 1;
                        }
                }
        double after = predict_mse(rt, x, t, 64);
        if (strata_teardown(rt) != STRATA_OK)
                return 1;
        std::printf("batch-1 prediction MSE %.3g before training, %.3g after\n", before, after);
        // Untrained, the MSE is of the targets' size (~1); learnt, a linear map is exact.
        return before > 0.1 && after < 1e-3 ? 0 : 1;
}
