/* title.c - the name a leash process shows in ps (see title.h).
 *
 * ps reads a process's command line from the bytes its arguments occupy
 * (/proc/PID/cmdline): writing over them, never past the last one's end,
 * is how a process renames itself there. */
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "core/title.h"

/* The bytes ps shows, as title_init found them. */
static struct {
	char *area;             /* argv[0]'s first byte */
	size_t len;             /* up to the last argument's NUL */
	char *saved;            /* the bytes as they were */
} tt;

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
	tt.area = argv[0];
	tt.len = (size_t)(end - tt.area);
}

void title_set(const char *name)
{
	size_t n = strlen(name);

	prctl(PR_SET_NAME, name);
	if (!tt.area)
		return;
	if (!tt.saved && (tt.saved = malloc(tt.len)))
		memcpy(tt.saved, tt.area, tt.len);
	if (n > tt.len)
		n = tt.len;
	memcpy(tt.area, name, n);
	memset(tt.area + n, 0, tt.len - n);
}

void title_restore(void)
{
	if (tt.area && tt.saved)
		memcpy(tt.area, tt.saved, tt.len);
}
