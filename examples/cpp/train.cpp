// Strata from C++: train the small MLP on synthetic data with ddp on 2 devices and check that
// the loss falls. Built and run by `make test` (tests/build/examples.c) with
// g++ -std=c++17 -Wall -Wextra -Werror against the installed headers and pkg-config.
#include <cstdio>
#include <cstdint>

#include <strata/strata.h>

static unsigned char data_mem[1 << 20];

int main()
{
        strata_arena data;
        strata_dataset ds;
        strata_loader loader;
        std::uint32_t idx[1024];

        if (strata_arena_init(&data, data_mem, sizeof data_mem, nullptr) != STRATA_OK ||
            strata_dataset_synthetic(&ds, &data, 1024, 20, 4, 5) != STRATA_OK ||
            strata_loader_init(&loader, &data, &ds, 64, 1) != STRATA_OK) {
                std::fprintf(stderr, "data: %s\n", strata_last_error());
                return 1;
        }
        for (std::uint32_t i = 0; i < 1024; i++)
                idx[i] = i;

        strata_module mods[3] = {};
        mods[0].ops = &strata_linear;
        mods[0].out = 32;
        mods[1].ops = &strata_relu;
        mods[2].ops = &strata_linear;
        mods[2].out = 4;
        strata_model model = {};
        model.in_features = 20;
        model.nmodules = 3;
        model.modules = mods;

        strata_config cfg;
        strata_config_init(&cfg); // the defaults of STRATA_CONFIG_INIT, without C++ warnings
        cfg.model = &model;
        cfg.batch = 64;
        cfg.classes = 4;
        cfg.strategy.kind = STRATA_STRATEGY_DDP;
        cfg.strategy.devices = 2;

        strata_runtime *rt = nullptr;
        if (strata_init(&rt, &cfg) != STRATA_OK || strata_connect(rt) != STRATA_OK) {
                std::fprintf(stderr, "init: %s\n", strata_last_error());
                return 1;
        }
        double first = 0.0, last = 0.0;
        for (int epoch = 0; epoch < 5; epoch++) {
                strata_batch b;
                strata_metrics m;
                double sum = 0.0;
                int n = 0;

                strata_loader_reset(&loader, idx, 1024);
                while (strata_loader_next(&loader, &b) > 0) {
                        if (strata_train_step(rt, &b, &m) != STRATA_OK) {
                                std::fprintf(stderr, "step: %s\n", strata_last_error());
                                return 1;
                        }
                        sum += m.loss;
                        n++;
                }
                last = sum / n;
                if (epoch == 0)
                        first = last;
                std::printf("epoch %d loss %.4f\n", epoch + 1, last);
        }
        if (strata_teardown(rt) != STRATA_OK)
                return 1;
        std::printf(last < first ? "ok: the loss fell\n" : "the loss did not fall\n");
        return last < first ? 0 : 1;
}
