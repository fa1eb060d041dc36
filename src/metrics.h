/* metrics.h - the counters, gauges and histograms /metrics shows.
 *
 * The parent's loop owns them: the scheduler, the election and the store
 * wrappers note what happened (metrics_note_*), and metrics_render writes
 * the lot in the Prometheus text format 0.0.4 for whoever serves /metrics.
 * Nothing here blocks, allocates on a fire's path or talks to the store.
 */
#ifndef LEASH_METRICS_H
#define LEASH_METRICS_H

#include <stddef.h>

/* The exposition text, malloc'd and NUL-terminated (*len without the NUL),
 * or NULL when out of memory. */
char *metrics_render(size_t *len);

#endif
