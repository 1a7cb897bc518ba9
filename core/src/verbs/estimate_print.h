/* fulgur estimate's output: the table and its assumptions as text, or one JSON object. */
#ifndef FG_ESTIMATE_PRINT_H
#define FG_ESTIMATE_PRINT_H

#include "estimate.h"

typedef struct fg_est_report {
    const char *config;
    int nodes, devices_per_node, ranks;
    const fg_est_link *link;
    const fg_est_model *model;
    double bucket_mb, limit_mb;
    const char *limit_source;
    const fg_est_prediction *pred; /* FG_EST_STRATEGIES of them */
} fg_est_report;

void fg_est_print_text(const fg_est_report *r, FILE *out);
void fg_est_print_json(const fg_est_report *r, FILE *out);
/* The index of the strategy of most samples a second whose memory fits (or whose fit is
 * unknown when no limit is known); -1 when none fits. */
int fg_est_fastest(const fg_est_report *r);
/* Removes the temporary folder of the child processes' files. */
void fg_est_remove_tree(const char *dir);

#endif
