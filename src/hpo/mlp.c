/* The mlp-digits objective: a small multilayer perceptron trained in C on
 * the 8x8 digits. Fully connected layers (64 -> hidden x layers -> 10),
 * ReLU or tanh, softmax cross-entropy, minibatch gradients by
 * backpropagation one image at a time, inverted dropout on the hidden
 * units, and SGD, momentum or Adam updates. After every epoch the
 * validation accuracy is handed to the caller (the study's intermediate
 * value, which a pruner reads). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hpo/hpo_internal.h"

#define MOMENTUM 0.9
#define ADAM_B1 0.9
#define ADAM_B2 0.999
#define ADAM_EPS 1e-8

const char *const lt_hpo_mlp_digits_space =
    "{\"lr\": {\"type\": \"float\", \"low\": 1e-4, \"high\": 0.3, \"log\": true},"
    " \"hidden\": {\"type\": \"int\", \"low\": 16, \"high\": 128, \"log\": true},"
    " \"layers\": {\"type\": \"int\", \"low\": 1, \"high\": 3},"
    " \"dropout\": {\"type\": \"float\", \"low\": 0, \"high\": 0.5},"
    " \"opt\": {\"type\": \"categorical\", \"choices\": [\"sgd\", \"momentum\", \"adam\"]},"
    " \"activation\": {\"type\": \"categorical\", \"choices\": [\"relu\", \"tanh\"]}}";

void lt_mlp_config_default(lt_mlp_config *c) {
    *c = (lt_mlp_config){.layers = 1, .hidden = 64, .lr = 1e-3, .dropout = 0, .opt = LT_MLP_ADAM,
                         .act = LT_MLP_RELU, .epochs = 20, .batch = 32, .seed = 1};
}

/* Parameter name's value in values, if the space has it and it is active. */
static bool value_of(const lt_hpo_space *s, const double *values, const char *name, double *v,
                     const lt_hpo_param **p) {
    int i = lt_hpo_space_find(s, name);
    if (i < 0 || isnan(values[i])) return false;
    *v = values[i];
    *p = lt_hpo_space_param(s, i);
    return true;
}

/* A categorical's choice as the index of one of names[0..n). */
static int choice_of(const lt_hpo_param *p, double v, const char *const *names, int n, int *out) {
    const char *text = p->kind == LT_HPO_CATEGORICAL ? p->choices[(int)v] : "";
    for (int i = 0; i < n; i++)
        if (!strcmp(text, names[i])) {
            *out = i;
            return LT_OK;
        }
    return lt_error(LT_ECONFIG, "mlp-digits: parameter '%s': '%s' is not one of %s, %s%s%s",
                    p->name, text, names[0], names[1], n > 2 ? ", " : "", n > 2 ? names[2] : "");
}

int lt_mlp_config_from(const lt_hpo_space *s, const double *values, lt_mlp_config *c) {
    static const char *const opts[] = {"sgd", "momentum", "adam"};
    static const char *const acts[] = {"relu", "tanh"};
    double v;
    const lt_hpo_param *p;
    int k = 0, rc;
    if (value_of(s, values, "lr", &v, &p)) c->lr = v;
    if (value_of(s, values, "hidden", &v, &p)) c->hidden = (int)v;
    if (value_of(s, values, "layers", &v, &p)) c->layers = (int)v;
    if (value_of(s, values, "dropout", &v, &p)) c->dropout = v;
    if (value_of(s, values, "epochs", &v, &p)) c->epochs = (int)v;
    if (value_of(s, values, "batch", &v, &p)) c->batch = (int)v;
    if (value_of(s, values, "opt", &v, &p)) {
        if ((rc = choice_of(p, v, opts, 3, &k))) return rc;
        c->opt = (lt_mlp_opt)k;
    }
    if (value_of(s, values, "activation", &v, &p)) {
        if ((rc = choice_of(p, v, acts, 2, &k))) return rc;
        c->act = (lt_mlp_act)k;
    }
    if (c->layers < 1 || c->layers > 8)
        return lt_error(LT_ECONFIG, "mlp-digits: layers must be 1..8");
    if (c->hidden < 1 || c->hidden > 4096)
        return lt_error(LT_ECONFIG, "mlp-digits: hidden must be 1..4096");
    if (!(c->lr > 0)) return lt_error(LT_ECONFIG, "mlp-digits: lr must be > 0");
    if (!(c->dropout >= 0 && c->dropout < 1))
        return lt_error(LT_ECONFIG, "mlp-digits: dropout must be in [0, 1)");
    if (c->epochs < 1 || c->epochs > 10000)
        return lt_error(LT_ECONFIG, "mlp-digits: epochs must be 1..10000");
    if (c->batch < 1 || c->batch > 100000)
        return lt_error(LT_ECONFIG, "mlp-digits: batch must be 1..100000");
    return LT_OK;
}

/* The network and its training state. Layer l maps dims[l] -> dims[l+1]. */
typedef struct {
    int nl;      /* weight layers: hidden layers + 1 */
    int dims[10];
    float *w[9], *b[9];   /* [dims[l+1]][dims[l]], [dims[l+1]] */
    float *gw[9], *gb[9]; /* gradient sums over the minibatch */
    float *mw[9], *mb[9]; /* momentum, or Adam's first moment */
    float *vw[9], *vb[9]; /* Adam's second moment */
    float *h[10];         /* [dims[l]] layer l's activations (before dropout) */
    float *a[10];         /* [dims[l]] after dropout (the next layer's input) */
    float *keep[10];      /* [dims[l]] dropout's factor per unit: 0 or 1/(1-p) */
    float *d[10];         /* [dims[l]] backpropagated error */
} net;

static void net_free(net *n) {
    for (int l = 0; l < n->nl; l++) {
        free(n->w[l]), free(n->b[l]), free(n->gw[l]), free(n->gb[l]);
        free(n->mw[l]), free(n->mb[l]), free(n->vw[l]), free(n->vb[l]);
    }
    for (int l = 0; l <= n->nl; l++) free(n->h[l]), free(n->a[l]), free(n->keep[l]), free(n->d[l]);
}

static int net_init(net *n, const lt_mlp_config *c, lt_hpo_rng *r) {
    memset(n, 0, sizeof *n);
    n->nl = c->layers + 1;
    n->dims[0] = LT_HPO_DIGITS_PIXELS;
    for (int l = 1; l < n->nl; l++) n->dims[l] = c->hidden;
    n->dims[n->nl] = LT_HPO_DIGITS_CLASSES;
    bool ok = true;
    for (int l = 0; l < n->nl; l++) {
        size_t nw = (size_t)n->dims[l + 1] * n->dims[l], nb = (size_t)n->dims[l + 1];
        n->w[l] = malloc(nw * sizeof(float));
        n->gw[l] = calloc(nw, sizeof(float));
        n->mw[l] = calloc(nw, sizeof(float));
        n->vw[l] = calloc(nw, sizeof(float));
        n->b[l] = calloc(nb, sizeof(float));
        n->gb[l] = calloc(nb, sizeof(float));
        n->mb[l] = calloc(nb, sizeof(float));
        n->vb[l] = calloc(nb, sizeof(float));
        ok &= n->w[l] && n->gw[l] && n->mw[l] && n->vw[l] && n->b[l] && n->gb[l] && n->mb[l] &&
              n->vb[l];
        if (!ok) break;
        /* He (ReLU) or Glorot (tanh) uniform */
        double fan_in = n->dims[l], fan_out = n->dims[l + 1];
        double lim = c->act == LT_MLP_RELU ? sqrt(6.0 / fan_in) : sqrt(6.0 / (fan_in + fan_out));
        for (size_t i = 0; i < nw; i++) n->w[l][i] = (float)((2 * lt_hpo_rng_uniform(r) - 1) * lim);
    }
    for (int l = 0; l <= n->nl && ok; l++) {
        size_t k = (size_t)n->dims[l];
        n->h[l] = calloc(k, sizeof(float));
        n->a[l] = calloc(k, sizeof(float));
        n->keep[l] = malloc(k * sizeof(float));
        n->d[l] = calloc(k, sizeof(float));
        ok &= n->h[l] && n->a[l] && n->keep[l] && n->d[l];
        for (size_t i = 0; ok && i < k; i++) n->keep[l][i] = 1;
    }
    if (!ok) {
        net_free(n);
        return lt_error(LT_ENOMEM, "mlp-digits: out of memory");
    }
    return LT_OK;
}

/* Forward pass of image x; dropout drawn when train. Output: softmax
 * probabilities in a[nl]. */
static void forward(net *n, const lt_mlp_config *c, const float *x, bool train, lt_hpo_rng *r) {
    memcpy(n->a[0], x, LT_HPO_DIGITS_PIXELS * sizeof *x);
    for (int l = 0; l < n->nl; l++) {
        int in = n->dims[l], out = n->dims[l + 1];
        const float *w = n->w[l], *ain = n->a[l];
        float *h = n->h[l + 1];
        for (int o = 0; o < out; o++) {
            float s = n->b[l][o];
            const float *row = &w[(size_t)o * in];
            for (int i = 0; i < in; i++) s += row[i] * ain[i];
            h[o] = s;
        }
        if (l + 1 < n->nl) { /* hidden: activation, then dropout */
            float scale = (float)(1.0 / (1.0 - c->dropout));
            for (int o = 0; o < out; o++) {
                h[o] = c->act == LT_MLP_RELU ? (h[o] > 0 ? h[o] : 0) : tanhf(h[o]);
                n->keep[l + 1][o] =
                    train && c->dropout > 0 ? (lt_hpo_rng_uniform(r) >= c->dropout ? scale : 0) : 1;
                n->a[l + 1][o] = h[o] * n->keep[l + 1][o];
            }
        } else { /* output: softmax */
            float top = h[0];
            for (int o = 1; o < out; o++) top = fmaxf(top, h[o]);
            float sum = 0;
            for (int o = 0; o < out; o++) sum += (n->a[l + 1][o] = expf(h[o] - top));
            for (int o = 0; o < out; o++) n->a[l + 1][o] /= sum;
        }
    }
}

/* Backward pass for label y after forward: adds the gradients to gw, gb. */
static void backward(net *n, const lt_mlp_config *c, int y) {
    int L = n->nl;
    for (int o = 0; o < n->dims[L]; o++) n->d[L][o] = n->a[L][o] - (o == y ? 1.0f : 0.0f);
    for (int l = L - 1; l >= 0; l--) {
        int in = n->dims[l], out = n->dims[l + 1];
        const float *d = n->d[l + 1], *ain = n->a[l];
        for (int o = 0; o < out; o++) {
            float *g = &n->gw[l][(size_t)o * in];
            for (int i = 0; i < in; i++) g[i] += d[o] * ain[i];
            n->gb[l][o] += d[o];
        }
        if (l == 0) break;
        float *dp = n->d[l];
        for (int i = 0; i < in; i++) dp[i] = 0;
        for (int o = 0; o < out; o++) {
            const float *row = &n->w[l][(size_t)o * in];
            for (int i = 0; i < in; i++) dp[i] += row[i] * d[o];
        }
        for (int i = 0; i < in; i++) {
            float hv = n->h[l][i];
            float dact = c->act == LT_MLP_RELU ? (hv > 0 ? 1.0f : 0.0f) : 1.0f - hv * hv;
            dp[i] *= dact * n->keep[l][i];
        }
    }
}

/* One update from the gradient sums of m images; clears them. */
static void update(net *n, const lt_mlp_config *c, int m, int64_t t) {
    float inv = 1.0f / (float)m, lr = (float)c->lr;
    double c1 = 1 - pow(ADAM_B1, (double)t), c2 = 1 - pow(ADAM_B2, (double)t);
    for (int l = 0; l < n->nl; l++) {
        for (int part = 0; part < 2; part++) {
            size_t k = part ? (size_t)n->dims[l + 1] : (size_t)n->dims[l + 1] * n->dims[l];
            float *w = part ? n->b[l] : n->w[l], *g = part ? n->gb[l] : n->gw[l];
            float *mo = part ? n->mb[l] : n->mw[l], *v = part ? n->vb[l] : n->vw[l];
            for (size_t i = 0; i < k; i++) {
                float gi = g[i] * inv;
                switch (c->opt) {
                case LT_MLP_SGD: w[i] -= lr * gi; break;
                case LT_MLP_MOMENTUM:
                    mo[i] = (float)MOMENTUM * mo[i] + gi;
                    w[i] -= lr * mo[i];
                    break;
                case LT_MLP_ADAM:
                    mo[i] = (float)(ADAM_B1 * mo[i] + (1 - ADAM_B1) * gi);
                    v[i] = (float)(ADAM_B2 * v[i] + (1 - ADAM_B2) * gi * gi);
                    w[i] -= (float)(lr * (mo[i] / c1) / (sqrt(v[i] / c2) + ADAM_EPS));
                    break;
                }
                g[i] = 0;
            }
        }
    }
}

static double accuracy(net *n, const lt_mlp_config *c, const lt_hpo_digits_set *s) {
    int right = 0;
    for (int i = 0; i < s->n; i++) {
        forward(n, c, &s->x[(size_t)i * LT_HPO_DIGITS_PIXELS], false, NULL);
        const float *p = n->a[n->nl];
        int best = 0;
        for (int o = 1; o < LT_HPO_DIGITS_CLASSES; o++)
            if (p[o] > p[best]) best = o;
        right += best == s->y[i];
    }
    return s->n ? (double)right / s->n : 0;
}

int lt_mlp_train(const lt_hpo_digits *d, const lt_mlp_config *c,
                 int (*on_epoch)(void *ctx, int64_t epoch, double val_acc), void *ctx,
                 double *val_acc, double *test_acc) {
    lt_hpo_rng r;
    lt_hpo_rng_seed(&r, c->seed);
    net n;
    int rc = net_init(&n, c, &r);
    if (rc) return rc;
    int ntr = d->train.n;
    int *order = malloc((size_t)ntr * sizeof *order);
    if (!order) {
        net_free(&n);
        return lt_error(LT_ENOMEM, "mlp-digits: out of memory");
    }
    for (int i = 0; i < ntr; i++) order[i] = i;
    int64_t t = 0;
    double va = 0;
    for (int epoch = 1; epoch <= c->epochs; epoch++) {
        for (int i = ntr - 1; i > 0; i--) { /* a new shuffle each epoch */
            int j = (int)(lt_hpo_rng_next(&r) % (uint64_t)(i + 1)), tmp = order[i];
            order[i] = order[j];
            order[j] = tmp;
        }
        for (int s = 0; s < ntr; s += c->batch) {
            int m = ntr - s < c->batch ? ntr - s : c->batch;
            for (int k = 0; k < m; k++) {
                int i = order[s + k];
                forward(&n, c, &d->train.x[(size_t)i * LT_HPO_DIGITS_PIXELS], true, &r);
                backward(&n, c, d->train.y[i]);
            }
            update(&n, c, m, ++t);
        }
        va = accuracy(&n, c, &d->val);
        if (on_epoch && on_epoch(ctx, epoch, va)) break;
    }
    if (val_acc) *val_acc = va;
    if (test_acc) *test_acc = accuracy(&n, c, &d->test);
    free(order);
    net_free(&n);
    return LT_OK;
}

/* The summed cross-entropy of images [0, m) of s (no dropout). */
static double loss_of(net *n, const lt_mlp_config *c, const lt_hpo_digits_set *s, int m) {
    double loss = 0;
    for (int i = 0; i < m; i++) {
        forward(n, c, &s->x[(size_t)i * LT_HPO_DIGITS_PIXELS], false, NULL);
        loss -= log(fmax(n->a[n->nl][s->y[i]], 1e-30));
    }
    return loss;
}

double lt__mlp_grad_check(const lt_hpo_digits_set *s, int m, const lt_mlp_config *cfg) {
    lt_mlp_config c = *cfg;
    c.dropout = 0;
    lt_hpo_rng r;
    lt_hpo_rng_seed(&r, c.seed);
    net n;
    if (net_init(&n, &c, &r)) return INFINITY;
    for (int i = 0; i < m; i++) { /* backpropagation's gradient sums */
        forward(&n, &c, &s->x[(size_t)i * LT_HPO_DIGITS_PIXELS], false, NULL);
        backward(&n, &c, s->y[i]);
    }
    double worst = 0;
    const float eps = 1e-2f;
    for (int l = 0; l < n.nl; l++) {
        for (int part = 0; part < 2; part++) {
            size_t k = part ? (size_t)n.dims[l + 1] : (size_t)n.dims[l + 1] * n.dims[l];
            float *w = part ? n.b[l] : n.w[l], *g = part ? n.gb[l] : n.gw[l];
            for (size_t i = 0; i < k; i += 7) { /* every 7th parameter */
                float keep = w[i];
                w[i] = keep + eps;
                double up = loss_of(&n, &c, s, m);
                w[i] = keep - eps;
                double down = loss_of(&n, &c, s, m);
                w[i] = keep;
                double num = (up - down) / (2 * eps), err = fabs(num - g[i]);
                double rel = err / (fabs(num) + fabs(g[i]) + 1e-2);
                if (rel > worst) worst = rel;
            }
        }
    }
    net_free(&n);
    return worst;
}
