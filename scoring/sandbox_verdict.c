/*
 * sandbox_verdict.c: how a sandboxed run is named and explained: verdict
 * names, the one-line result text, and the failing line a Python
 * traceback (or any stderr) points at.
 */
#include "scoring/scoring.h"

#include <stdlib.h>
#include <string.h>

/* A detail line is cut past this many bytes. */
#define MAX_DETAIL 300

const char *ev_sandbox_verdict_name(ev_sandbox_verdict v)
{
	switch (v) {
	case EV_SANDBOX_PASSED: return "passed";
	case EV_SANDBOX_FAILED: return "failed";
	case EV_SANDBOX_TIMEOUT: return "timed out";
	case EV_SANDBOX_OOM: return "out of memory";
	case EV_SANDBOX_CRASHED: return "crashed";
	case EV_SANDBOX_ERROR: return "sandbox error";
	}
	return "sandbox error";
}

void ev_sandbox_result_clear(ev_sandbox_result *r)
{
	if (!r)
		return;
	free(r->out);
	free(r->err);
	free(r->detail);
	memset(r, 0, sizeof *r);
}

char *ev_sandbox_result_text(const ev_sandbox_result *r)
{
	if (!r)
		return NULL;
	switch (r->verdict) {
	case EV_SANDBOX_PASSED:
	case EV_SANDBOX_TIMEOUT:
	case EV_SANDBOX_OOM:
		return ev_strdup(ev_sandbox_verdict_name(r->verdict));
	case EV_SANDBOX_CRASHED:
		return ev_asprintf("crashed: signal %d", r->signal);
	case EV_SANDBOX_FAILED:
	case EV_SANDBOX_ERROR:
		break;
	}
	return ev_asprintf("%s: %s", ev_sandbox_verdict_name(r->verdict), r->detail ? r->detail : "?");
}

/* ---- stderr lines ----------------------------------------------------------- */

typedef struct {
	const char *p;
	size_t n;
} span;

static span trim(const char *p, size_t n)
{
	while (n && (*p == ' ' || *p == '\t' || *p == '\r'))
		p++, n--;
	while (n && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r'))
		n--;
	return (span){p, n};
}

/* Python 3.11 marks the failing expression with a line of ^ and ~. */
static bool caret_line(span s)
{
	if (!s.n)
		return false;
	for (size_t i = 0; i < s.n; i++)
		if (s.p[i] != '^' && s.p[i] != '~' && s.p[i] != ' ')
			return false;
	return true;
}

/* Copy of a line without control bytes and cut at MAX_DETAIL, on a UTF-8
 * boundary. */
static char *clean(span s)
{
	size_t n = s.n < MAX_DETAIL ? s.n : MAX_DETAIL;
	while (n < s.n && n > 0 && ((unsigned char)s.p[n] & 0xC0) == 0x80)
		n--;
	char *o = malloc(n + 4);
	if (!o)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s.p[i];
		o[k++] = c < 0x20 || c == 0x7f ? ' ' : (char)c;
	}
	if (n < s.n)
		memcpy(o + k, "...", 3), k += 3;
	o[k] = '\0';
	return o;
}

#define MAX_LINES 4096

char *ev_sandbox_failure_line(const char *err, size_t len)
{
	if (!err || !len)
		return NULL;
	/* Only the tail matters, and a bounded number of lines of it. */
	size_t start = len > ((size_t)64 << 10) ? len - ((size_t)64 << 10) : 0;
	span lines[MAX_LINES];
	size_t nl = 0;
	size_t i = start;
	while (i < len) {
		size_t j = i;
		while (j < len && err[j] != '\n')
			j++;
		span t = trim(err + i, j - i);
		if (t.n) {
			if (nl == MAX_LINES) {
				memmove(lines, lines + 1, (MAX_LINES - 1) * sizeof *lines);
				nl--;
			}
			lines[nl++] = (span){err + i, j - i};
		}
		i = j + 1;
	}
	if (!nl)
		return NULL;

	/* The last traceback: its exception line is the last line that does
	 * not start with blanks, after "Traceback (most recent call last):". */
	size_t tb = nl;
	for (size_t k = nl; k-- > 0;)
		if (trim(lines[k].p, lines[k].n).n >= 9 && !strncmp(trim(lines[k].p, lines[k].n).p, "Traceback", 9)) {
			tb = k;
			break;
		}
	if (tb == nl)
		return clean(trim(lines[nl - 1].p, lines[nl - 1].n));

	size_t exc = nl;
	for (size_t k = tb + 1; k < nl; k++)
		if (lines[k].p[0] != ' ' && lines[k].p[0] != '\t') {
			exc = k;
			break;
		}
	if (exc == nl)
		return clean(trim(lines[nl - 1].p, lines[nl - 1].n));
	span e = trim(lines[exc].p, lines[exc].n);
	bool bare_assert = e.n == 14 && !memcmp(e.p, "AssertionError", 14);
	if (!bare_assert)
		return clean(e);
	/* A bare AssertionError says nothing: show the statement that failed,
	 * the last source line of the traceback (carets skipped). */
	for (size_t k = exc; k-- > tb + 1;) {
		span s = trim(lines[k].p, lines[k].n);
		if (caret_line(s) || (s.n > 5 && !strncmp(s.p, "File ", 5)))
			continue;
		ev_buf b = EV_BUF_INIT(MAX_DETAIL * 2);
		char *c = clean(s);
		if (!c)
			return NULL;
		(void)ev_buf_printf(&b, "AssertionError: %s", c);
		free(c);
		return ev_buf_detach(&b, NULL);
	}
	return clean(e);
}
