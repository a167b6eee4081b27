/*
 * runners internals: the backend function table. Each backend (openai.c,
 * backend_engine.c, ...) fills one and wraps its state with it.
 */
#ifndef EV_RUNNERS_INT_H
#define EV_RUNNERS_INT_H

#include "runners/runners.h"

typedef struct {
	const char *name;
	int (*capacity)(void *impl);
	int (*submit)(void *impl, const ev_request *req);
	int (*poll)(void *impl, ev_completion *out, int max, double wait_s);
	int (*pending)(void *impl);
	void (*free)(void *impl);
} ev_backend_ops;

struct ev_backend {
	const ev_backend_ops *ops;
	void *impl;
	char identity[EV_SHA256_HEX]; /* ev_backend_identity; "" until set */
	char *preprocessing;          /* ev_backend_preprocessing (JSON); NULL until set */
};

/* Sets the backend's preprocessing fingerprint (a JSON object, copied). */
int ev_backend_set_preprocessing(ev_backend *b, const char *json);

/* Sets the backend's identity to the digest of `text`. */
void ev_backend_set_identity(ev_backend *b, const char *text, size_t len);

/* Wraps impl in a backend (takes ownership of impl: ops->free on failure). */
int ev_backend_wrap(ev_backend **out, const ev_backend_ops *ops, void *impl);

#endif
