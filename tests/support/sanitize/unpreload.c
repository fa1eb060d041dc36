/* unpreload.c - preloaded (last) into the lua5.4 processes of `make sanitize`.
 *
 * lua5.4 is not built with ASan, so to load the ASan leash/core.so it must
 * start with libasan/libubsan in LD_PRELOAD and with its own ASAN_OPTIONS
 * (no leak check: the interpreter's leaks are not ours).  Neither should
 * reach the programs the specs start from Lua (sh, leash, make, cc,
 * postgres...): this constructor puts back the environment the lua5.4
 * wrapper saved, so the leash binary (linked with ASan itself) runs with the
 * suite's ASAN_OPTIONS, leak check included, and other programs run plain.
 */
#include <stdlib.h>

static void restore(const char *var, const char *saved)
{
	const char *v = getenv(saved);

	if (v && *v)
		setenv(var, v, 1);
	else
		unsetenv(var);
	unsetenv(saved);
}

__attribute__((constructor)) static void unpreload(void)
{
	restore("LD_PRELOAD", "LEASH_SAN_SAVED_PRELOAD");
	restore("ASAN_OPTIONS", "LEASH_SAN_SAVED_ASAN_OPTIONS");
}
