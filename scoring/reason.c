/* scoring/reason.c: the stable names of verdict reasons (stored in the tracker). */
#include "scoring/scoring.h"

#include <string.h>

static const char *const names[EV_REASON_COUNT] = {
	[EV_REASON_NONE] = "",
	[EV_REASON_WRONG_ANSWER] = "wrong_answer",
	[EV_REASON_NO_ANSWER] = "no_answer",
	[EV_REASON_TRUNCATED] = "truncated",
	[EV_REASON_BACKEND_ERROR] = "backend_error",
	[EV_REASON_TIMEOUT] = "timeout",
	[EV_REASON_MATCH_LIMIT] = "match_limit",
	[EV_REASON_UNCLOSED_THINK] = "unclosed_thinking",
};

const char *ev_reason_name(ev_reason r)
{
	if ((int)r < 0 || r >= EV_REASON_COUNT)
		return "unknown";
	return names[r];
}

ev_reason ev_reason_parse(const char *name)
{
	if (!name)
		return EV_REASON_COUNT;
	for (int r = 0; r < EV_REASON_COUNT; r++)
		if (strcmp(names[r], name) == 0)
			return (ev_reason)r;
	return EV_REASON_COUNT;
}

bool ev_reason_is_error(ev_reason r) { return r == EV_REASON_BACKEND_ERROR || r == EV_REASON_TIMEOUT; }
