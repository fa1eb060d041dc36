/* clock.h - the clocks the core reads, in integer milliseconds, and ISO times.
 *
 * Three clocks, each for one purpose: monotonic for timeouts and backoff,
 * boottime for lease deadlines (it keeps counting while the machine is
 * suspended, as the database's clock does), wall for fire times and logs.
 */
#ifndef LEASH_CLOCK_H
#define LEASH_CLOCK_H

#include <stddef.h>
#include <stdint.h>

int64_t clock_mono_ms(void);
int64_t clock_boot_ms(void);
int64_t clock_wall_ms(void);

/* Seconds with a fraction (microseconds), for Lua: core.now, core.monotonic. */
double clock_wall_s(void);
double clock_mono_s(void);

/* Writes wall_ms as UTC "2026-11-29T17:00:05Z", or with millis
 * "2026-11-29T17:00:05.123Z"; outside years 1 to 9999 (a corrupt row's) as
 * "<N>ms (out of range)".  Returns out. */
char *clock_iso(char *out, size_t len, int64_t wall_ms, int millis);

#endif
