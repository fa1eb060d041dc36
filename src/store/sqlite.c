/* sqlite.c - placeholder until the provider lands. */
#include <stdio.h>
#include "store/store.h"

static struct store *open_sqlite(const struct store_opts *o, char *err, size_t errlen)
{
	(void)o;
	snprintf(err, errlen, "the sqlite provider is not built yet");
	return NULL;
}

const struct store_provider store_sqlite = { "sqlite", open_sqlite };
