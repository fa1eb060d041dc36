/* metrics.c - the Prometheus exposition of what the loop noted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

/* The process's resident set in bytes, from /proc/self/statm, or -1. */
static long long rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long long pages = -1, rss = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%lld %lld", &pages, &rss) != 2)
		rss = -1;
	fclose(f);
	return rss < 0 ? -1 : rss * 4096;
}

char *metrics_render(size_t *len)
{
	char *text = NULL;
	size_t n = 0;
	FILE *out = open_memstream(&text, &n);
	long long rss = rss_bytes();

	if (!out)
		return NULL;
	fputs("# HELP leash_build_info The leash version serving these metrics.\n"
	      "# TYPE leash_build_info gauge\n", out);
	fprintf(out, "leash_build_info{version=\"%s\"} 1\n", LEASH_VERSION);
	if (rss >= 0)
		fprintf(out, "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
		        "# TYPE process_resident_memory_bytes gauge\n"
		        "process_resident_memory_bytes %lld\n", rss);
	if (fclose(out) != 0) {
		free(text);
		return NULL;
	}
	*len = n;
	return text;
}
