/* looptune hpo --plot FILE.svg: the study as plain SVG text, no plotting
 * library. The first panel is the best value so far against the trial
 * number (a polyline, class "best", one vertex per trial from the first
 * complete one on) over every complete trial's value (circles, class
 * "trial"); then one panel per parameter, the metric against its value
 * (circles, class "param", data-param its name), on the axis the sampler
 * sees: a log parameter in log space, a categorical's choices in equal
 * cells. Failed trials are left out; a pruned one appears in the parameter
 * panels at its last intermediate value, marked class "param pruned". */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hpo_cli.h"

#define PW 360 /* a panel's size */
#define PH 260
#define ML 64 /* its plot area's margins */
#define MR 16
#define MT 28
#define MB 40

static void xml_text(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

/* A panel's frame at (ox, oy) with its title and axis labels. */
static void frame(FILE *f, int ox, int oy, const char *title, const char *xlo, const char *xhi,
                  const char *xname, double ylo, double yhi) {
    fprintf(f, "<g transform=\"translate(%d,%d)\">\n", ox, oy);
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
            "stroke=\"#888\"/>\n", ML, MT, PW - ML - MR, PH - MT - MB);
    fprintf(f, "<text x=\"%d\" y=\"18\" font-size=\"13\" text-anchor=\"middle\">", PW / 2);
    xml_text(f, title);
    fputs("</text>\n", f);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"10\">", ML, PH - MB + 14);
    xml_text(f, xlo);
    fprintf(f, "</text>\n<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"end\">",
            PW - MR, PH - MB + 14);
    xml_text(f, xhi);
    fprintf(f, "</text>\n<text x=\"%d\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">",
            (ML + PW - MR) / 2, PH - 8);
    xml_text(f, xname);
    fprintf(f, "</text>\n<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"end\">%.4g"
            "</text>\n", ML - 4, MT + 10, yhi);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"end\">%.4g</text>\n",
            ML - 4, PH - MB, ylo);
}

static double sx(double u) { return ML + u * (PW - ML - MR); }
static double sy(double v, double lo, double hi) {
    double t = hi > lo ? (v - lo) / (hi - lo) : 0.5;
    return PH - MB - t * (PH - MT - MB);
}

int lt_cli_hpo_plot(const lt_cli_hpo_run *r, const char *path, bool maximize) {
    const lt_hpo_space *s = r->space;
    const int size = lt_hpo_space_size(s);
    const lt_hpo_counts c = lt_hpo_study_counts(r->st);
    const int n = c.total;
    /* the metric's range over the trials that have one */
    double lo = INFINITY, hi = -INFINITY;
    for (int t = 0; t < n; t++) {
        lt_hpo_state st;
        double v;
        lt_hpo_study_trial(r->st, t, &st, &v, NULL, NULL);
        if ((st == LT_HPO_COMPLETE || st == LT_HPO_PRUNED) && isfinite(v)) {
            if (v < lo) lo = v;
            if (v > hi) hi = v;
        }
    }
    if (!(lo <= hi)) lo = 0, hi = 1;
    double pad = hi > lo ? 0.04 * (hi - lo) : 1;
    lo -= pad;
    hi += pad;
    FILE *f = fopen(path, "w");
    if (!f) return lt_cli_fail(r->cmd, "cannot write --plot %s: %s", path, strerror(errno));
    const int cols = size + 1 < 3 ? size + 1 : 3, rows = (size + 1 + cols - 1) / cols;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            cols * PW, rows * PH, cols * PW, rows * PH);
    /* best so far */
    char xhi[32], title[160];
    snprintf(xhi, sizeof xhi, "%d", n > 0 ? n - 1 : 0);
    snprintf(title, sizeof title, "%s: best so far (%s)", r->name,
             maximize ? "maximize" : "minimize");
    frame(f, 0, 0, title, "0", xhi, "trial", lo, hi);
    const double span = n > 1 ? n - 1 : 1;
    fputs("<polyline class=\"best\" fill=\"none\" stroke=\"#c0392b\" stroke-width=\"2\" "
          "points=\"", f);
    bool have = false;
    double best = 0;
    for (int t = 0; t < n; t++) {
        lt_hpo_state st;
        double v;
        lt_hpo_study_trial(r->st, t, &st, &v, NULL, NULL);
        if (st == LT_HPO_COMPLETE && (!have || (maximize ? v > best : v < best))) {
            best = v;
            have = true;
        }
        if (have) fprintf(f, "%.2f,%.2f ", sx(t / span), sy(best, lo, hi));
    }
    fputs("\"/>\n", f);
    for (int t = 0; t < n; t++) {
        lt_hpo_state st;
        double v;
        lt_hpo_study_trial(r->st, t, &st, &v, NULL, NULL);
        if (st != LT_HPO_COMPLETE) continue;
        fprintf(f, "<circle class=\"trial\" cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"#2c7fb8\">"
                "<title>trial %d: %.9g</title></circle>\n", sx(t / span), sy(v, lo, hi), t, v);
    }
    fputs("</g>\n", f);
    /* each parameter against the metric */
    double *u = malloc((size_t)(size ? size : 1) * sizeof *u);
    for (int i = 0; u && i < size; i++) {
        const lt_hpo_param *p = lt_hpo_space_param(s, i);
        char a[64] = "", b[64] = "";
        if (p->kind == LT_HPO_CATEGORICAL) {
            snprintf(a, sizeof a, "%s", p->n_choices ? p->choices[0] : "");
            snprintf(b, sizeof b, "%s", p->n_choices ? p->choices[p->n_choices - 1] : "");
        } else {
            snprintf(a, sizeof a, "%.4g%s", p->low, p->log ? " (log)" : "");
            snprintf(b, sizeof b, "%.4g", p->high);
        }
        int k = i + 1;
        frame(f, (k % cols) * PW, (k / cols) * PH, p->name, a, b, p->name, lo, hi);
        for (int t = 0; t < n; t++) {
            lt_hpo_state st;
            double v;
            const double *values;
            lt_hpo_study_trial(r->st, t, &st, &v, &values, NULL);
            if ((st != LT_HPO_COMPLETE && st != LT_HPO_PRUNED) || !isfinite(v) ||
                !isfinite(values[i]))
                continue;
            lt_hpo_space_encode(s, values, u);
            char val[64];
            lt_hpo_value_format(s, i, values[i], val, sizeof val);
            fprintf(f, "<circle class=\"param%s\" data-param=\"", st == LT_HPO_PRUNED ?
                    " pruned" : "");
            xml_text(f, p->name);
            fprintf(f, "\" cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"%s\"><title>trial %d: ",
                    sx(u[i]), sy(v, lo, hi), st == LT_HPO_PRUNED ? "#bbb" : "#2c7fb8", t);
            xml_text(f, val);
            fprintf(f, " -&gt; %.9g</title></circle>\n", v);
        }
        fputs("</g>\n", f);
    }
    free(u);
    fputs("</svg>\n", f);
    if (fclose(f) != 0) return lt_cli_fail(r->cmd, "cannot write --plot %s", path);
    return 0;
}
