/* tune.c - LEASH_TUNE_OFF, read once (tune.h). */
#include <stdlib.h>
#include <string.h>

#include "core/tune.h"

static const char *const names[TUNE_N] = {
	"warm", "huge", "tidy", "defer",
};

int tune_off(enum tune t)
{
	static int off = -1;            /* a bit a name; -1: not read yet */

	if (off < 0) {
		const char *v = getenv("LEASH_TUNE_OFF");

		off = 0;
		for (int i = 0; v && i < TUNE_N; i++) {
			size_t len = strlen(names[i]);

			for (const char *p = v; (p = strstr(p, names[i])); p += len)
				if ((p == v || p[-1] == ',') && (p[len] == ',' || !p[len]))
					off |= 1 << i;
		}
	}
	return off >> t & 1;
}
