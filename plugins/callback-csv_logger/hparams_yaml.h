/* hparams.yaml beside the metrics file, as Lightning's CSVLogger writes it: the run's
 * resolved configuration (host->config_entry), one YAML mapping per INI section:
 *   trainer:
 *     max_epochs: 3
 *   optimizer:
 *     name: sgd
 *     lr: 0.02
 * Numbers and true/false stay plain scalars; any other value is a double-quoted string.
 * Written to a temporary file and renamed. */
#ifndef HPARAMS_YAML_H
#define HPARAMS_YAML_H

#include <fulgur/plugin.h>

#include "csv_file.h"

/* Writes path from the host's config (output_file.h: PATH.tmp.PID renamed over it; a FIFO,
 * device or folder at path refused). */
fg_status hparams_yaml_write(const fg_host *host, const char *path, fg_error *err);

#endif
