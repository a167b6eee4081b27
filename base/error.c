/* Status codes and the per-thread failure message. */
#include "base/base.h"

#include <stdio.h>
#include <string.h>

#define MSG_MAX 2048

static _Thread_local char tls_msg[MSG_MAX];
static _Thread_local int tls_code;

const char *ev_status_name(int status)
{
	switch (status) {
	case EV_OK: return "ok";
	case EV_E_NOMEM: return "out of memory";
	case EV_E_IO: return "i/o";
	case EV_E_PARSE: return "parse";
	case EV_E_INVALID: return "invalid";
	case EV_E_LIMIT: return "limit";
	case EV_E_NOTFOUND: return "not found";
	case EV_E_UNSAFE: return "unsafe";
	case EV_E_BACKEND: return "backend";
	case EV_E_TIMEOUT: return "timeout";
	case EV_E_DB: return "database";
	case EV_E_UNSUPPORTED: return "unsupported";
	case EV_E_INTERNAL: return "internal";
	default: return "unknown";
	}
}

int ev_error_set(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(tls_msg, sizeof tls_msg, fmt, ap);
	va_end(ap);
	tls_code = code;
	return code;
}

int ev_error_wrap(int code, const char *fmt, ...)
{
	char prefix[MSG_MAX / 2];
	char old[MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof prefix, fmt, ap);
	va_end(ap);
	memcpy(old, tls_msg, sizeof old);
	if (old[0])
		snprintf(tls_msg, sizeof tls_msg, "%s: %s", prefix, old);
	else
		snprintf(tls_msg, sizeof tls_msg, "%s", prefix);
	tls_code = code;
	return code;
}

const char *ev_error_msg(void) { return tls_msg; }
int ev_error_code(void) { return tls_code; }

void ev_error_clear(void)
{
	tls_msg[0] = 0;
	tls_code = 0;
}
