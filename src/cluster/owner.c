/* owner.c - who this process is in the store (owner.h). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/random.h>

#include "core/clock.h"
#include "cluster/owner.h"
#include "store/store.h"

void owner_id(const char *name, char *out, size_t len)
{
	char host[256] = "localhost";
	unsigned char rnd[4] = { 0 };

	if (strcmp(name, "auto") == 0) {
		gethostname(host, sizeof host - 1);
		name = host;
	}
	if (getrandom(rnd, sizeof rnd, 0) != sizeof rnd) {
		/* Not fatal: the pid still tells this process from the others
		 * alive now, and a restart gets another pid soon enough. */
		int64_t t = clock_boot_ms() * 1000003;
		memcpy(rnd, &t, sizeof rnd);
	}
	snprintf(out, len, "%.*s:%d:%02x%02x%02x%02x", STORE_REPLICA_MAX, name, (int)getpid(),
	         rnd[0], rnd[1], rnd[2], rnd[3]);
}
