/* Leveled log lines on stderr, made safe for a terminal (they quote names,
 * answers and server replies) and cut at 4 KiB. */
#include "base/base.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static ev_log_level g_level = EV_LOG_INFO;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

void ev_log_set_level(ev_log_level level) { g_level = level; }
ev_log_level ev_log_get_level(void) { return g_level; }

void ev_log(ev_log_level level, const char *fmt, ...)
{
	static const char *names[] = {"error", "warning", "info", "debug"};
	if (level > g_level)
		return;
	char line[4096];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (n >= (int)sizeof line)
		memcpy(line + sizeof line - 4, "...", 4);
	ev_term_clean(line);
	pthread_mutex_lock(&g_lock);
	fprintf(stderr, "evald: %s: %s\n", names[level], line);
	pthread_mutex_unlock(&g_lock);
}
