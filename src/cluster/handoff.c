/* handoff.c - the hand-off decision (handoff.h). */
#include <stddef.h>

#include "cluster/handoff.h"
#include "cluster/presence.h"

const char *handoff_reason(const struct handoff_in *in)
{
	if (in->manual)
		return "leash handoff";
	if (in->draining)
		return "leash drain";
	/* Preference: only on a view that knows who is live now, and at most
	 * one move a lease (a pinned job stays until a replica joins or
	 * leaves). */
	if (in->other && in->fresh && (in->pinned ? in->joined_left
	                               : in->moved || in->held_ms >= in->lease_ms))
		return "preferred";
	return NULL;
}

enum handoff_what handoff_decide(const struct handoff_in *in)
{
	const char *why = handoff_reason(in);

	if (in->handing_off && !why)
		return HANDOFF_CANCEL;
	if (in->handing_off && in->handing_ms >= in->lease_ms)
		return HANDOFF_ABANDON;
	if (!why)
		return HANDOFF_KEEP;
	switch (presence_safe_point(in->service, in->busy, in->now, in->next_fire, in->after_next,
	                            in->handover_ms)) {
	case PRESENCE_STOP:
		return in->handing_off ? HANDOFF_WAIT : HANDOFF_STOP;
	case PRESENCE_RELEASE:
		return HANDOFF_RELEASE;
	default:
		return HANDOFF_WAIT;
	}
}
