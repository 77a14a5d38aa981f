/* The built-in analytic objectives of hyperparameter studies, with known
 * minima, for tests and benchmarks of the samplers: Branin (2-D, three
 * global minima of 0.397887) and Hartmann-6 (the 6-D unit cube, minimum
 * -3.32237), as given by Surjanovic and Bingham's Virtual Library of
 * Simulation Experiments. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "looptune/hpo.h"

static double value_of(const lt_hpo_space *s, const double *values, const char *name) {
    int i = lt_hpo_space_find(s, name);
    return i < 0 ? NAN : values[i];
}

/* a (x2 - b x1^2 + c x1 - r)^2 + s (1 - t) cos(x1) + s */
static double branin(const lt_hpo_space *s, const double *values) {
    const double pi = 3.14159265358979323846;
    double x1 = value_of(s, values, "x1"), x2 = value_of(s, values, "x2");
    double b = 5.1 / (4 * pi * pi), c = 5 / pi, t = 1 / (8 * pi);
    double q = x2 - b * x1 * x1 + c * x1 - 6;
    return q * q + 10 * (1 - t) * cos(x1) + 10;
}

/* -sum_i alpha_i exp(-sum_j A_ij (x_j - P_ij)^2) */
static double hartmann6(const lt_hpo_space *s, const double *values) {
    static const double alpha[4] = {1.0, 1.2, 3.0, 3.2};
    static const double A[4][6] = {{10, 3, 17, 3.5, 1.7, 8},
                                   {0.05, 10, 17, 0.1, 8, 14},
                                   {3, 3.5, 1.7, 10, 17, 8},
                                   {17, 8, 0.05, 10, 0.1, 14}};
    static const double P[4][6] = {{1312, 1696, 5569, 124, 8283, 5886},
                                   {2329, 4135, 8307, 3736, 1004, 9991},
                                   {2348, 1451, 3522, 2883, 3047, 6650},
                                   {4047, 8828, 8732, 5743, 1091, 381}};
    double x[6];
    for (int j = 0; j < 6; j++) {
        char name[4];
        snprintf(name, sizeof name, "x%d", j + 1);
        x[j] = value_of(s, values, name);
    }
    double f = 0;
    for (int i = 0; i < 4; i++) {
        double e = 0;
        for (int j = 0; j < 6; j++) {
            double d = x[j] - P[i][j] * 1e-4;
            e += A[i][j] * d * d;
        }
        f -= alpha[i] * exp(-e);
    }
    return f;
}

#define UNIT(n) "\"x" #n "\": {\"type\": \"float\", \"low\": 0, \"high\": 1}"

static const lt_hpo_objective objectives[] = {
    {"branin",
     "{\"x1\": {\"type\": \"float\", \"low\": -5, \"high\": 10},"
     " \"x2\": {\"type\": \"float\", \"low\": 0, \"high\": 15}}",
     0.397887357729739, branin},
    {"hartmann6",
     "{" UNIT(1) ", " UNIT(2) ", " UNIT(3) ", " UNIT(4) ", " UNIT(5) ", " UNIT(6) "}",
     -3.32236801141551, hartmann6},
};

const lt_hpo_objective *lt_hpo_objective_find(const char *name) {
    for (size_t i = 0; i < sizeof objectives / sizeof *objectives; i++)
        if (!strcmp(objectives[i].name, name)) return &objectives[i];
    return NULL;
}

const char *lt_hpo_objective_names(void) { return "branin, hartmann6"; }
