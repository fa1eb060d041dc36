/* cmd/version.c - leash version, leash help. */
#include <getopt.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <limits.h>
#include <unistd.h>

#include <lauxlib.h>
#include <sqlite3.h>

#include "bind/bind.h"
#include "core/cfg.h"
#include "web/http.h"
#include "core/clock.h"
#include "plan/job.h"
#include "core/log.h"
#include "loop.h"
#include "core/lx.h"
#include "cluster/presence.h"
#include "launch/runner.h"
#include "store/store.h"
#include "web/view.h"
#include "cmd/cmd.h"

int cmd_version(int argc, char **argv)
{
	const struct store_provider *p;

	(void)argc;
	(void)argv;
	printf("leash %s\n", LEASH_VERSION);
	printf("%s\n", LUA_RELEASE);
	/* One line per provider's client library: SQLite, libpq, FreeTDS. */
	for (int i = 0; (p = store_provider_at(i)); i++) {
		const char *v;

		if (!p->client)
			continue;
		v = p->client_version ? p->client_version() : NULL;
		printf("%s %s\n", p->client, v ? v : "not installed");
	}
	return 0;
}

int cmd_help(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fputs(cmd_usage, stdout);
	return 0;
}
