/* store_bench.c - lease store latency next to the floors of the same
 * connection: a bare SELECT 1 round trip and a bare durable UPDATE of one
 * row, by its primary key, in a side table shaped like the lease table.
 * Usage: store_bench [-n N] PROVIDER[@LABEL]=SPEC ...
 *   sqlite=PATH   postgres=CONNINFO   mssql=host:port:user:password:database
 * LABEL (no '=') heads that provider's table instead of its name.
 * Each op runs N times, interleaved in rounds so drift hits all alike. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"

enum { OP_SELECT, OP_UPDATE, OP_ACQ_MINE, OP_ACQ_OTHER, OP_RENEW, OP_RENEW_ALL,
       OP_RELEASE, OP_MAX };
static const char *const op_name[OP_MAX] = {
	"floor: SELECT 1", "floor: UPDATE 1 row", "try_acquire (holder)",
	"try_acquire (held)", "renew", "renew_all (100)", "release",
};

#define NAMES 100
#define LEASE_MS 60000

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int one(struct store *s, int op, const char *const *names, int64_t *tokens,
               double *us)
{
	struct lease_info in;
	double t0;
	int rc;

	if (op == OP_RELEASE && store_try_acquire(s, "bench-rel", "me", LEASE_MS, &in) != STORE_OK)
		return STORE_ERR;
	t0 = now_us();
	switch (op) {
	case OP_SELECT: rc = store_floor(s, STORE_FLOOR_SELECT); break;
	case OP_UPDATE: rc = store_floor(s, STORE_FLOOR_UPDATE); break;
	case OP_ACQ_MINE: rc = store_try_acquire(s, "bench-a", "me", LEASE_MS, &in); break;
	case OP_ACQ_OTHER:
		rc = store_try_acquire(s, "bench-b", "me", LEASE_MS, &in);
		rc = rc == STORE_NO ? STORE_OK : STORE_ERR;
		break;
	case OP_RENEW: rc = store_renew(s, "bench-a", "me", LEASE_MS, &in); break;
	case OP_RENEW_ALL: rc = store_renew_all(s, "me", names, NAMES, LEASE_MS, tokens); break;
	default: rc = store_release(s, "bench-rel", "me"); break;
	}
	*us = now_us() - t0;
	return rc == STORE_ERR ? STORE_ERR : STORE_OK;
}

static int bench(const char *provider, const char *label, const struct store_opts *o, int n)
{
	char err[STORE_ERR_MAX], buf[NAMES][32];
	const char *names[NAMES];
	int64_t tokens[NAMES];
	struct lease_info in;
	double *lat[OP_MAX] = { 0 }, total[OP_MAX] = { 0 }, med[OP_MAX];
	struct store *s = store_open(provider, o, err, sizeof err);
	int rc = -1, round = 50;

	if (!s) {
		fprintf(stderr, "store_bench: %s\n", err);
		return -1;
	}
	for (int i = 0; i < NAMES; i++) {
		snprintf(buf[i], sizeof buf[i], "bench-many-%03d", i);
		names[i] = buf[i];
		if (store_try_acquire(s, names[i], "me", LEASE_MS, &in) != STORE_OK)
			goto store_err;
	}
	if (store_try_acquire(s, "bench-a", "me", LEASE_MS, &in) != STORE_OK ||
	    store_try_acquire(s, "bench-b", "other", 3600000, &in) == STORE_ERR)
		goto store_err;
	for (int op = 0; op < OP_MAX; op++)
		if (!(lat[op] = malloc(sizeof(double) * (size_t)n))) {
			fprintf(stderr, "store_bench: out of memory\n");
			goto fail;
		}
	for (int op = 0; op < OP_MAX; op++) {        /* warm up */
		double us;

		for (int i = 0; i < 20; i++)
			if (one(s, op, names, tokens, &us) < 0)
				goto store_err;
	}
	for (int done = 0; done < n; done += round) {
		int m = n - done < round ? n - done : round;

		for (int op = 0; op < OP_MAX; op++)
			for (int i = 0; i < m; i++) {
				if (one(s, op, names, tokens, &lat[op][done + i]) < 0)
					goto store_err;
				total[op] += lat[op][done + i];
			}
	}
	printf("\n%s (%d runs each)\n", label, n);
	printf("%-22s %10s %10s %10s %9s %9s\n", "operation", "median_us", "p99_us", "ops/s",
	       "x SELECT", "x UPDATE");
	for (int op = 0; op < OP_MAX; op++) {
		qsort(lat[op], (size_t)n, sizeof(double), cmp_d);
		med[op] = lat[op][n / 2];
	}
	for (int op = 0; op < OP_MAX; op++)
		printf("%-22s %10.1f %10.1f %10.0f %9.2f %9.2f\n", op_name[op], med[op],
		       lat[op][(size_t)(n * 0.99)], n / (total[op] / 1e6), med[op] / med[OP_SELECT],
		       med[op] / med[OP_UPDATE]);
	rc = 0;
	goto fail;
store_err:
	fprintf(stderr, "store_bench: %s: %s\n", provider, s->err);
fail:
	for (int op = 0; op < OP_MAX; op++)
		free(lat[op]);
	store_close(s);
	return rc;
}

int main(int argc, char **argv)
{
	int n = 2000, c, rc = 0;

	while ((c = getopt(argc, argv, "n:")) != -1) {
		if (c != 'n' || (n = atoi(optarg)) < 10) {
			fprintf(stderr, "usage: store_bench [-n N] PROVIDER[@LABEL]=SPEC ... (sqlite=PATH postgres=CONNINFO mssql=H:P:U:PW:DB)\n");
			return 2;
		}
	}
	for (int i = optind; i < argc; i++) {
		struct store_opts o = { .table = "leash_bench", .connect_timeout_ms = 5000,
		                        .statement_timeout_ms = 5000 };
		char *spec = strdup(argv[i]), *eq = strchr(spec, '='), *at;

		if (!eq) {
			fprintf(stderr, "store_bench: %s: expected PROVIDER=SPEC\n", argv[i]);
			free(spec);
			return 2;
		}
		*eq++ = '\0';
		if ((at = strchr(spec, '@')))
			*at++ = '\0';
		if (strcmp(spec, "sqlite") == 0) {
			o.path = eq;
		} else if (strcmp(spec, "postgres") == 0) {
			o.conninfo = eq;
		} else if (strcmp(spec, "mssql") == 0) {
			/* host:port:user:password:database; the password may hold ':' */
			char *p1 = strchr(eq, ':'), *p2 = p1 ? strchr(p1 + 1, ':') : NULL;
			char *p4 = strrchr(eq, ':'), *p3 = p2 ? strchr(p2 + 1, ':') : NULL;

			if (!p3 || p4 < p3) {
				fprintf(stderr, "store_bench: mssql=host:port:user:password:database\n");
				free(spec);
				return 2;
			}
			*p1 = *p2 = *p4 = '\0';
			o.host = eq;
			o.port = atoi(p1 + 1);
			o.user = p2 + 1;
			o.password = p4 == p3 ? "" : p3 + 1;
			if (p4 != p3)
				*p3 = '\0';
			o.database = p4 + 1;
		}
		if (bench(spec, at && *at ? at : spec, &o, n) < 0)
			rc = 1;
		free(spec);
	}
	return rc;
}
