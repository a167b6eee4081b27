/*
 * scoring/checker_text.c: the text checkers (includes, exact) and the
 * normalisation and UTF-8 helpers the other kinds share.
 *
 * Normalisation works on code points: case folding covers ASCII, Latin-1,
 * Latin Extended-A, Greek and Cyrillic (simple one-to-one folds, enough for
 * answers; no locale, no special casing), whitespace includes the Unicode
 * spaces, and punctuation is ASCII punctuation plus the common Unicode
 * marks (quotes, dashes, ellipsis, CJK and full-width punctuation).
 */
#include "scoring/scoring_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- classes ------------------------------------------------------------- */

bool ev_cp_space(uint32_t cp)
{
	return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
	       (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
	       cp == 0x3000;
}

bool ev_cp_punct(uint32_t cp)
{
	if (cp < 0x80)
		return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
		       (cp >= 0x7B && cp <= 0x7E);
	return cp == 0xA1 || cp == 0xA7 || cp == 0xAB || cp == 0xB6 || cp == 0xB7 || cp == 0xBB || cp == 0xBF ||
	       (cp >= 0x2010 && cp <= 0x2027) || (cp >= 0x2030 && cp <= 0x205E) || (cp >= 0x3001 && cp <= 0x3003) ||
	       (cp >= 0x3008 && cp <= 0x3011) || (cp >= 0xFF01 && cp <= 0xFF0F) || (cp >= 0xFF1A && cp <= 0xFF20) ||
	       (cp >= 0xFF3B && cp <= 0xFF40) || (cp >= 0xFF5B && cp <= 0xFF65);
}

static uint32_t fold(uint32_t cp)
{
	if (cp >= 'A' && cp <= 'Z')
		return cp + 32;
	if (cp < 0xC0)
		return cp;
	if (cp <= 0xDE)
		return cp == 0xD7 ? cp : cp + 32;
	if (cp >= 0x100 && cp <= 0x17F) {
		/* Latin Extended-A pairs upper/lower, even/odd in two runs and
		 * odd/even in two others; 0x130, 0x131 and 0x138 have no pair. */
		if ((cp <= 0x137 && cp != 0x130 && cp != 0x131) || (cp >= 0x14A && cp <= 0x177))
			return cp | 1;
		if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E))
			return (cp & 1) ? cp + 1 : cp;
		if (cp == 0x178)
			return 0xFF;
		return cp;
	}
	if (cp >= 0x391 && cp <= 0x3A9 && cp != 0x3A2)
		return cp + 32;
	if (cp >= 0x410 && cp <= 0x42F)
		return cp + 32;
	if (cp >= 0x400 && cp <= 0x40F)
		return cp + 80;
	return cp;
}

char *ev_norm_text(const char *s, size_t len, const ev_norm *n)
{
	/* Folding never lengthens: every fold above stays in its UTF-8 width. */
	char *o = malloc(len + 1);
	if (!o)
		return NULL;
	size_t w = 0;
	bool pending = false;
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t k = ev_utf8_decode(s + i, len - i, &cp);
		i += k;
		if (n->strip_punct && ev_cp_punct(cp))
			continue;
		if (n->squash_space && ev_cp_space(cp)) {
			pending = w > 0;
			continue;
		}
		if (pending) {
			o[w++] = ' ';
			pending = false;
		}
		if (n->fold_case)
			cp = fold(cp);
		char tmp[4];
		size_t e = ev_utf8_encode(tmp, cp);
		if (w + e > len) /* a replaced bad byte widens; cannot happen on valid input */
			break;
		memcpy(o + w, tmp, e);
		w += e;
	}
	o[w] = '\0';
	return o;
}

/* ---- includes and exact --------------------------------------------------- */

typedef struct {
	ev_norm norm;
	bool exact;
} text_checker;

static const char *const text_fields[] = {"ignore_case", "ignore_space", "ignore_punct", NULL};

static int text_parse(void **impl, const cJSON *spec, cJSON *norm, bool exact)
{
	text_checker *t = calloc(1, sizeof *t);
	if (!t)
		return ev_error_set(EV_E_NOMEM, "checker: out of memory");
	t->exact = exact;
	int rc;
	if ((rc = ev_spec_bool(&t->norm.fold_case, spec, "ignore_case", true)) ||
	    (rc = ev_spec_bool(&t->norm.squash_space, spec, "ignore_space", exact)) ||
	    (rc = ev_spec_bool(&t->norm.strip_punct, spec, "ignore_punct", exact))) {
		free(t);
		return rc;
	}
	if (!cJSON_AddBoolToObject(norm, "ignore_case", t->norm.fold_case) ||
	    !cJSON_AddBoolToObject(norm, "ignore_space", t->norm.squash_space) ||
	    !cJSON_AddBoolToObject(norm, "ignore_punct", t->norm.strip_punct)) {
		free(t);
		return ev_error_set(EV_E_NOMEM, "checker: out of memory");
	}
	*impl = t;
	return 0;
}

static int includes_parse(void **impl, const cJSON *spec, cJSON *norm) { return text_parse(impl, spec, norm, false); }
static int exact_parse(void **impl, const cJSON *spec, cJSON *norm) { return text_parse(impl, spec, norm, true); }

static int text_score(const void *impl, const ev_sample *sample, const char *answer, size_t len, ev_check_out *out)
{
	const text_checker *t = impl;
	const char *kind = t->exact ? "exact" : "includes";
	int rc = ev_check_need_targets(sample, kind);
	if (rc)
		return rc;
	char *a = ev_norm_text(answer, len, &t->norm);
	if (!a)
		return ev_error_set(EV_E_NOMEM, "scoring: out of memory");
	size_t usable = 0;
	bool hit = false;
	for (size_t i = 0; i < sample->n_targets && !hit; i++) {
		const char *tg = sample->targets[i] ? sample->targets[i] : "";
		size_t tlen = strlen(tg);
		/* Targets come from the suite file: sanitise like the answer. */
		char *clean = ev_utf8_sanitize(tg, tlen, &tlen);
		char *nt = clean ? ev_norm_text(clean, tlen, &t->norm) : NULL;
		free(clean);
		if (!nt) {
			free(a);
			return ev_error_set(EV_E_NOMEM, "scoring: out of memory");
		}
		if (*nt) {
			usable++;
			hit = t->exact ? strcmp(a, nt) == 0 : strstr(a, nt) != NULL;
		}
		free(nt);
	}
	if (usable == 0 && !hit) {
		free(a);
		return ev_error_set(EV_E_INVALID, "the %s checker's targets are all empty after normalisation", kind);
	}
	/* What was compared: the normalised answer for exact; for includes the
	 * answer itself (normalising only folded case), clipped. */
	out->extracted = t->exact ? ev_utf8_clip(a, strlen(a), EV_CHECK_MAX_EXTRACTED)
	                          : ev_utf8_clip(answer, len, EV_CHECK_MAX_EXTRACTED);
	out->score = hit ? 1.0 : 0.0;
	if (!hit) {
		out->reason = EV_REASON_WRONG_ANSWER;
		out->detail = t->exact ? ev_check_detail_mismatch(sample, a)
		                       : ev_asprintf("no target found in the answer (%zu target%s)", sample->n_targets,
		                                     sample->n_targets == 1 ? "" : "s");
	}
	free(a);
	return 0;
}

const ev_checker_type ev_checker_includes = {"includes", text_fields, includes_parse, text_score, free};
const ev_checker_type ev_checker_exact = {"exact", text_fields, exact_parse, text_score, free};
