/* title.c - the name a leash process shows in ps (see title.h).
 *
 * ps reads a process's command line from the bytes its arguments occupy
 * (/proc/PID/cmdline): writing over them, never past the last one's end,
 * is how a process renames itself there. */
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "core/title.h"

static char *area;              /* argv[0]'s first byte */
static size_t area_len;         /* up to the last argument's NUL */
static char *saved;             /* the bytes as they were */

void title_init(int argc, char **argv)
{
	char *end;

	if (argc < 1 || !argv[0])
		return;
	end = argv[0] + strlen(argv[0]);
	/* Only arguments that follow one another in memory, as the kernel
	 * lays them out. */
	for (int i = 1; i < argc && argv[i] == end + 1; i++)
		end = argv[i] + strlen(argv[i]);
	area = argv[0];
	area_len = (size_t)(end - area);
}

void title_set(const char *name)
{
	size_t n = strlen(name);

	prctl(PR_SET_NAME, name);
	if (!area)
		return;
	if (!saved && (saved = malloc(area_len)))
		memcpy(saved, area, area_len);
	if (n > area_len)
		n = area_len;
	memcpy(area, name, n);
	memset(area + n, 0, area_len - n);
}

void title_restore(void)
{
	if (area && saved)
		memcpy(area, saved, area_len);
}
