/* The batch-norm kernels of [model] sync_batchnorm (kernels/cpu/batchnorm_sync.c): a batch
 * cut into two replicas of unequal size whose statistics and backward sums are added up
 * (what the replica all-reduce does) must give the fused kernels' (batchnorm.c) results on
 * the whole batch, and their gradients must be those of the whole batch's function:
 * central differences of a float64 reference of batch norm over all rows, for a loss
 * sum(w * y) with a random w (so dy = w). Usage: test_batchnorm_sync <case> */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cpu_kernels.h"

enum { N = 7, C = 3, SP = 5, CUT = 3 }; /* replica 0: rows [0, CUT), replica 1: [CUT, N) */
#define MOMENTUM 0.1f
#define EPS 1e-5f

static uint64_t rng_state = 777;

static double uniform(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) * 0x1.0p-53;
}

static void fill(float *x, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(lo + (hi - lo) * uniform());
}

static double max_abs_diff(const float *a, const float *b, size_t n)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        worst = d > worst ? d : worst;
    }
    return worst;
}

static size_t row(int r) { return (size_t)r * C * SP; }

typedef struct inputs {
    float x[N * C * SP], gamma[C], beta[C], dy[N * C * SP];
} inputs;

static void make_inputs(inputs *in)
{
    fill(in->x, N * C * SP, 1.0, 5.0); /* a mean well away from 0: the sums must not cancel */
    fill(in->gamma, C, 0.5, 1.5);
    fill(in->beta, C, -0.5, 0.5);
    fill(in->dy, N * C * SP, -1.0, 1.0);
}

/* The two replicas' statistics, summed: what every replica holds after the all-reduce. */
static void summed_stats(fg_cpu_pool *pool, const float *x, double *total)
{
    double part[2 * C + 1];
    fg_cpu_batchnorm_stats(pool, CUT, C, SP, x, total);
    fg_cpu_batchnorm_stats(pool, N - CUT, C, SP, x + row(CUT), part);
    for (int i = 0; i < 2 * C + 1; i++)
        total[i] += part[i];
}

/* Forward of both replicas from the summed statistics: y, and replica 0's saved statistics
 * and running statistics (replica 1's are checked equal). */
static void split_forward(fg_cpu_pool *pool, const inputs *in, float *y, float *mean,
                          float *invstd, float *rmean, float *rvar)
{
    double total[2 * C + 1];
    summed_stats(pool, in->x, total);
    float mean1[C], invstd1[C], rmean1[C], rvar1[C];
    for (int c = 0; c < C; c++)
        rmean[c] = rmean1[c] = 0.25f, rvar[c] = rvar1[c] = 2.0f;
    fg_cpu_batchnorm_apply(pool, CUT, C, SP, in->x, total, in->gamma, in->beta, rmean, rvar,
                           MOMENTUM, EPS, mean, invstd, y);
    fg_cpu_batchnorm_apply(pool, N - CUT, C, SP, in->x + row(CUT), total, in->gamma, in->beta,
                           rmean1, rvar1, MOMENTUM, EPS, mean1, invstd1, y + row(CUT));
    CHECK(memcmp(mean, mean1, sizeof mean1) == 0 && memcmp(invstd, invstd1, sizeof invstd1) == 0,
          "the replicas normalise with different statistics");
    CHECK(memcmp(rmean, rmean1, sizeof rmean1) == 0 && memcmp(rvar, rvar1, sizeof rvar1) == 0,
          "the replicas' running statistics differ");
}

static int case_forward(void)
{
    fg_cpu_pool *pool = NULL;
    CHECK_EQ(fg_cpu_pool_create(1, &pool), 0);
    inputs in;
    make_inputs(&in);
    float y[N * C * SP], mean[C], invstd[C], rmean[C], rvar[C];
    split_forward(pool, &in, y, mean, invstd, rmean, rvar);
    float fy[N * C * SP], fmean[C], finvstd[C], frmean[C], frvar[C];
    for (int c = 0; c < C; c++)
        frmean[c] = 0.25f, frvar[c] = 2.0f;
    fg_cpu_batchnorm_forward(pool, 1, N, C, SP, in.x, in.gamma, in.beta, frmean, frvar,
                             MOMENTUM, EPS, fmean, finvstd, fy);
    CHECK(max_abs_diff(y, fy, N * C * SP) <= 2e-6, "y differs from the fused kernel's by %g",
          max_abs_diff(y, fy, N * C * SP));
    CHECK(max_abs_diff(mean, fmean, C) <= 1e-6, "mean differs by %g", max_abs_diff(mean, fmean, C));
    CHECK(max_abs_diff(invstd, finvstd, C) <= 1e-5 * finvstd[0], "invstd differs by %g",
          max_abs_diff(invstd, finvstd, C));
    CHECK(max_abs_diff(rmean, frmean, C) <= 1e-6, "running mean differs by %g",
          max_abs_diff(rmean, frmean, C));
    CHECK(max_abs_diff(rvar, frvar, C) <= 1e-6, "running var differs by %g",
          max_abs_diff(rvar, frvar, C));
    /* the count is the whole batch's: a replica alone would normalise differently */
    double alone[2 * C + 1];
    fg_cpu_batchnorm_stats(pool, CUT, C, SP, in.x, alone);
    CHECK_NEAR(alone[2 * C], (double)CUT * SP, 0.0);
    fg_cpu_pool_destroy(pool);
    return 0;
}

/* Backward of both replicas: dx, and dgamma and dbeta summed over the replicas (what the
 * strategies' gradient reduction does). */
static void split_backward(fg_cpu_pool *pool, const inputs *in, const float *mean,
                           const float *invstd, float *dx, float *dgamma, float *dbeta)
{
    double total[2 * C + 1], part[2 * C + 1];
    float dg1[C], db1[C];
    fg_cpu_batchnorm_backward_reduce(pool, CUT, C, SP, in->x, mean, invstd, in->dy, total,
                                     dgamma, dbeta, 0);
    fg_cpu_batchnorm_backward_reduce(pool, N - CUT, C, SP, in->x + row(CUT), mean, invstd,
                                     in->dy + row(CUT), part, dg1, db1, 0);
    for (int i = 0; i < 2 * C + 1; i++)
        total[i] += part[i];
    CHECK_NEAR(total[2 * C], (double)N * SP, 0.0);
    for (int c = 0; c < C; c++)
        dgamma[c] += dg1[c], dbeta[c] += db1[c];
    fg_cpu_batchnorm_backward_apply(pool, CUT, C, SP, in->x, in->gamma, mean, invstd, in->dy,
                                    total, dx);
    fg_cpu_batchnorm_backward_apply(pool, N - CUT, C, SP, in->x + row(CUT), in->gamma, mean,
                                    invstd, in->dy + row(CUT), total, dx + row(CUT));
}

static int case_backward(void)
{
    fg_cpu_pool *pool = NULL;
    CHECK_EQ(fg_cpu_pool_create(1, &pool), 0);
    inputs in;
    make_inputs(&in);
    float y[N * C * SP], mean[C], invstd[C], rmean[C], rvar[C];
    split_forward(pool, &in, y, mean, invstd, rmean, rvar);
    float dx[N * C * SP], dgamma[C], dbeta[C];
    split_backward(pool, &in, mean, invstd, dx, dgamma, dbeta);
    float fdx[N * C * SP], fdgamma[C], fdbeta[C];
    fg_cpu_batchnorm_backward(pool, N, C, SP, in.x, in.gamma, mean, invstd, in.dy, fdx, fdgamma,
                              fdbeta, 0);
    CHECK(max_abs_diff(dx, fdx, N * C * SP) <= 1e-6, "dx differs from the fused kernel's by %g",
          max_abs_diff(dx, fdx, N * C * SP));
    CHECK(max_abs_diff(dgamma, fdgamma, C) <= 1e-5, "dgamma differs by %g",
          max_abs_diff(dgamma, fdgamma, C));
    CHECK(max_abs_diff(dbeta, fdbeta, C) <= 1e-5, "dbeta differs by %g",
          max_abs_diff(dbeta, fdbeta, C));
    /* accumulate adds to what is there */
    float acc_g[C] = {1, 2, 3}, acc_b[C] = {-1, -2, -3};
    double sums[2 * C + 1];
    fg_cpu_batchnorm_backward_reduce(pool, N, C, SP, in.x, mean, invstd, in.dy, sums, acc_g,
                                     acc_b, 1);
    for (int c = 0; c < C; c++) {
        CHECK_NEAR(acc_g[c], (c + 1) + fdgamma[c], 1e-5);
        CHECK_NEAR(acc_b[c], -(c + 1) + fdbeta[c], 1e-5);
    }
    fg_cpu_pool_destroy(pool);
    return 0;
}

/* The loss sum(w * y) of float64 batch norm over the whole batch. */
static double ref_loss(const double *x, const double *gamma, const double *beta,
                       const float *w)
{
    double loss = 0.0, count = (double)N * SP;
    for (int c = 0; c < C; c++) {
        double mean = 0.0, var = 0.0;
        for (int n = 0; n < N; n++)
            for (int s = 0; s < SP; s++)
                mean += x[row(n) + (size_t)c * SP + s];
        mean /= count;
        for (int n = 0; n < N; n++)
            for (int s = 0; s < SP; s++) {
                double d = x[row(n) + (size_t)c * SP + s] - mean;
                var += d * d;
            }
        double invstd = 1.0 / sqrt(var / count + (double)EPS);
        for (int n = 0; n < N; n++)
            for (int s = 0; s < SP; s++) {
                size_t i = row(n) + (size_t)c * SP + s;
                loss += w[i] * ((x[i] - mean) * invstd * gamma[c] + beta[c]);
            }
    }
    return loss;
}

/* d loss / d v[i] by central differences, v one of the reference's inputs. */
static double numeric(double *v, size_t i, const double *x, const double *gamma,
                      const double *beta, const float *w)
{
    const double h = 1e-4;
    double keep = v[i];
    v[i] = keep + h;
    double up = ref_loss(x, gamma, beta, w);
    v[i] = keep - h;
    double down = ref_loss(x, gamma, beta, w);
    v[i] = keep;
    return (up - down) / (2 * h);
}

static int case_gradcheck(void)
{
    fg_cpu_pool *pool = NULL;
    CHECK_EQ(fg_cpu_pool_create(1, &pool), 0);
    inputs in;
    make_inputs(&in);
    float y[N * C * SP], mean[C], invstd[C], rmean[C], rvar[C];
    split_forward(pool, &in, y, mean, invstd, rmean, rvar);
    float dx[N * C * SP], dgamma[C], dbeta[C]; /* in.dy is w: dy of sum(w * y) */
    split_backward(pool, &in, mean, invstd, dx, dgamma, dbeta);
    double x[N * C * SP], gamma[C], beta[C], worst = 0.0;
    for (int i = 0; i < N * C * SP; i++)
        x[i] = in.x[i];
    for (int c = 0; c < C; c++)
        gamma[c] = in.gamma[c], beta[c] = in.beta[c];
    for (int i = 0; i < N * C * SP; i++) {
        double d = fabs(dx[i] - numeric(x, (size_t)i, x, gamma, beta, in.dy));
        worst = d > worst ? d : worst;
    }
    CHECK(worst <= 1e-4, "dx against central differences: %g", worst);
    for (int c = 0; c < C; c++) {
        CHECK_NEAR(dgamma[c], numeric(gamma, (size_t)c, x, gamma, beta, in.dy), 1e-4);
        CHECK_NEAR(dbeta[c], numeric(beta, (size_t)c, x, gamma, beta, in.dy), 1e-4);
    }
    /* a replica that normalised with its own statistics has another gradient */
    float own[CUT * C * SP], m0[C], s0[C], y0[CUT * C * SP];
    double stats[2 * C + 1], sums[2 * C + 1];
    fg_cpu_batchnorm_stats(pool, CUT, C, SP, in.x, stats);
    fg_cpu_batchnorm_apply(pool, CUT, C, SP, in.x, stats, in.gamma, in.beta, NULL, NULL,
                           MOMENTUM, EPS, m0, s0, y0);
    fg_cpu_batchnorm_backward_reduce(pool, CUT, C, SP, in.x, m0, s0, in.dy, sums, NULL, NULL, 0);
    fg_cpu_batchnorm_backward_apply(pool, CUT, C, SP, in.x, in.gamma, m0, s0, in.dy, sums, own);
    CHECK(max_abs_diff(own, dx, CUT * C * SP) > 1e-3,
          "a replica's own statistics gave the whole batch's gradient");
    fg_cpu_pool_destroy(pool);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(void);
    } cases[] = {{"forward", case_forward}, {"backward", case_backward},
                 {"gradcheck", case_gradcheck}};
    for (size_t i = 0; argc == 2 && i < sizeof cases / sizeof *cases; i++)
        if (strcmp(argv[1], cases[i].name) == 0) {
            cases[i].run();
            return fg_test_report(argv[1]);
        }
    fprintf(stderr, "usage: %s CASE\n", argv[0]);
    return 2;
}
