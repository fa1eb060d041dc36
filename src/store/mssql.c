/* mssql.c - placeholder until the provider lands. */
#include <stdio.h>
#include "store/store.h"

static struct store *open_mssql(const struct store_opts *o, char *err, size_t errlen)
{
	(void)o;
	snprintf(err, errlen, "the mssql provider is not built yet");
	return NULL;
}

const struct store_provider store_mssql = { "mssql", open_mssql };
