/* cmd/repair.c - leash repair JOB: resets a job's corrupt rows (store.h's
 * bounds) in one store call, audited as the controls are. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lua.h>

#include "core/cfg.h"
#include "store/store.h"
#include "cmd/cmd.h"

/* What was done, for the ledger's row and the command's answer. */
static void describe(char *out, size_t len, const struct store_repair *r)
{
	size_t n = 0;

	out[0] = '\0';
	if (r->lease_bad) {
		n += (size_t)snprintf(out + n, len - n, "token %lld -> %lld", (long long)r->token,
		                      (long long)r->new_token);
		if (r->last_fire != STORE_NO_FIRE &&
		    (r->last_fire < STORE_NO_FIRE || r->last_fire > STORE_TIME_MAX) && n < len)
			n += (size_t)snprintf(out + n, len - n, ", last_fire %lld -> none",
			                      (long long)r->last_fire);
		if (n < len)
			n += (size_t)snprintf(out + n, len - n, ", the lease freed");
	}
	if (r->dropped && n < len)
		snprintf(out + n, len - n, "%s%lld corrupt ledger row%s dropped", n ? "; " : "",
		         (long long)r->dropped, r->dropped == 1 ? "" : "s");
}

int cmd_repair(int argc, char **argv)
{
	const char *path = NULL, *job = NULL;
	struct store *s = NULL;
	struct store_repair r;
	struct cfg c;
	lua_State *L;
	char what[256], text[300];
	int opt, rc = EXIT_PROBLEMS;

	while ((opt = getopt(argc, argv, "c:")) != -1) {
		if (opt != 'c') {
			fputs(cmd_usage, stderr);
			return EXIT_CONFIG;
		}
		path = optarg;
	}
	if (optind < argc)
		job = argv[optind++];
	if (!job || optind < argc) {
		fprintf(stderr, "leash repair: %s\n%s", job ? "one JOB only" : "which JOB?", cmd_usage);
		return EXIT_CONFIG;
	}
	if (cmd_setup(path, &L, &c) < 0)
		return EXIT_CONFIG;
	if (!(s = cmd_control_store("repair", &c, &rc)))
		goto done;
	rc = EXIT_PROBLEMS;
	if (store_repair(s, job, &r) != STORE_OK) {
		fprintf(stderr, "leash repair: %s\n", s->err);
		goto done;
	}
	if (!r.found && !r.dropped) {
		if (cmd_local_job(&c, job))
			fprintf(stderr, "leash repair: %s has no lease row and no corrupt ledger rows: "
			        "nothing to repair\n", job);
		else
			fprintf(stderr, "leash repair: no job %s in the store or in %s/\n", job, c.jobs);
		goto done;
	}
	if (!r.lease_bad && !r.dropped) {
		fprintf(stderr, "leash repair: nothing to repair: %s's lease row (token %lld) and "
		        "ledger rows are within bounds\n", job, (long long)r.token);
		goto done;
	}
	describe(what, sizeof what, &r);
	snprintf(text, sizeof text, "repair: %s", what);
	if (cmd_record_control(s, "repair", job, r.now, r.found ? r.new_token : 0, text) < 0)
		goto done;
	printf("repaired %s: %s\n", job, what);
	rc = 0;
done:
	return cmd_end(s, &c, L, rc);
}
