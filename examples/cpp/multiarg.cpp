// Strata from C++: a model with two inputs and two outputs (TorchFort's multi-argument
// training), described in C++ rather than in a model line. Input a (6 values) and input b
// (2 values) each go through a Linear; their outputs are added and two heads learn
// u = A a + B b (3 values, MSE) and v = a . b (1 value, L1, weight 0.25). A sample's row is
// a's values then b's; a row of targets is u then v. ddp on 2 devices; predictions come back
// as u then v per row. Built and run by `make test` (tests/build/examples.sh).
#include <cmath>
#include <cstdio>
#include <vector>

#include <strata/strata.h>

static const int NA = 6, NB = 2, IN = NA + NB, NU = 3, NV = 1, T = NU + NV, N = 1024;

int main()
{
        std::vector<float> x((size_t)N * IN), t((size_t)N * T);

        for (int s = 0; s < N; s++) {
                float *r = &x[(size_t)s * IN], *o = &t[(size_t)s * T];

                for (int i = 0; i < IN; i++)
                        r[i] = (float)std::sin(0.71 * s + 1.9 * i);
                for (int k = 0; k < NU; k++) {
                        double u = 0.0;
                        for (int i = 0; i < IN; i++)
                                u += std::cos(1.0 + k * IN + i) * r[i];
                        o[k] = (float)u;
                }
                o[NU] = r[0] * r[NA] + r[1] * r[NA + 1];
        }
        strata_module mods[7] = {};
        mods[0].ops = &strata_linear; // 0: input 0 (a)
        mods[0].out = 32;
        mods[1].ops = &strata_linear; // 1: input 1 (b), a branch
        mods[1].out = 32;
        mods[1].from = -2;
        mods[1].branch = 1;
        mods[2].ops = &strata_add;    // 2: the two branches, summed
        mods[2].from = 0;
        mods[3].ops = &strata_tanh;   // 3
        mods[4].ops = &strata_linear; // 4: head u (output 0)
        mods[4].out = NU;
        mods[5].ops = &strata_linear; // 5: off the trunk (module 3)
        mods[5].out = 16;
        mods[5].from = 3;
        mods[5].branch = 1;
        mods[6].ops = &strata_linear; // 6: head v (output 1)
        mods[6].out = NV;
        strata_model model = {};
        model.in_features = IN;
        model.nmodules = 7;
        model.modules = mods;
        model.ninputs = 2;
        model.inputs[0].features = NA;
        model.inputs[1].features = NB;
        model.noutputs = 2;
        model.outputs[0].module = 4;
        model.outputs[0].loss = &strata_mse;
        model.outputs[1].module = 6;
        model.outputs[1].loss = &strata_l1;
        model.outputs[1].weight = 0.25f;

        strata_config cfg;
        strata_config_init(&cfg);
        cfg.model = &model;
        cfg.batch = 32;
        cfg.classes = T;
        cfg.optim.kind = STRATA_OPTIM_ADAMW;
        cfg.optim.lr = 0.01f;
        cfg.strategy.kind = STRATA_STRATEGY_DDP;
        cfg.strategy.devices = 2;

        strata_runtime *rt = nullptr;
        if (strata_init(&rt, &cfg) != STRATA_OK || strata_connect(rt) != STRATA_OK) {
                std::fprintf(stderr, "init: %s\n", strata_last_error());
                return 1;
        }
        double first = 0.0, last = 0.0;
        for (int epoch = 0; epoch < 10; epoch++) {
                double sum = 0.0;
                for (int s = 0; s < N; s += 32) {
                        strata_batch b = {};
                        strata_metrics m;
                        b.x = &x[(size_t)s * IN];
                        b.t = &t[(size_t)s * T];
                        b.tdim = T;
                        b.rows = 32;
                        b.dim = IN;
                        if (strata_train_step(rt, &b, &m) != STRATA_OK) {
                                std::fprintf(stderr, "step: %s\n", strata_last_error());
                                return 1;
                        }
                        sum += m.loss;
                }
                last = sum / (N / 32);
                if (epoch == 0)
                        first = last;
        }
        float pred[32 * T];
        strata_batch b = {};
        b.x = x.data();
        b.rows = 32;
        b.dim = IN;
        if (strata_predict_step(rt, &b, pred, 32 * T) != STRATA_OK || strata_teardown(rt)) {
                std::fprintf(stderr, "predict: %s\n", strata_last_error());
                return 1;
        }
        std::printf("loss (MSE of u + 0.25 L1 of v) %.4f in the first epoch, %.4f in the "
                    "tenth; row 0: u %.3f (target %.3f), v %.3f (target %.3f)\n", first, last,
                    pred[0], t[0], pred[NU], t[NU]);
        return last < 0.5 * first ? 0 : 1;
}
