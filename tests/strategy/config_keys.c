/* The configuration by name (strata_config_set): fields set, bad keys and values refused. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "strata/strata.h"

Test(config_keys, fields_are_set_by_name)
{
        struct strata_config c;

        strata_config_init(&c);
        cr_assert_eq(strata_config_set(&c, "devices", 3), STRATA_OK);
        cr_assert_eq(strata_config_set(&c, "strategy", STRATA_STRATEGY_DDP), STRATA_OK);
        cr_assert_eq(strata_config_set(&c, "optim.lr", 0.25), STRATA_OK);
        cr_assert_eq(strata_config_set(&c, "optim.warmup", 100), STRATA_OK);
        cr_assert_eq(strata_config_set(&c, "timeout_s", 2.5), STRATA_OK);
        cr_assert_eq(strata_config_set(&c, "bucket_bytes", 1 << 20), STRATA_OK);
        cr_assert_eq(c.strategy.devices, 3);
        cr_assert_eq(c.strategy.kind, STRATA_STRATEGY_DDP);
        cr_assert_eq(c.optim.lr, 0.25f);
        cr_assert_eq(c.optim.warmup, 100);
        cr_assert_eq(c.device.timeout_s, 2.5);
        cr_assert_eq(c.strategy.bucket_bytes, (size_t)1 << 20);
        cr_assert_eq(strata_config_bytes(), sizeof(struct strata_config));
        cr_assert_eq(strata_module_ops_by_name("relu"), &strata_relu);
        cr_assert_eq(strata_module_ops_by_name("conv2d"), &strata_conv2d);
        cr_assert_eq(strata_module_ops_by_name("add"), &strata_add);
        cr_assert_eq(strata_module_ops_by_name("concat"), &strata_concat);
        cr_assert_null(strata_module_ops_by_name("conv4d"));
        cr_assert_null(strata_module_ops_by_name(NULL));
        cr_assert_eq(strata_loss_ops_by_name("softmax_cross_entropy"),
                     &strata_softmax_cross_entropy);
        cr_assert_eq(strata_loss_ops_by_name("mse"), &strata_mse);
        cr_assert_eq(strata_loss_ops_by_name("bce_with_logits"), &strata_bce_with_logits);
        cr_assert_null(strata_loss_ops_by_name("ce"));
        cr_assert_null(strata_loss_ops_by_name(NULL));
}

/* A Fortran caller names its MPI communicator by its handle: pointer and kind are both set. */
Test(config_keys, mpi_comm_is_set_with_its_kind)
{
        struct strata_config c;
        int fortran_handle = 0; /* Open MPI's MPI_COMM_WORLD in Fortran */
        void *c_handle = NULL;

        strata_config_init(&c);
        cr_assert_null(c.process.mpi_comm);
        cr_assert_eq(c.process.mpi_comm_fortran, 0);
        cr_assert_eq(strata_config_set_mpi_comm(&c, &fortran_handle, 7), STRATA_OK);
        cr_assert_eq(c.process.mpi_comm, &fortran_handle);
        cr_assert_eq(c.process.mpi_comm_fortran, 1);
        cr_assert_eq(strata_config_set_mpi_comm(&c, &c_handle, 0), STRATA_OK);
        cr_assert_eq(c.process.mpi_comm, &c_handle);
        cr_assert_eq(c.process.mpi_comm_fortran, 0);
        cr_assert_eq(strata_config_set(&c, "mpi_comm_fortran", 1), STRATA_OK);
        cr_assert_eq(c.process.mpi_comm_fortran, 1);
        cr_assert_eq(strata_config_set_mpi_comm(NULL, NULL, 0), STRATA_EINVAL);
}

Test(config_keys, bad_keys_and_values_change_nothing)
{
        struct strata_config c, before;

        strata_config_init(&c);
        before = c;
        cr_assert_eq(strata_config_set(&c, "devicez", 2), STRATA_EINVAL);
        cr_assert_not_null(strstr(strata_last_error(), "devicez"), "%s", strata_last_error());
        cr_assert_eq(strata_config_set(&c, "devices", 2.5), STRATA_EINVAL);
        cr_assert_eq(strata_config_set(&c, "devices", 1e12), STRATA_EINVAL);
        cr_assert_eq(strata_config_set(&c, "seed", -1), STRATA_EINVAL);
        cr_assert_eq(strata_config_set(&c, "optim.lr", NAN), STRATA_EINVAL);
        cr_assert_eq(strata_config_set(&c, "optim.lr", 1e300), STRATA_EINVAL);
        cr_assert_eq(strata_config_set(NULL, "devices", 2), STRATA_EINVAL);
        cr_assert_eq(strata_config_set(&c, NULL, 2), STRATA_EINVAL);
        cr_assert_eq(strata_config_set_model(NULL, NULL), STRATA_EINVAL);
        cr_assert_eq(memcmp(&c, &before, sizeof(c)), 0, "a refused set changed the config");
}

/* The names from before the sub-structs, every one still set by name, each into its field. */
Test(config_keys, every_key_name_is_kept)
{
        static const char *const names[] = {
                "strategy", "accelerator", "devices", "batch", "classes", "seed", "verbose",
                "accumulate", "clip_norm", "clip_value", "sync_bn", "bucket_bytes", "timeout_s",
                "allow_tf32", "trace_events", "allow_nonfinite", "bind", "stall_s", "processes",
                "mpi_allreduce", "precision", "loss_scale_init", "loss_scale_interval",
                "grad_allreduce", "optim.kind", "optim.lr", "optim.momentum", "optim.dampening",
                "optim.nesterov", "optim.weight_decay", "optim.beta1", "optim.beta2", "optim.eps",
                "optim.schedule", "optim.warmup", "optim.step_size", "optim.gamma", "optim.t_max",
                "optim.lr_min",
        };
        struct strata_config c;

        strata_config_init(&c);
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
                cr_expect_eq(strata_config_set(&c, names[i], 1), STRATA_OK, "%s: %s", names[i],
                             strata_last_error());
        strata_config_init(&c);
        cr_assert_eq(strata_config_set(&c, "processes", 4), STRATA_OK);
        cr_assert_eq(strata_config_set(&c, "trace_events", 512), STRATA_OK);
        cr_assert_eq(strata_config_set(&c, "precision", STRATA_PRECISION_BF16_MIXED), STRATA_OK);
        cr_assert_eq(strata_config_set(&c, "clip_norm", 0.5), STRATA_OK);
        cr_assert_eq(strata_config_set(&c, "stall_s", 7), STRATA_OK);
        cr_assert_eq(strata_config_set(&c, "accelerator", STRATA_ACCEL_CUDA), STRATA_OK);
        cr_assert_eq(c.process.count, 4);
        cr_assert_eq(c.trace.events, 512);
        cr_assert_eq(c.precision.kind, STRATA_PRECISION_BF16_MIXED);
        cr_assert_eq(c.train.clip_norm, 0.5f);
        cr_assert_eq(c.trace.stall_s, 7.0);
        cr_assert_eq(c.device.accelerator, STRATA_ACCEL_CUDA);
        /* Fields that are not numbers have no name to be set by. */
        cr_assert_eq(strata_config_set(&c, "model", 1), STRATA_EINVAL);
        cr_assert_eq(strata_config_set(&c, "trace_path", 1), STRATA_EINVAL);
        cr_assert_eq(strata_config_set(&c, "replication_callbacks", 1), STRATA_EINVAL);
}

/* STRATA_CONFIG_INIT and strata_config_init() give the defaults of before the sub-structs. */
Test(config_keys, defaults_are_kept)
{
        struct strata_config m = STRATA_CONFIG_INIT, f;

        strata_config_init(&f);
        for (int i = 0; i < 2; i++) {
                const struct strata_config *c = i ? &f : &m;

                cr_assert_eq(c->struct_size, sizeof(struct strata_config));
                cr_assert_eq(c->version, STRATA_VERSION_HEX);
                cr_assert_eq(c->strategy.kind, STRATA_STRATEGY_SINGLE);
                cr_assert_eq(c->strategy.devices, 1);
                cr_assert_eq(c->device.accelerator, STRATA_ACCEL_CPU);
                cr_assert_eq(c->optim.kind, STRATA_OPTIM_SGD);
                cr_assert_eq(c->optim.lr, 0.05f);
                cr_assert_eq(c->optim.momentum, 0.9f);
                cr_assert_eq(c->precision.kind, STRATA_PRECISION_32);
                cr_assert_eq(c->strategy.grad_allreduce, STRATA_F32);
                cr_assert_null(c->trace.path);
                cr_assert_eq(c->train.accumulate, 0);
        }
}
