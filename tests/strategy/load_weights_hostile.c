/*
 * strata_load_weights() on malformed and hostile safetensors files: bad JSON, a header length
 * past the file or past the bound, offsets outside the data, truncated data, a tensor's bytes
 * not its shape's, a name twice, nesting too deep, a name too long, an unknown key, bytes
 * after the object. Each is refused with STRATA_EFORMAT and a message that names the file and
 * what is wrong; the runtime stays READY with its parameters unchanged, and a good file
 * loads after them.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/rig.h"

static char path[64];

/* A file of the 8-byte length @p len (or the header's own), header @p json and @p data bytes. */
static void write_file(const char *json, long long len, size_t data)
{
        FILE *f = fopen(path, "wb");
        unsigned long long n = len >= 0 ? (unsigned long long)len : strlen(json);
        unsigned char le[8];

        cr_assert_not_null(f);
        for (int i = 0; i < 8; i++)
                le[i] = (unsigned char)(n >> (8 * i));
        fwrite(le, 1, 8, f);
        fwrite(json, 1, strlen(json), f);
        for (size_t i = 0; i < data; i++)
                fputc(0, f);
        fclose(f);
}

/* The rig without BatchNorm: layers.0 [16, 20] and [16], layers.2 [4, 16] and [4]. */
#define GOOD_HEAD                                                                            \
        "\"layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[16,20],\"data_offsets\":[0,1280]}," \
        "\"layers.0.bias\":{\"dtype\":\"F32\",\"shape\":[16],\"data_offsets\":[1280,1344]}," \
        "\"layers.2.weight\":{\"dtype\":\"F32\",\"shape\":[4,16],\"data_offsets\":[1344,1600]}"
#define GOOD_TAIL "\"layers.2.bias\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[1600,1616]}"
#define DATA 1616

static const struct {
        const char *json;
        long long len;  /* -1: the header's */
        size_t data;
        const char *needle;
} cases[] = {
        { "", 0, 0, "not a safetensors file" },
        { "{}", 1 << 30, 16, "safetensors header of 1073741824 bytes" },
        { "{}", 200, 16, "safetensors header of 200 bytes in a file of" },
        { "[1, 2]      ", -1, DATA, "the header is not a JSON object" },
        { "{" GOOD_HEAD ",", -1, DATA, "a string was expected" },
        { "{" GOOD_HEAD "," GOOD_TAIL, -1, DATA, "',' or '}' was expected" },
        { "{" GOOD_HEAD "," GOOD_TAIL "}", -1, DATA - 4, "outside the file's 1612 data bytes" },
        { "{" GOOD_HEAD ",\"layers.2.bias\":{\"dtype\":\"F32\",\"shape\":[4],"
          "\"data_offsets\":[1600,99999999999]}}", -1, DATA, "outside the file's" },
        { "{" GOOD_HEAD ",\"layers.2.bias\":{\"dtype\":\"F32\",\"shape\":[4],"
          "\"data_offsets\":[1600,1608]}}", -1, DATA, "has 8 data bytes for 4 elements of F32" },
        { "{" GOOD_HEAD ",\"layers.2.bias\":{\"dtype\":\"F32\",\"shape\":[4],"
          "\"data_offsets\":[1612,1600]}}", -1, DATA, "outside the file's" },
        { "{" GOOD_HEAD "," GOOD_TAIL ",\"layers.0.bias\":{\"dtype\":\"F32\",\"shape\":[16],"
          "\"data_offsets\":[1280,1344]}}", -1, DATA, "'layers.0.bias' appears twice" },
        { "{\"__metadata__\":{\"a\":[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]}," GOOD_HEAD ","
          GOOD_TAIL "}", -1, DATA, "nested too deeply" },
        { "{" GOOD_HEAD ",\"layers.2.bias\":{\"dtype\":\"F32\",\"shape\":[4],"
          "\"data_offsets\":[1600,1616],\"x\":1}}", -1, DATA, "a key other than" },
        { "{" GOOD_HEAD ",\"layers.2.bias\":{\"dtype\":\"F32\",\"shape\":[4]}}", -1, DATA,
          "lacks dtype, shape or data_offsets" },
        { "{" GOOD_HEAD ",\"layers.2.bias\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,4],"
          "\"data_offsets\":[1600,1616]}}", -1, DATA, "an array too long" },
        { "{" GOOD_HEAD ",\"layers.2.bias\":{\"dtype\":\"F32\",\"shape\":[-4],"
          "\"data_offsets\":[1600,1616]}}", -1, DATA, "a non-negative integer was expected" },
        { "{" GOOD_HEAD ",\"layers.2.bias\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],"
          "\"data_offsets\":[1600,1616]}}", -1, DATA, "an integer too large" },
        { "{" GOOD_HEAD ",\"layers.2.bias\":{\"dtype\":\"F32\",\"shape\":[4294967296,"
          "4294967296,4294967296],\"data_offsets\":[1600,1616]}}", -1, DATA, "a shape too large" },
        { "{" GOOD_HEAD "," GOOD_TAIL "} x", -1, DATA, "bytes after the header's object" },
        { "{" GOOD_HEAD ",\"layers.2.b\\q\":{}}", -1, DATA, "bad escape in a string" },
        { "{" GOOD_HEAD ",\"layers.2.b\\ud800\":{}}", -1, DATA, "a surrogate" },
        { "{" GOOD_HEAD ",\"layers.2.b\x01\":{}}", -1, DATA, "a control character" },
        { "{" GOOD_HEAD ",\"layers.2.bias", -1, DATA, "ends inside a string" },
        { "{\"__metadata__\":{\"a\":tru}," GOOD_HEAD "," GOOD_TAIL "}", -1, DATA,
          "an unknown literal" },
        { "{\"__metadata__\":7," GOOD_HEAD "," GOOD_TAIL "}", -1, DATA,
          "'__metadata__' is not an object" },
};

Test(load_weights_hostile, every_malformed_file_refused_nothing_changed, .timeout = 60)
{
        static char longname[400];
        struct strata_runtime *rt;
        const float *p;
        float before[400];
        struct rig r;
        size_t n;

        snprintf(path, sizeof(path), "/tmp/strata-hostile-%d.safetensors", (int)getpid());
        rig_init(&r, 0);
        rt = rig_open(&r.cfg);
        cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
        memcpy(before, p, sizeof(before));
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                write_file(cases[i].json, cases[i].len, cases[i].data);
                cr_assert_eq(strata_load_weights(rt, path, 0, NULL), STRATA_EFORMAT,
                             "case %zu: %s", i, strata_last_error());
                cr_assert_not_null(strstr(strata_last_error(), cases[i].needle),
                                   "case %zu: %s", i, strata_last_error());
                cr_assert_not_null(strstr(strata_last_error(), path), "case %zu", i);
                cr_assert_eq(strata_state(rt), STRATA_STATE_READY);
        }
        /* a name longer than the reader keeps */
        memset(longname, 'a', sizeof(longname) - 1);
        {
                static char json[1024];

                snprintf(json, sizeof(json), "{\"%s\":{}}", longname);
                write_file(json, -1, 0);
                cr_assert_eq(strata_load_weights(rt, path, 0, NULL), STRATA_EFORMAT);
                cr_assert_not_null(strstr(strata_last_error(), "a string too long"), "%s",
                                   strata_last_error());
        }
        cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
        cr_assert_eq(memcmp(before, p, sizeof(before)), 0, "refusals changed nothing");
        /* the same frame, well formed, loads (zeros), metadata and escapes passed */
        write_file("{\"__metadata__\":{\"format\":\"pt\",\"n\":[1,{\"x\":null}],\"t\":true,"
                   "\"f\":-1.5e3},\n " GOOD_HEAD ",\"layers.2.bias\":{\"shape\":[4],"
                   "\"data_offsets\":[1600,1616],\"dtype\":\"F\\u00332\"}}   ", -1, DATA);
        cr_assert_eq(strata_load_weights(rt, path, 0, NULL), STRATA_OK, "%s",
                     strata_last_error());
        cr_assert_eq(strata_parameters(rt, 0, &p, &n), STRATA_OK);
        for (size_t i = 0; i < n; i++)
                cr_assert_eq(p[i], 0.0f);
        cr_assert_eq(strata_teardown(rt), STRATA_OK);
        unlink(path);
}
