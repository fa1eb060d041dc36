/* budget.c - a sticky instruction and memory budget for one protected call.
 *
 * Instructions are counted by a count hook in C every BUDGET_TICK
 * instructions (not by debug.sethook, which the code could reach or reset).
 * Threads inherit their creator's hook (lua_newthread copies it), so each
 * coroutine the code makes counts against the same budget; a thread's first
 * partial tick is charged when it is made (budget_charge).  Once over, the
 * hook fires at every instruction of every thread that runs, and raises.
 *
 * Memory is counted by an allocator put in front of the state's own for the
 * length of the call: the net growth of the heap.  The first allocation that
 * would pass the bound is refused and the budget is over: from then on every
 * allocation that grows fails (frees always pass).  Not every refusal is
 * retried after an emergency collection (lauxlib's buffers are not), so
 * garbage not yet collected counts: the bound is on what the call made.
 * Every byte allocated also counts against a second bound, freed or not: a
 * loop that allocates and collects makes no net growth, yet takes time.
 *
 * The deadline (monotonic) is looked at in the hook, on each allocation of
 * BUDGET_BIG bytes or more, and by budget_charge; past it the budget is over
 * as for instructions.
 */
#include <string.h>

#include <lauxlib.h>

#include "core/budget.h"
#include "core/clock.h"

/* An allocation this large looks at the deadline (a clock read is ~20 ns). */
#define BUDGET_BIG (64 * 1024)

static struct {
	int active;
	int over;                       /* 0 or the budget_status that ended it */
	int line;                       /* where it went over or the error was raised */
	const char *chunkname;
	long left;                      /* instructions */
	long long grown, max_bytes;     /* net heap growth, bytes */
	long long allocated, max_allocated;     /* every byte allocated; 0: no bound */
	int64_t deadline;               /* clock_mono_ms; 0: none */
	lua_State *L;                   /* the thread that made the call */
	lua_Alloc alloc;                /* the state's own allocator */
	void *alloc_ud;
} b;

/* The line of the innermost frame of L running chunkname. */
static int chunk_line(lua_State *L)
{
	lua_Debug ar;

	for (int level = 0; lua_getstack(L, level, &ar); level++) {
		if (lua_getinfo(L, "Sl", &ar) && ar.currentline > 0 &&
		    strcmp(ar.source, b.chunkname) == 0)
			return ar.currentline;
	}
	return 0;
}

static void go_over(lua_State *L, int why)
{
	if (!b.over) {
		b.over = why;
		b.line = chunk_line(L);
	}
}

/* From now on every instruction of L calls the hook, which raises. */
static void raise_over(lua_State *L)
{
	lua_sethook(L, lua_gethook(L), LUA_MASKCOUNT, 1);
	lua_pushliteral(L, "load budget exceeded");
	lua_error(L);
}

static int late(void)
{
	return b.deadline && clock_mono_ms() >= b.deadline;
}

static void hook(lua_State *L, lua_Debug *ar)
{
	(void)ar;
	if (!b.active) {
		lua_sethook(L, NULL, 0, 0);     /* a coroutine that outlived its load */
		return;
	}
	if (!b.over) {
		b.left -= BUDGET_TICK;
		if (b.left >= 0 && !late())
			return;
		go_over(L, b.left < 0 ? BUDGET_INSTRUCTIONS : BUDGET_TIME);
	} else if (!b.line) {
		b.line = chunk_line(L);         /* gone over in the allocator */
	}
	raise_over(L);
}

void budget_charge(lua_State *L, long n)
{
	if (!b.active)
		return;
	b.left -= n;
	if (b.left < 0 || b.over || late()) {
		go_over(L, b.left < 0 ? BUDGET_INSTRUCTIONS : BUDGET_TIME);
		raise_over(L);
	}
}

static void *budget_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
	long long grow = (long long)nsize - (long long)(ptr ? osize : 0);
	int why = 0;
	void *p;

	(void)ud;
	if (nsize > 0 && grow > 0 && !b.over) {
		if (b.grown + grow > b.max_bytes)
			why = BUDGET_MEMORY;
		else if (b.max_allocated && b.allocated + grow > b.max_allocated)
			why = BUDGET_ALLOCATED;
		else if (grow >= BUDGET_BIG && late())
			why = BUDGET_TIME;
	}
	if (nsize > 0 && grow > 0 && (b.over || why)) {
		if (!b.over) {
			/* Lua saved its pc before an operation that may
			 * allocate, and reading the stack allocates nothing:
			 * the line is known here (a memory error reaches no
			 * message handler).  The next instruction of the
			 * calling thread raises (lua_sethook only sets fields). */
			go_over(b.L, why);
			lua_sethook(b.L, hook, LUA_MASKCOUNT, 1);
		}
		return NULL;
	}
	p = b.alloc(b.alloc_ud, ptr, osize, nsize);
	if (p || nsize == 0)
		b.grown += grow;
	if (p && grow > 0)
		b.allocated += grow;
	return p;
}

static int on_error(lua_State *L)
{
	if (!b.line)
		b.line = chunk_line(L);
	return 1;
}

int budget_call(lua_State *L, const struct budget_limits *lim, int nargs, int nresults,
                int *line)
{
	int base = lua_gettop(L) - nargs, rc, status;
	lua_Hook old_hook = lua_gethook(L);
	int old_mask = lua_gethookmask(L), old_count = lua_gethookcount(L);

	*line = 0;
	if (b.active) {
		lua_settop(L, base - 1);
		lua_pushliteral(L, "a load budget is already running");
		return BUDGET_ERROR;
	}
	lua_pushcfunction(L, on_error);
	lua_insert(L, base);
	memset(&b, 0, sizeof b);
	b.chunkname = lim->chunkname;
	b.left = lim->instructions;
	b.max_bytes = (long long)lim->bytes;
	b.max_allocated = (long long)lim->allocated;
	b.deadline = lim->deadline_ms;
	b.L = L;
	b.alloc = lua_getallocf(L, &b.alloc_ud);
	b.active = 1;
	lua_setallocf(L, budget_alloc, NULL);
	lua_sethook(L, hook, LUA_MASKCOUNT, BUDGET_TICK);

	rc = lua_pcall(L, nargs, nresults, base);

	lua_sethook(L, old_hook, old_mask, old_count);
	lua_setallocf(L, b.alloc, b.alloc_ud);
	b.active = 0;
	lua_remove(L, base);
	*line = b.line;
	if (b.over)
		status = b.over;
	else if (rc == LUA_ERRMEM)
		status = BUDGET_MEMORY;
	else
		status = rc == LUA_OK ? BUDGET_OK : BUDGET_ERROR;
	if (status != BUDGET_OK && rc == LUA_OK) {
		/* Over budget, yet it returned: the results are not to be used. */
		lua_settop(L, base - 1);
		lua_pushnil(L);
	}
	return status;
}
