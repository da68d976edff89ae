/*
 * A model in one line, for the tool, Fortran and configuration files:
 *
 *   input(1,28,28) conv2d(32,3,padding=1) relu maxpool2d(2) flatten linear(10)
 *
 * Modules are separated by spaces; each is a built-in module's name (strata_module_ops_by_name)
 * with its arguments in parentheses, positional first, then key=value, as PyTorch's
 * constructors take them. A per-dimension value is written 3x5 (PyTorch's (3, 5)); a skip
 * connection names the earlier module it reads by index, add(from=1), or concat(from=input)
 * for the model's input. Several inputs are one input(...) each, read by from=inputK; from= on
 * a module that merges nothing starts a branch; output(mse,weight=0.5) after a module makes it
 * one of the model's outputs. The line
 * fills a caller's array of modules: nothing is allocated, and a refused line leaves the
 * caller's model unchanged. Shapes are not checked here: strata_model_output() walks them.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata/nn.h"
#include "strata/status.h"
#include "base/base.h"
#include "nn/loss.h"
#include "nn/registry.h"
#include "nn/shape.h"

/* The key of each argument (nn/registry.h); from= on a module that merges none: a branch. */
static const char *const arg_names[STRATA__ARG_COUNT] = {
        [STRATA__ARG_OUT] = "out", [STRATA__ARG_KERNEL] = "kernel",
        [STRATA__ARG_STRIDE] = "stride", [STRATA__ARG_PADDING] = "padding",
        [STRATA__ARG_DILATION] = "dilation", [STRATA__ARG_SCALE] = "scale",
        [STRATA__ARG_MODE] = "mode", [STRATA__ARG_PMODE] = "padding_mode",
        [STRATA__ARG_BIAS] = "bias", [STRATA__ARG_P] = "p", [STRATA__ARG_EPS] = "eps",
        [STRATA__ARG_MOMENTUM] = "momentum", [STRATA__ARG_SLOPE] = "slope",
        [STRATA__ARG_FROM] = "from", [STRATA__ARG_BRANCH] = "from",
        [STRATA__ARG_MODES] = "modes", [STRATA__ARG_MODES1] = "modes1",
        [STRATA__ARG_MODES2] = "modes2", [STRATA__ARG_MODES3] = "modes3",
        [STRATA__ARG_HEADS] = "heads", [STRATA__ARG_CAUSAL] = "causal",
        [STRATA__ARG_DIMS] = "dims",
        [STRATA__ARG_SIDE] = "side", [STRATA__ARG_REDUCE] = "reduce",
};

/* Words some arguments take, and the value each stands for. */
struct word {
        enum strata__arg arg;
        const char *word;
        int value;
};

static const struct word words[] = {
        { STRATA__ARG_PADDING, "same", STRATA_PADDING_SAME },
        { STRATA__ARG_PMODE, "zeros", STRATA_PAD_ZEROS },
        { STRATA__ARG_PMODE, "circular", STRATA_PAD_CIRCULAR },
        { STRATA__ARG_PMODE, "reflect", STRATA_PAD_REFLECT },
        { STRATA__ARG_PMODE, "replicate", STRATA_PAD_REPLICATE },
        { STRATA__ARG_MODE, "nearest", STRATA_UPSAMPLE_NEAREST },
        { STRATA__ARG_MODE, "linear", STRATA_UPSAMPLE_LINEAR },
        { STRATA__ARG_MODE, "bilinear", STRATA_UPSAMPLE_LINEAR },
        { STRATA__ARG_MODE, "trilinear", STRATA_UPSAMPLE_LINEAR },
        { STRATA__ARG_BIAS, "true", 1 },
        { STRATA__ARG_BIAS, "false", 0 },
        { STRATA__ARG_CAUSAL, "0", 0 },
        { STRATA__ARG_CAUSAL, "1", 1 },
        { STRATA__ARG_SIDE, "src", STRATA_GATHER_SRC },
        { STRATA__ARG_SIDE, "dst", STRATA_GATHER_DST },
        { STRATA__ARG_REDUCE, "sum", STRATA_SCATTER_SUM },
        { STRATA__ARG_REDUCE, "mean", STRATA_SCATTER_MEAN },
        { STRATA__ARG_FROM, "input", -1 },
        { STRATA__ARG_FROM, "-1", -1 },
};

/* The line being read: where, and which module (for messages). */
struct cursor {
        const char *s;
        int module;
        char name[32];
};

/* A value of the line as a message shows it: at most 40 characters (then "..."), control
 * characters escaped ("\n"), so the reason after it is never cut off and the message stays
 * one line (issue 58, item 7). */
#define SHOWN 64
static const char *shown(const char *s, size_t n, char *buf)
{
        size_t at = 0;

        for (size_t i = 0; i < n && at < 40; i++) {
                unsigned char ch = (unsigned char)s[i];

                if (ch == '\n' || ch == '\t' || ch == '\r') {
                        buf[at++] = '\\';
                        buf[at++] = ch == '\n' ? 'n' : ch == '\t' ? 't' : 'r';
                } else {
                        buf[at++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
                }
        }
        if (at >= 40 && n > 0)
                memcpy(buf + at, "...", 3), at += 3;
        buf[at] = '\0';
        return buf;
}
#define SHOW(s, n) shown((s), (size_t)(n), (char[SHOWN]){ 0 })

static int line_error(const struct cursor *c, const char *what)
{
        return strata__fail(STRATA_EINVAL, "model line, module %d (%s): %s", c->module, c->name,
                            what);
}

/* "3" or "3x5x7" into v[0..2] (the rest 0); the count, or -1. */
static int parse_ints(const char *s, size_t n, int *v)
{
        int k = 0;

        v[0] = v[1] = v[2] = 0;
        while (n > 0) {
                char buf[16], *end;
                size_t len = 0;
                long x;

                while (len < n && s[len] != 'x')
                        len++;
                if (len == 0 || len >= sizeof(buf) || k == STRATA_MAX_SPATIAL)
                        return -1;
                memcpy(buf, s, len);
                buf[len] = 0;
                errno = 0;
                x = strtol(buf, &end, 10);
                if (errno || *end || x < 0 || x > (1 << 20))
                        return -1;
                v[k++] = (int)x;
                s += len;
                n -= len;
                if (n > 0) { /* an 'x' between extents, never last */
                        s++;
                        n--;
                        if (n == 0)
                                return -1;
                }
        }
        return k;
}

static int parse_float(const char *s, size_t n, float *out)
{
        char buf[32], *end;
        double v;

        if (n == 0 || n >= sizeof(buf))
                return -1;
        memcpy(buf, s, n);
        buf[n] = 0;
        errno = 0;
        v = strtod(buf, &end);
        if (errno || *end || !isfinite(v))
                return -1;
        *out = (float)v;
        return 0;
}

/* A word's value for @p a, or -1 when @p s is none of its words (*v unchanged). */
static int parse_word(enum strata__arg a, const char *s, size_t n, int *v)
{
        for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
                if (words[i].arg == a && strlen(words[i].word) == n &&
                    !strncmp(words[i].word, s, n)) {
                        *v = words[i].value;
                        return 0;
                }
        return -1;
}

/* Argument @p a of module @p m from the text s[0..n). */
static int set_arg(const struct cursor *c, struct strata_module *m, enum strata__arg a,
                   const char *s, size_t n)
{
        int v[STRATA_MAX_SPATIAL], *dims = NULL, k;
        float f;

        switch (a) {
        case STRATA__ARG_KERNEL: dims = m->kernel; break;
        case STRATA__ARG_STRIDE: dims = m->stride; break;
        case STRATA__ARG_PADDING: dims = m->padding; break;
        case STRATA__ARG_DILATION: dims = m->dilation; break;
        case STRATA__ARG_SCALE: dims = m->scale; break;
        default: break;
        }
        if (dims) {
                if (a == STRATA__ARG_PADDING && !parse_word(a, s, n, &v[0])) {
                        dims[0] = v[0];
                        return STRATA_OK;
                }
                if ((k = parse_ints(s, n, v)) < 0)
                        return strata__fail(STRATA_EINVAL, "model line, module %d (%s): %s "
                                            "'%s' is not a count or counts like 3x5",
                                            c->module, c->name, arg_names[a], SHOW(s, n));
                for (int d = 0; d < STRATA_MAX_SPATIAL; d++) /* 0 past the first: explicit */
                        dims[d] = d < k && d > 0 && a == STRATA__ARG_PADDING && v[d] == 0
                                          ? STRATA_PADDING_NONE : v[d];
                return STRATA_OK;
        }
        if (a == STRATA__ARG_PMODE || a == STRATA__ARG_MODE || a == STRATA__ARG_BIAS ||
            a == STRATA__ARG_CAUSAL || a == STRATA__ARG_SIDE || a == STRATA__ARG_REDUCE) {
                if (parse_word(a, s, n, &v[0]))
                        return strata__fail(STRATA_EINVAL, "model line, module %d (%s): %s "
                                            "'%s' is not one of its words", c->module,
                                            c->name, arg_names[a], SHOW(s, n));
                if (a == STRATA__ARG_PMODE)
                        m->padding_mode = v[0];
                else if (a == STRATA__ARG_MODE)
                        m->mode = v[0];
                else if (a == STRATA__ARG_CAUSAL)
                        m->causal = v[0];
                else if (a == STRATA__ARG_SIDE || a == STRATA__ARG_REDUCE)
                        m->graph = v[0];
                else
                        m->no_bias = !v[0];
                return STRATA_OK;
        }
        /* an index from 0, input, inputK (-1 - K); from= on a module that merges none: a branch */
        if (a == STRATA__ARG_FROM || a == STRATA__ARG_BRANCH) {
                m->branch = a == STRATA__ARG_BRANCH;
                if (!parse_word(STRATA__ARG_FROM, s, n, &m->from))
                        return STRATA_OK;
                if (n > 5 && !strncmp(s, "input", 5) && parse_ints(s + 5, n - 5, v) == 1 &&
                    v[0] < STRATA_MAX_INPUTS) {
                        m->from = -1 - v[0];
                        return STRATA_OK;
                }
                if (parse_ints(s, n, v) != 1)
                        return strata__fail(STRATA_EINVAL, "model line, module %d (%s): from "
                                            "'%s' is not a module's index or input (input0.."
                                            "input%d for each input)", c->module, c->name,
                                            SHOW(s, n), STRATA_MAX_INPUTS - 1);
                m->from = v[0];
                return STRATA_OK;
        }
        if (a == STRATA__ARG_OUT || a == STRATA__ARG_MODES || a == STRATA__ARG_MODES1 ||
            a == STRATA__ARG_MODES2 || a == STRATA__ARG_MODES3 || a == STRATA__ARG_HEADS) {
                if (parse_ints(s, n, v) != 1 || v[0] <= 0)
                        return strata__fail(STRATA_EINVAL, "model line, module %d (%s): %s "
                                            "'%s' is not a positive count", c->module,
                                            c->name, arg_names[a], SHOW(s, n));
                if (a == STRATA__ARG_OUT)
                        m->out = v[0];
                else if (a == STRATA__ARG_HEADS)
                        m->heads = v[0];
                else
                        m->modes[a == STRATA__ARG_MODES3 ? 2 : a == STRATA__ARG_MODES2] = v[0];
                return STRATA_OK;
        }
        if (a == STRATA__ARG_DIMS) {
                if (parse_ints(s, n, v) != 1 || v[0] > STRATA_MAX_SPATIAL)
                        return strata__fail(STRATA_EINVAL, "model line, module %d (%s): dims "
                                            "'%s' is not a count of 0 to %d", c->module,
                                            c->name, SHOW(s, n), STRATA_MAX_SPATIAL);
                m->norm_dims = v[0];
                return STRATA_OK;
        }
        if (parse_float(s, n, &f))
                return strata__fail(STRATA_EINVAL, "model line, module %d (%s): %s '%s' is "
                                    "not a number", c->module, c->name, arg_names[a],
                                    SHOW(s, n));
        if (a == STRATA__ARG_P)
                m->p = f;
        else if (a == STRATA__ARG_EPS)
                m->eps = f;
        else if (a == STRATA__ARG_MOMENTUM)
                m->decay = f;
        else
                m->slope = f;
        return STRATA_OK;
}

/* Which of @p sc's arguments the key s[0..n) names (STRATA__ARG_NONE: none). */
static enum strata__arg arg_by_key(const struct strata__module_entry *sc, const char *s,
                                   size_t n)
{
        for (int i = 0; sc->args[i] != STRATA__ARG_NONE; i++)
                if (strlen(arg_names[sc->args[i]]) == n && !strncmp(arg_names[sc->args[i]], s, n))
                        return sc->args[i];
        return STRATA__ARG_NONE;
}

/* The arguments inside the parentheses s[0..n) of module @p m. */
static int module_args(const struct cursor *c, const struct strata__module_entry *sc,
                      struct strata_module *m, const char *s, size_t n)
{
        int pos = 0, keyed = 0, from_given = 0;

        while (n > 0) {
                size_t len = 0, key = 0;
                enum strata__arg a;

                while (len < n && s[len] != ',')
                        len++;
                while (key < len && s[key] != '=')
                        key++;
                if (key < len) {
                        keyed = 1;
                        if ((a = arg_by_key(sc, s, key)) == STRATA__ARG_NONE && key == 4 &&
                            !strncmp(s, "from", 4))
                                a = STRATA__ARG_BRANCH; /* any module may start a branch */
                        if (a == STRATA__ARG_NONE)
                                return strata__fail(STRATA_EINVAL, "model line, module %d (%s): "
                                                    "no argument '%s'", c->module, c->name,
                                                    SHOW(s, key));
                        STRATA_TRY(set_arg(c, m, a, s + key + 1, len - key - 1));
                } else {
                        if (keyed || pos >= sc->positional)
                                return line_error(c, "too many arguments without a key (name=value)");
                        a = sc->args[pos++];
                        STRATA_TRY(set_arg(c, m, a, s, len));
                }
                from_given |= a == STRATA__ARG_FROM;
                s += len;
                n -= len;
                if (n > 0) { /* the comma: another argument must follow */
                        s++;
                        if (--n == 0)
                                return line_error(c, "an argument is empty");
                }
        }
        if (sc->positional > 0 && sc->args[0] == STRATA__ARG_OUT && m->out == 0)
                return line_error(c, "its output count is missing, e.g. linear(10)");
        if (sc->args[0] == STRATA__ARG_HEADS && m->heads == 0)
                return line_error(c, "its head count is missing, e.g. mha(4) or mha(4,causal=1)");
        if (sc->args[0] == STRATA__ARG_FROM && !from_given)
                return line_error(c, "the earlier module it reads is missing, e.g. add(from=3) or "
                           "concat(from=input)");
        if (sc->positional > 1 && sc->args[1] == STRATA__ARG_KERNEL && m->kernel[0] == 0)
                return line_error(c, "its kernel size is missing, e.g. conv2d(16,3)");
        if (sc->positional > 1 && sc->args[1] == STRATA__ARG_MODES && m->modes[0] == 0)
                return line_error(c, "its modes are missing, e.g. spectralconv1d(16,8)");
        if (sc->positional > 3 && sc->args[3] == STRATA__ARG_MODES3 &&
            (m->modes[0] == 0 || m->modes[1] == 0 || m->modes[2] == 0))
                return line_error(c, "its modes1, modes2 and modes3 are missing, e.g. "
                           "spectralconv3d(16,4,4,4)");
        if (sc->positional > 2 && sc->args[1] == STRATA__ARG_MODES1 &&
            (m->modes[0] == 0 || m->modes[1] == 0))
                return line_error(c, "its modes1 and modes2 are missing, e.g. spectralconv2d(16,8,8)");
        return STRATA_OK;
}

/* input(C[,D][,H][,W]): the model's next input's layout (input 0 first). */
static int parse_input(const char *s, size_t n, struct strata_model *m)
{
        int v[1 + STRATA_MAX_SPATIAL] = { 0 }, k = 0;
        long long total = 1;

        while (n > 0 && k <= STRATA_MAX_SPATIAL) {
                size_t len = 0;
                int x[STRATA_MAX_SPATIAL];

                while (len < n && s[len] != ',')
                        len++;
                if (parse_ints(s, len, x) != 1 || x[0] <= 0)
                        break;
                v[k++] = x[0];
                total *= x[0];
                s += len;
                n -= len;
                if (n > 0) {
                        s++;
                        n--;
                        if (n == 0)
                                k = 0;
                }
        }
        if (n > 0 || k == 0 || total > (1 << 30))
                return strata__fail(STRATA_EINVAL, "model line: input(...) takes channels and "
                                    "up to %d positive extents, e.g. input(1,28,28)",
                                    STRATA_MAX_SPATIAL);
        if (m->ninputs == STRATA_MAX_INPUTS)
                return strata__fail(STRATA_EINVAL, "model line: more than %d inputs",
                                    STRATA_MAX_INPUTS);
        m->inputs[m->ninputs++] = (struct strata_model_input){
                .features = (int)total,
                .dims = { .channels = v[0], .ndim = k - 1, .size = { v[1], v[2], v[3] } } };
        return STRATA_OK;
}

/*
 * output(loss, weight=w) after module @p n - 1: that module is one of the model's outputs,
 * with the loss its ops table or strata-train names ("mse", "l1", "huber", "bce" or
 * "bce_with_logits", "ce" or "softmax_cross_entropy": its target a class index; none: the
 * model's) and weight w (1 when not given).
 */
static int parse_output(const char *s, size_t n, int module, struct strata_model *m)
{
        struct strata_model_output o = { .module = module };
        int k = m->noutputs;

        if (module < 0)
                return strata__fail(STRATA_EINVAL, "model line: output %d comes after the "
                                    "module it marks", k);
        if (k == STRATA_MAX_OUTPUTS)
                return strata__fail(STRATA_EINVAL, "model line: more than %d outputs",
                                    STRATA_MAX_OUTPUTS);
        while (n > 0) {
                char buf[32];
                size_t len = 0;

                while (len < n && s[len] != ',')
                        len++;
                if (len > 7 && !strncmp(s, "weight=", 7)) {
                        /* > 0: a weight of 0 in the struct means 1 */
                        if (parse_float(s + 7, len - 7, &o.weight) || !(o.weight > 0.0f))
                                return strata__fail(STRATA_EINVAL, "model line, output %d "
                                                    "(module %d): weight '%s' is not a "
                                                    "finite number > 0", k, module,
                                                    SHOW(s + 7, len - 7));
                } else {
                        snprintf(buf, sizeof(buf), "%.*s", (int)len, s);
                        o.loss = strata_loss_ops_by_name(!strcmp(buf, "bce") ? "bce_with_logits"
                                                         : !strcmp(buf, "ce")
                                                                 ? "softmax_cross_entropy"
                                                                 : buf);
                        if (o.loss == NULL || len >= sizeof(buf))
                                return strata__fail(STRATA_EINVAL, "model line, output %d "
                                                    "(module %d): loss '%s' is not mse, "
                                                    "l1, huber, bce or ce", k, module,
                                                    SHOW(s, len));
                }
                s += len;
                n -= len;
                if (n > 0 && --n == 0)
                        return strata__fail(STRATA_EINVAL, "model line, output %d (module "
                                            "%d): an argument is empty", k, module);
                if (n > 0)
                        s++;
        }
        m->outputs[m->noutputs++] = o;
        return STRATA_OK;
}

/* The inputs read: one is the model's in_dims as before, several its inputs. */
static void set_inputs(struct strata_model *m)
{
        if (m->ninputs == 0)
                return;
        m->in_features = 0;
        for (int k = 0; k < m->ninputs; k++)
                m->in_features += m->inputs[k].features;
        if (m->ninputs == 1) {
                m->in_dims = m->inputs[0].dims;
                m->inputs[0] = (struct strata_model_input){ 0 };
                m->ninputs = 0;
        }
}

/* The next module's text: name [ "(" args ")" ]; its end, or NULL with the status set. */
static const char *token(const char *s, const char **open, const char **close)
{
        const char *p = s;

        *open = *close = NULL;
        while (*p && *p != ' ' && *p != '\t' && *p != '\n' && *p != '(' && *p != ')')
                p++;
        if (*p == ')')
                return NULL;
        if (*p != '(')
                return p;
        *open = p;
        while (*p && *p != ')')
                p++;
        if (!*p)
                return NULL;
        *close = p;
        return p + 1;
}

int strata_model_parse(const char *line, struct strata_module *mods, int max,
                       struct strata_model *model)
{
        struct strata_model m;
        struct cursor c = { 0 };
        int n = 0;

        if (!line || !mods || !model || max <= 0)
                return strata__fail(STRATA_EINVAL, "model parse: NULL argument or no room (%d)",
                                    max);
        m = *model;
        m.in_dims = (struct strata_dims){ 0 };
        m.ninputs = m.noutputs = 0;
        memset(m.inputs, 0, sizeof(m.inputs));
        memset(m.outputs, 0, sizeof(m.outputs));
        for (const char *s = line;;) {
                const char *open, *close, *end;
                size_t len;

                while (*s == ' ' || *s == '\t' || *s == '\n')
                        s++;
                if (!*s)
                        break;
                c.module = n;
                if (!(end = token(s, &open, &close)))
                        return strata__fail(STRATA_EINVAL, "model line: unbalanced parentheses "
                                            "after module %d: '%s'", n, SHOW(s, strlen(s)));
                len = (size_t)((open ? open : end) - s);
                snprintf(c.name, sizeof(c.name), "%.*s", (int)len, s);
                if (*end && *end != ' ' && *end != '\t' && *end != '\n')
                        return line_error(&c, "a module ends at its ')' and a space follows");
                if (!strcmp(c.name, "input")) {
                        if (n > 0 || !open)
                                return strata__fail(STRATA_EINVAL, "model line: input(C,H,W) "
                                                    "comes once, first (once for each of "
                                                    "the model's inputs, before any module)");
                        STRATA_TRY(parse_input(open + 1, (size_t)(close - open - 1), &m));
                } else if (!strcmp(c.name, "output")) {
                        STRATA_TRY(parse_output(open ? open + 1 : "",
                                                open ? (size_t)(close - open - 1) : 0, n - 1,
                                                &m));
                } else {
                        const struct strata__module_entry *e = strata__module_entry(c.name);
                        struct strata_module mod = { .ops = e ? e->ops : NULL };

                        if (!mod.ops || len >= sizeof(c.name))
                                return line_error(&c, "no such module (see strata_module_ops_by_name)");
                        if (n == max)
                                return strata__fail(STRATA_EINVAL, "model line: more than %d "
                                                    "modules", max);
                        STRATA_TRY(module_args(&c, e, &mod,
                                              open ? open + 1 : "",
                                              open ? (size_t)(close - open - 1) : 0));
                        mods[n++] = mod;
                }
                s = end;
        }
        if (n == 0)
                return strata__fail(STRATA_EINVAL, "model line: no module");
        set_inputs(&m);
        m.nmodules = n;
        m.modules = mods;
        *model = m;
        return STRATA_OK;
}

/*
 * @p m's shapes walked and checked: its last layout, a row's predictions and targets; @p fn
 * names the caller in the messages ("model output").
 */
static int walk_model(const char *fn, const struct strata_model *m,
                      struct strata__shape_walk *w, int *outputs, int *targets)
{
        struct strata_module_shape s;
        struct strata_layer l;

        if (!m || !m->modules || m->nmodules <= 0)
                return strata__fail(STRATA_EINVAL, "%s: NULL argument or no module", fn);
        if (m->in_features <= 0)
                return strata__fail(STRATA_EINVAL, "%s: in_features %d <= 0", fn,
                                    m->in_features);
        STRATA_TRY(strata__shape_start(m, w));
        for (int i = 0; i < m->nmodules; i++)
                STRATA_TRY(strata__shape_step(m, i, w, &l, &s));
        return strata__shape_finish(m, w, outputs, targets);
}

int strata_model_output(const struct strata_model *m, struct strata_dims *out)
{
        struct strata__shape_walk w;
        int outputs;

        if (!out)
                return strata__fail(STRATA_EINVAL, "model output: NULL argument or no module");
        STRATA_TRY(walk_model("model output", m, &w, &outputs, NULL));
        *out = m->noutputs ? (struct strata_dims){ .channels = outputs } : w.dims;
        return STRATA_OK;
}

int strata_model_targets(const struct strata_model *m, int *values, int *widths)
{
        struct strata__shape_walk w;
        int targets;

        if (!values)
                return strata__fail(STRATA_EINVAL, "model targets: NULL argument");
        STRATA_TRY(walk_model("model targets", m, &w, NULL, &targets));
        *values = strata__float_row(m) ? targets : 1;
        for (int k = 0; widths && k < STRATA_MAX_OUTPUTS; k++)
                widths[k] = k < m->noutputs ? w.width[m->outputs[k].module] : 0;
        return STRATA_OK;
}

size_t strata_module_bytes(void)
{
        return sizeof(struct strata_module);
}
