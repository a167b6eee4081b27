/*
 * scoring/think.c: removing a reasoning model's thinking from its answer.
 *
 * Thinking sits in <think>...</think> blocks, possibly several and
 * multiline. Two damaged forms are common and handled:
 *   - an unclosed <think> (the model ran out of tokens while thinking):
 *     everything after it is thinking, and *unclosed is set;
 *   - a </think> with no opening tag (chat templates that put <think> in
 *     the prompt, so the model never writes it): everything before it, back
 *     to the end of the previous block, is thinking.
 * The same stray-close rule undoes one level of nesting
 * ("<think>a<think>b</think>c</think>x" leaves "x"). The result is trimmed
 * of surrounding whitespace, which is what checkers compare.
 */
#include "scoring/scoring.h"

#include <stdlib.h>
#include <string.h>

static const char OPEN[] = "<think>";
static const char CLOSE[] = "</think>";
#define OPEN_LEN (sizeof OPEN - 1)
#define CLOSE_LEN (sizeof CLOSE - 1)

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

char *ev_strip_thinking(const char *response, bool *unclosed)
{
	if (unclosed)
		*unclosed = false;
	if (!response)
		response = "";
	size_t len = strlen(response);
	char *out = malloc(len + 1);
	if (!out)
		return NULL;
	/* One pass, tags recognised where they start: linear on any input,
	 * even thousands of tags (and under sanitizers, whose strstr checks
	 * the whole haystack on every call). `seg` is where the text copied
	 * since the last block ended starts: a stray </think> drops it. */
	size_t n = 0, seg = 0;
	bool inside = false;
	for (size_t i = 0; i < len;) {
		if (response[i] == '<') {
			if (strncmp(response + i, CLOSE, CLOSE_LEN) == 0) {
				if (!inside)
					n = seg;
				inside = false;
				seg = n;
				i += CLOSE_LEN;
				continue;
			}
			if (!inside && strncmp(response + i, OPEN, OPEN_LEN) == 0) {
				inside = true;
				i += OPEN_LEN;
				continue;
			}
		}
		if (!inside)
			out[n++] = response[i];
		i++;
	}
	if (inside && unclosed)
		*unclosed = true;
	size_t a = 0;
	while (a < n && is_space(out[a]))
		a++;
	while (n > a && is_space(out[n - 1]))
		n--;
	memmove(out, out + a, n - a);
	out[n - a] = '\0';
	return out;
}
