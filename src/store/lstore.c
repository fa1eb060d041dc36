/* lstore.c - leash.core store bindings (placeholder). */
#include <lauxlib.h>
#include "lx.h"

void lx_store_lib(lua_State *L)
{
	(void)L;
}
