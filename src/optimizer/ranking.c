/* The roofline and the tuning priority: where the budget goes. */
#include <math.h>

#include "looptune/optimizer.h"

double lt_roofline_fraction(double gb_s, double gflops, double bw_gb_s, double peak_gflops) {
    if (!(bw_gb_s > 0) || !(peak_gflops > 0) || !(gb_s > 0)) return 0.0;
    double intensity = gflops / gb_s; /* FLOP per byte */
    double attainable = fmin(peak_gflops, intensity * bw_gb_s);
    /* a kernel with no FLOPs (a copy) sits on the bandwidth roof */
    if (!(attainable > 0)) return gb_s / bw_gb_s;
    return gflops / attainable;
}

double lt_tuning_priority(double time_share, double roofline_fraction) {
    double distance = 1.0 - roofline_fraction;
    if (!(distance > 0.1)) distance = 0.1;
    return (time_share > 0 ? time_share : 0.0) * distance;
}
