/* budget.h - running untrusted Lua (a job file's top level) inside the
 * scheduler's own state, bounded in instructions and in memory.
 *
 * The budget is sticky: once either bound is passed, every further Lua
 * instruction raises and every allocation that grows fails, so pcall,
 * xpcall, coroutines and __close handlers cannot catch the error and go on.
 * Whatever the code does afterwards, the call counts as over budget.
 * The deadline is looked at every BUDGET_TICK instructions, on every large
 * allocation and by budget_charge: a single C call that neither runs Lua
 * nor allocates can still pass it (leash.sandbox bounds the ones it knows;
 * job.c's checking process bounds the rest by the wall clock). */
#ifndef LEASH_BUDGET_H
#define LEASH_BUDGET_H

#include <stddef.h>
#include <lua.h>

enum budget_status {
	BUDGET_OK,
	BUDGET_ERROR,           /* the code raised an error: it is on the stack */
	BUDGET_INSTRUCTIONS,    /* it ran more instructions than allowed */
	BUDGET_MEMORY,          /* it allocated more than allowed */
	BUDGET_ALLOCATED,       /* it allocated (and freed) more than allowed in all */
	BUDGET_TIME,            /* it ran past its deadline */
};

/* The count hook fires every this many instructions. */
#define BUDGET_TICK 1000

struct budget_limits {
	const char *chunkname;  /* "@path": the source whose line errors name */
	long instructions;
	size_t bytes;           /* net growth of the state's heap */
	size_t allocated;       /* every byte allocated, freed or not; 0: no bound */
	int64_t deadline_ms;    /* on clock_mono_ms(); 0: none */
};

/* Calls the function below the nargs arguments on top of the stack with
 * lua_pcall under the limits, with nresults results.  Returns BUDGET_OK with
 * the results in place of the function and arguments, or another status with
 * one value in their place (the error value; meaningful for BUDGET_ERROR).
 * *line is the line of chunkname that was running when the error was raised
 * or the budget was passed (the innermost such frame), or 0 when unknown.
 * One budget runs at a time: a nested call is refused with BUDGET_ERROR. */
int budget_call(lua_State *L, const struct budget_limits *lim, int nargs, int nresults,
                int *line);

/* Charges n instructions to the running budget (for work the count hook
 * cannot see, such as a new coroutine's first BUDGET_TICK instructions);
 * raises when that passes the bound or the deadline (n = 0 only looks at the
 * clock: for C calls that take time without instructions, such as a full
 * collection).  Does nothing when no budget runs. */
void budget_charge(lua_State *L, long n);

#endif
