/* clock.c - one reader for every clock, and ISO 8601 UTC times. */
#include <stdio.h>
#include <time.h>

#include "core/clock.h"

static int64_t read_us(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t clock_mono_ms(void) { return read_us(CLOCK_MONOTONIC) / 1000; }
int64_t clock_boot_ms(void) { return read_us(CLOCK_BOOTTIME) / 1000; }
int64_t clock_wall_ms(void) { return read_us(CLOCK_REALTIME) / 1000; }
double clock_wall_s(void) { return read_us(CLOCK_REALTIME) / 1e6; }
double clock_mono_s(void) { return read_us(CLOCK_MONOTONIC) / 1e6; }

/* The instants an ISO 8601 date with four year digits can name: year 1 to
 * 9999 (a corrupt row may hold any int64). */
#define ISO_MIN_MS (-62135596800000LL)
#define ISO_MAX_MS 253402300799999LL

char *clock_iso(char *out, size_t len, int64_t wall_ms, int millis)
{
	int64_t secs;
	time_t t;
	struct tm tm;
	size_t n;

	if (wall_ms < ISO_MIN_MS || wall_ms > ISO_MAX_MS) {
		snprintf(out, len, "%lldms (out of range)", (long long)wall_ms);
		return out;
	}
	secs = wall_ms >= 0 ? wall_ms / 1000 : (wall_ms - 999) / 1000;
	t = (time_t)secs;
	gmtime_r(&t, &tm);
	n = strftime(out, len, "%Y-%m-%dT%H:%M:%S", &tm);
	if (millis)
		snprintf(out + n, len - n, ".%03dZ", (int)(wall_ms - secs * 1000));
	else
		snprintf(out + n, len - n, "Z");
	return out;
}
