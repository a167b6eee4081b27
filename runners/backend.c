/* The backend handle: a function table and its state, and the calls that
 * dispatch through it. */
#include "runners/runners_int.h"

#include <stdlib.h>

void ev_backend_set_identity(ev_backend *b, const char *text, size_t len) { ev_sha256_hex(b->identity, text, len); }

const char *ev_backend_identity(const ev_backend *b) { return b ? b->identity : ""; }

int ev_backend_set_preprocessing(ev_backend *b, const char *json)
{
	char *c = ev_strdup(json);
	if (!c)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	free(b->preprocessing);
	b->preprocessing = c;
	return 0;
}

const char *ev_backend_preprocessing(const ev_backend *b) { return b ? b->preprocessing : NULL; }

int ev_backend_wrap(ev_backend **out, const ev_backend_ops *ops, void *impl)
{
	*out = NULL;
	ev_backend *b = calloc(1, sizeof *b);
	if (!b) {
		ops->free(impl);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	b->ops = ops;
	b->impl = impl;
	*out = b;
	return 0;
}

void ev_backend_free(ev_backend *b)
{
	if (!b)
		return;
	b->ops->free(b->impl);
	free(b->preprocessing);
	free(b);
}

int ev_backend_capacity(ev_backend *b) { return b->ops->capacity(b->impl); }
int ev_backend_submit(ev_backend *b, const ev_request *req) { return b->ops->submit(b->impl, req); }
int ev_backend_pending(ev_backend *b) { return b->ops->pending(b->impl); }

int ev_backend_poll(ev_backend *b, ev_completion *out, int max, double wait_s)
{
	if (max <= 0)
		return 0;
	return b->ops->poll(b->impl, out, max, wait_s < 0 ? 0 : wait_s);
}
