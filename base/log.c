/* Leveled log lines on stderr. */
#include "base/base.h"

#include <pthread.h>

static ev_log_level g_level = EV_LOG_INFO;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

void ev_log_set_level(ev_log_level level) { g_level = level; }
ev_log_level ev_log_get_level(void) { return g_level; }

void ev_log(ev_log_level level, const char *fmt, ...)
{
	static const char *names[] = {"error", "warning", "info", "debug"};
	if (level > g_level)
		return;
	va_list ap;
	va_start(ap, fmt);
	pthread_mutex_lock(&g_lock);
	fprintf(stderr, "evald: %s: ", names[level]);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	pthread_mutex_unlock(&g_lock);
	va_end(ap);
}
