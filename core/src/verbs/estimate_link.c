/* The alpha-beta link model of fulgur estimate: --link presets and RATE,LATENCY specs, a
 * fit to a measured link file, and the ring collectives' times. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "estimate.h"

/* Published per-direction figures; alpha is a typical small-message latency. */
static const struct { const char *name; double bytes_per_s, alpha_s; const char *what; } presets[] = {
    {"nvlink", 450e9, 3e-6, "NVLink 4 (H100 SXM): 450 GB/s each way, 3 us"},
    {"ib-ndr", 50e9, 5e-6, "InfiniBand NDR: 400 Gbit/s, 5 us"},
    {"ib-hdr", 25e9, 5e-6, "InfiniBand HDR: 200 Gbit/s, 5 us"},
    {"100gbe", 12.5e9, 10e-6, "100 Gbit Ethernet: 12.5 GB/s, 10 us"},
    {"10gbe", 1.25e9, 20e-6, "10 Gbit Ethernet: 1.25 GB/s, 20 us"},
    {"1gbe", 125e6, 50e-6, "1 Gbit Ethernet: 125 MB/s, 50 us"},
};

static int unit_scale(const char *unit, const char *const *names, const double *scales, int n,
                      double *out)
{
    for (int i = 0; i < n; i++)
        if (strcmp(unit, names[i]) == 0) {
            *out = scales[i];
            return 1;
        }
    return 0;
}

/* "1gbit", "200mbit", "12.5GBps" -> bytes a second */
static fg_status parse_rate(const char *spec, const char *text, double *out, fg_error *err)
{
    static const char *const names[] = {"bit", "kbit", "mbit", "gbit", "tbit", "Bps", "KBps", "MBps", "GBps"};
    static const double scales[] = {1.0 / 8, 1e3 / 8, 1e6 / 8, 1e9 / 8, 1e12 / 8, 1, 1e3, 1e6, 1e9};
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    double scale = 0;
    if (end == text || errno || !(v > 0))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "--link '%s': the rate '%s' is not a "
                            "positive number with a unit", spec, text);
    if (!unit_scale(end, names, scales, 9, &scale))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "--link '%s': unknown rate unit '%s' (bit, "
                            "kbit, mbit, gbit, tbit, Bps, KBps, MBps, GBps)", spec, end);
    *out = v * scale;
    return FG_OK;
}

/* "50us", "1ms", "0" -> seconds */
static fg_status parse_latency(const char *spec, const char *text, double *out, fg_error *err)
{
    static const char *const names[] = {"ns", "us", "ms", "s"};
    static const double scales[] = {1e-9, 1e-6, 1e-3, 1};
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end), scale = 0;
    if (end == text || errno || !(v >= 0))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "--link '%s': the latency '%s' is not a "
                            "number >= 0 with a unit", spec, text);
    if (!*end && v == 0) scale = 1;
    else if (!unit_scale(end, names, scales, 4, &scale))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "--link '%s': unknown latency unit '%s' "
                            "(ns, us, ms, s)", spec, end);
    *out = v * scale;
    return FG_OK;
}

static fg_status preset(const char *spec, fg_est_link *out, fg_error *err)
{
    char names[256] = "";
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        if (strcmp(spec, presets[i].name) == 0) {
            out->alpha_s = presets[i].alpha_s;
            out->bytes_per_s = presets[i].bytes_per_s;
            snprintf(out->source, sizeof out->source, "--link %s: %s", spec, presets[i].what);
            return FG_OK;
        }
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                 presets[i].name);
    }
    return fg_error_set(err, FG_INVALID_ARGUMENT, "--link '%s': unknown preset (presets: %s; or "
                        "RATE,LATENCY such as 1gbit,50us)", spec, names);
}

fg_status fg_est_link_parse(const char *spec, fg_est_link *out, fg_error *err)
{
    memset(out, 0, sizeof *out);
    if (!spec || !*spec)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "--link needs a preset or RATE,LATENCY");
    const char *comma = strchr(spec, ',');
    if (!comma && !isdigit((unsigned char)spec[0]) && spec[0] != '.') return preset(spec, out, err);
    char rate[64];
    size_t n = comma ? (size_t)(comma - spec) : strlen(spec);
    if (n >= sizeof rate)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "--link '%s': the rate is too long", spec);
    memcpy(rate, spec, n);
    rate[n] = '\0';
    fg_status st = parse_rate(spec, rate, &out->bytes_per_s, err);
    if (st == FG_OK && !comma)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "--link '%s': needs RATE,LATENCY (e.g. "
                            "1gbit,50us)", spec);
    if (st == FG_OK) st = parse_latency(spec, comma + 1, &out->alpha_s, err);
    if (st == FG_OK)
        snprintf(out->source, sizeof out->source, "--link %s: %.6g bytes/s, alpha %.3g s", spec,
                 out->bytes_per_s, out->alpha_s);
    return st;
}

/* Sums of a least-squares line t = a + b x. */
typedef struct fit_sums { double n, x, y, xx, xy; } fit_sums;

static fg_status fit_line(const char *path, int ranks, const fit_sums *s, fg_est_link *out,
                          fg_error *err)
{
    double det = s->n * s->xx - s->x * s->x;
    if (s->n < 2 || det <= 0)
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: needs at least two measurements of "
                            "different sizes to fit latency and bandwidth", path);
    double b = (s->n * s->xy - s->x * s->y) / det, a = (s->y - b * s->x) / s->n;
    if (!(b > 0))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s: the times do not grow with the size "
                            "(slope %.3g s/byte): no bandwidth can be fitted", path, b);
    /* t = 2(p-1) alpha + 2(p-1)/p bytes beta */
    double k = 2.0 * (ranks - 1);
    out->alpha_s = a > 0 ? a / k : 0;
    out->bytes_per_s = k / ranks / b;
    snprintf(out->source, sizeof out->source, "fitted from %s (%d points, %d ranks): %.6g bytes/s, "
             "alpha %.3g s", path, (int)s->n, ranks, out->bytes_per_s, out->alpha_s);
    return FG_OK;
}

static fg_status read_link_line(const char *path, int line, char *text, int *ranks, fit_sums *s,
                                fg_error *err)
{
    char *p = text;
    while (isspace((unsigned char)*p)) p++;
    if (!*p || *p == '#') return FG_OK;
    int r;
    if (sscanf(p, "ranks = %d", &r) == 1) {
        if (r < 2) return fg_error_set(err, FG_INVALID_ARGUMENT, "%s:%d: ranks must be >= 2", path, line);
        *ranks = r;
        return FG_OK;
    }
    double bytes, secs;
    char extra;
    if (sscanf(p, "%lf %lf %c", &bytes, &secs, &extra) != 2 || !(bytes > 0) || !(secs > 0))
        return fg_error_set(err, FG_INVALID_ARGUMENT, "%s:%d: expected 'ranks = P' or 'BYTES "
                            "SECONDS' (both > 0), got '%s'", path, line, p);
    s->n += 1;
    s->x += bytes;
    s->y += secs;
    s->xx += bytes * bytes;
    s->xy += bytes * secs;
    return FG_OK;
}

fg_status fg_est_link_fit_file(const char *path, fg_est_link *out, fg_error *err)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (!f) return fg_error_set(err, FG_NOT_FOUND, "--link-file %s: %s", path, strerror(errno));
    char text[512];
    int line = 0, ranks = 0;
    fit_sums s = {0};
    fg_status st = FG_OK;
    while (st == FG_OK && fgets(text, sizeof text, f)) {
        line++;
        text[strcspn(text, "\r\n")] = '\0';
        st = read_link_line(path, line, text, &ranks, &s, err);
    }
    fclose(f);
    if (st == FG_OK && ranks == 0)
        st = fg_error_set(err, FG_INVALID_ARGUMENT, "%s: no 'ranks = P' line (the ranks the "
                          "all-reduces ran on)", path);
    return st == FG_OK ? fit_line(path, ranks, &s, out, err) : st;
}

double fg_est_all_reduce_s(const fg_est_link *l, int p, double bytes)
{
    if (p < 2) return 0;
    return 2.0 * (p - 1) * l->alpha_s + 2.0 * (p - 1) / p * bytes / l->bytes_per_s;
}

double fg_est_reduce_scatter_s(const fg_est_link *l, int p, double bytes)
{
    if (p < 2) return 0;
    return (p - 1) * l->alpha_s + (double)(p - 1) / p * bytes / l->bytes_per_s;
}

double fg_est_all_gather_s(const fg_est_link *l, int p, double bytes)
{
    return fg_est_reduce_scatter_s(l, p, bytes);
}

double fg_est_p2p_s(const fg_est_link *l, double bytes)
{
    return l->alpha_s + bytes / l->bytes_per_s;
}
