// LibTorch peer of tools/strata-bench-latency.c: the latency of one forward of a TorchScript
// module (tools/peers/torch_latency.py --script wrote it: the same model and weights as
// Strata's), on one thread, under c10::InferenceMode, each call timed alone after a warm-up.
//
//   libtorch_latency MODEL.pt BATCH ITERS WARMUP DIM...   (DIM...: a sample's shape)
//
// Built by tools/bench-latency.sh against Debian's libtorch-dev:
//   g++ -O2 -std=c++17 libtorch_latency.cpp -I/usr/include/torch/csrc/api/include \
//           -ltorch -ltorch_cpu -lc10
// Prints one JSON line: batch, us_median, us_p10, us_p90.
#include <ATen/Parallel.h>
#include <torch/script.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char **argv)
{
        if (argc < 6) {
                std::fprintf(stderr,
                             "usage: libtorch_latency MODEL.pt BATCH ITERS WARMUP DIM...\n");
                return 2;
        }
        const long batch = std::atol(argv[2]), iters = std::atol(argv[3]),
                   warmup = std::atol(argv[4]);
        std::vector<int64_t> shape{ batch };
        for (int i = 5; i < argc; i++)
                shape.push_back(std::atol(argv[i]));
        at::set_num_threads(1);
        at::set_num_interop_threads(1);
        torch::jit::script::Module m = torch::jit::load(argv[1]);
        m.eval();
        c10::InferenceMode guard;
        std::vector<torch::jit::IValue> in{ torch::rand(shape) - 0.5 };
        std::vector<double> t;
        for (long i = 0; i < warmup + iters; i++) {
                auto t0 = std::chrono::steady_clock::now();
                m.forward(in);
                auto t1 = std::chrono::steady_clock::now();
                if (i >= warmup)
                        t.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        }
        std::sort(t.begin(), t.end());
        std::printf("{\"batch\":%ld,\"us_median\":%.3f,\"us_p10\":%.3f,\"us_p90\":%.3f}\n",
                    batch, t[t.size() / 2], t[t.size() / 10], t[t.size() * 9 / 10]);
        return 0;
}
