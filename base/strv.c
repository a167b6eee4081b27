/* Vectors of owned strings. */
#include "base/base.h"

#include <string.h>

int ev_strv_push(ev_strv *v, const char *s, size_t n)
{
	char *c = ev_strndup(s, n);
	if (!c || ev_vec_push(v, c)) {
		free(c);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	return 0;
}

long ev_strv_find(const ev_strv *v, const char *s, size_t n)
{
	for (size_t i = 0; i < v->n; i++)
		if (strlen(v->v[i]) == n && !memcmp(v->v[i], s, n))
			return (long)i;
	return -1;
}

void ev_strv_clear(ev_strv *v)
{
	ev_strv_free(v->v, v->n);
	v->v = NULL;
	v->n = v->cap = 0;
}

void ev_strv_free(char **v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}
