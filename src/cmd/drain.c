/* cmd/drain.c - leash drain, undrain: a replica gives up its leases and takes none. */
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

/* The presence rows REPLICA means: the row whose owner id it is, else
 * every row of that replica name (live ones only, when live_ms > 0).
 * Their owners into owners (borrowed from rows); *by_name says which. */
static size_t replica_rows(const struct store_replica *rows, size_t n, const char *replica,
                           int64_t now, int64_t live_ms, const char **owners, int *by_name)
{
	char name[STORE_NAME_MAX + 1];
	size_t k = 0;

	*by_name = 0;
	for (size_t i = 0; i < n; i++)
		if (strcmp(rows[i].owner, replica) == 0) {
			owners[0] = rows[i].owner;
			return 1;
		}
	*by_name = 1;
	for (size_t i = 0; i < n; i++) {
		presence_name_of(rows[i].owner, name, sizeof name);
		if (strcmp(name, replica) == 0 && (live_ms <= 0 || now - rows[i].heartbeat < live_ms))
			owners[k++] = rows[i].owner;
	}
	return k;
}

/* leash drain / undrain REPLICA: the presence rows' draining column (and,
 * for a drain by name without --until-restart, the name's drain marker,
 * so that the name's later processes start drained), and a "control" row
 * in the ledger under the job "@REPLICA" (owner and actor user@host). */
/* The command line: -c FILE, --until-restart (drain only), one REPLICA.
 * 0, or the exit code with the reason said. */
static int drain_args(int argc, char **argv, const char *cmd, int on, const char **path,
                      const char **replica, int *until_restart)
{
	static const struct option longopts[] = {
		{ "until-restart", no_argument, NULL, 'u' },
		{ NULL, 0, NULL, 0 },
	};
	int opt;

	while ((opt = getopt_long(argc, argv, "c:", longopts, NULL)) != -1) {
		if (opt == 'c') {
			*path = optarg;
		} else if (opt == 'u' && on) {
			*until_restart = 1;
		} else {
			fputs(cmd_usage, stderr);
			return EXIT_CONFIG;
		}
	}
	if (optind < argc)
		*replica = argv[optind++];
	if (!*replica || optind < argc) {
		fprintf(stderr, "leash %s: %s\n%s", cmd, *replica ? "one REPLICA only" : "which REPLICA? "
		        "(a replica's name or a full owner id, as leash status shows them)", cmd_usage);
		return EXIT_CONFIG;
	}
	if (!**replica || strlen(*replica) > STORE_NAME_MAX) {
		fprintf(stderr, "leash %s: REPLICA \"%s\": expected 1 to %d bytes\n", cmd, *replica,
		        STORE_NAME_MAX);
		return EXIT_CONFIG;
	}
	return 0;
}

static void say_drained(const char *replica, size_t k, int on, int by_name, int until_restart)
{
	if (on)
		printf("draining %s: %zu replica%s hand%s every lease off at the next safe point and "
		       "take%s none%s\n", replica, k, k == 1 ? "" : "s", k == 1 ? "s" : "",
		       k == 1 ? "s" : "", !by_name ? " until it restarts"
		       : until_restart ? " until they restart" : " (its new processes too, until leash "
		       "undrain)");
	else
		printf("undrained %s: %zu replica%s take%s leases again\n", replica, k,
		       k == 1 ? "" : "s", k == 1 ? "s" : "");
}

static int drain(int argc, char **argv, const char *cmd, int on)
{
	const char *path = NULL, *replica = NULL, **owners = NULL;
	struct store *s = NULL;
	struct store_replica *rows = NULL;
	struct cfg c;
	lua_State *L;
	char job[STORE_NAME_MAX + 1], text[STORE_NAME_MAX + 160];
	size_t n = 0, k;
	int64_t now = 0, at_db = 0, changed = 0;
	int rc, until_restart = 0, by_name;

	if ((rc = drain_args(argc, argv, cmd, on, &path, &replica, &until_restart)) != 0)
		return rc;
	if (cmd_setup(path, &L, &c) < 0)
		return EXIT_CONFIG;
	rc = EXIT_PROBLEMS;
	if (!(s = cmd_control_store(cmd, &c, &rc)))
		goto done;
	if (store_replicas(s, &rows, &n, &now) != STORE_OK) {
		fprintf(stderr, "leash %s: cannot read the replicas of the %s store: %s\n", cmd,
		        c.provider, s->err);
		goto done;
	}
	if (!(owners = malloc((n ? n : 1) * sizeof *owners))) {
		fprintf(stderr, "leash %s: out of memory\n", cmd);
		goto done;
	}
	/* A drain is for the live processes; an undrain clears any row. */
	k = replica_rows(rows, n, replica, now, on ? c.lease_ms : 0, owners, &by_name);
	if (on && k == 0) {
		fprintf(stderr, "leash %s: no live replica %s in the store (give a replica's name or a "
		        "full owner id, as leash status shows them)\n", cmd, replica);
		goto done;
	}
	if (store_drain(s, by_name && !(on && until_restart) ? replica : NULL, owners, k, on,
	                &changed, &at_db) != STORE_OK) {
		fprintf(stderr, "leash %s: %s\n", cmd, s->err);
		goto done;
	}
	if (!on && changed == 0) {
		fprintf(stderr, "leash %s: no replica %s in the store, and no drain of that name\n",
		        cmd, replica);
		goto done;
	}
	snprintf(job, sizeof job, "@%.*s", STORE_NAME_MAX - 1, replica);
	snprintf(text, sizeof text, "%s %s%s", cmd, replica,
	         on && until_restart && by_name ? " --until-restart" : "");
	if (cmd_record_control(s, cmd, job, at_db, 0, text) < 0)
		goto done;
	say_drained(replica, k, on, by_name, until_restart);
	rc = 0;
done:
	if (s)
		store_close(s);
	free(owners);
	store_free_replicas(rows, n);
	cfg_free(&c);
	lua_close(L);
	return rc;
}

int cmd_drain(int argc, char **argv)
{
	return drain(argc, argv, "drain", 1);
}

int cmd_undrain(int argc, char **argv)
{
	return drain(argc, argv, "undrain", 0);
}
