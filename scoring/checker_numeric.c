/*
 * scoring/checker_numeric.c: the numeric checker and the number scanner.
 *
 * The answer's number is the last number inside the last \boxed{...} when
 * there is one (the usual convention of math prompts), else the last
 * number in the answer. Numbers are written "1,234.5" (commas only in
 * groups of three), "-3" (a sign only where no letter or digit precedes
 * it, so "5-3" holds 5 and 3), "1e-3", "$12", "45%" (the percent sign is
 * dropped: 45% is 45), ".5". Each target must be one such number; the
 * answer passes when it is within the tolerance of any target.
 */
#include "scoring/scoring_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool digit(char c) { return c >= '0' && c <= '9'; }
static bool alnum(char c) { return digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

static size_t digits(const char *s, size_t len, size_t j)
{
	while (j < len && digit(s[j]))
		j++;
	return j;
}

/* Whether s[j..] is ",ddd" not followed by another digit. */
static bool comma_group(const char *s, size_t len, size_t j)
{
	return j + 3 < len && s[j] == ',' && digit(s[j + 1]) && digit(s[j + 2]) && digit(s[j + 3]) &&
	       !(j + 4 < len && digit(s[j + 4]));
}

/* Tries to read a number starting exactly at i. */
static bool scan_at(const char *s, size_t len, size_t i, double *val, size_t *end)
{
	size_t j = i;
	bool neg = false;
	if ((s[j] == '-' || s[j] == '+') && !(j > 0 && alnum(s[j - 1]))) {
		neg = s[j] == '-';
		j++;
	} else if (j + 2 < len && (unsigned char)s[j] == 0xE2 && (unsigned char)s[j + 1] == 0x88 &&
	           (unsigned char)s[j + 2] == 0x92 && !(j > 0 && alnum(s[j - 1]))) {
		neg = true; /* U+2212 MINUS SIGN */
		j += 3;
	}
	if (j < len && s[j] == '$')
		j++;
	size_t m0 = j;
	if (j < len && digit(s[j])) {
		/* A digit right before the start belongs to a number already
		 * read ("1.2.3" must not yield ".3" then "3" twice). */
		if (m0 > 0 && m0 == i && digit(s[m0 - 1]))
			return false;
		size_t e = digits(s, len, j);
		bool grouped = e - j <= 3;
		j = e;
		while (grouped && comma_group(s, len, j))
			j += 4;
	} else if (!(j + 1 < len && s[j] == '.' && digit(s[j + 1]) && !(j > 0 && digit(s[j - 1])))) {
		return false;
	}
	if (j + 1 < len && s[j] == '.' && digit(s[j + 1]))
		j = digits(s, len, j + 1);
	size_t mend = j;
	if (j < len && (s[j] == 'e' || s[j] == 'E')) {
		size_t k = j + 1;
		if (k < len && (s[k] == '+' || s[k] == '-'))
			k++;
		if (k < len && digit(s[k]))
			mend = j = digits(s, len, k);
	}
	/* strtod wants the digits without group commas. */
	size_t n = mend - m0;
	char small[64], *buf = n < sizeof small ? small : malloc(n + 1);
	if (!buf)
		return false;
	size_t w = 0;
	for (size_t k = m0; k < mend; k++)
		if (s[k] != ',')
			buf[w++] = s[k];
	buf[w] = '\0';
	double v = strtod(buf, NULL);
	if (buf != small)
		free(buf);
	if (j < len && s[j] == '%')
		j++;
	*val = neg ? -v : v;
	*end = j;
	return true;
}

bool ev_num_scan(const char *s, size_t len, size_t *pos, double *val, size_t *start, size_t *end)
{
	for (size_t i = *pos; i < len; i++) {
		char c = s[i];
		if (!(digit(c) || c == '-' || c == '+' || c == '$' || c == '.' || (unsigned char)c == 0xE2))
			continue;
		size_t e;
		if (scan_at(s, len, i, val, &e)) {
			*start = i;
			*end = *pos = e;
			return true;
		}
	}
	*pos = len;
	return false;
}

static bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

bool ev_num_parse_whole(const char *s, double *val)
{
	size_t a = 0, b = strlen(s);
	while (a < b && space(s[a]))
		a++;
	while (b > a && space(s[b - 1]))
		b--;
	size_t pos = a, st, en;
	double v;
	if (!ev_num_scan(s, b, &pos, &v, &st, &en) || st != a || en != b || !isfinite(v))
		return false;
	*val = v;
	return true;
}

/* The last number in s[a..b): true and its value and range, or false. */
static bool last_number(const char *s, size_t a, size_t b, double *val, size_t *st, size_t *en)
{
	bool found = false;
	size_t pos = a, x, y;
	double v;
	while (ev_num_scan(s, b, &pos, &v, &x, &y)) {
		found = true;
		*val = v, *st = x, *en = y;
	}
	return found;
}

/* The body of the last \boxed{...}: [*a, *b), braces balanced. */
static bool last_boxed(const char *s, size_t len, size_t *a, size_t *b)
{
	static const char tag[] = "\\boxed{";
	const size_t tl = sizeof tag - 1;
	size_t at = len + 1;
	for (size_t k = len >= tl ? len - tl + 1 : 0; k-- > 0;) {
		if (s[k] == '\\' && memcmp(s + k, tag, tl) == 0) {
			at = k;
			break;
		}
	}
	if (at > len)
		return false;
	size_t i = at + tl;
	int depth = 1;
	for (size_t j = i; j < len; j++) {
		if (s[j] == '{')
			depth++;
		else if (s[j] == '}' && --depth == 0) {
			*a = i, *b = j;
			return true;
		}
	}
	return false;
}

typedef struct {
	double tolerance;
	bool relative;
} numeric_checker;

static const char *const numeric_fields[] = {"tolerance", "relative", NULL};

static int numeric_parse(void **impl, const cJSON *spec, cJSON *norm)
{
	numeric_checker *n = calloc(1, sizeof *n);
	if (!n)
		return ev_error_set(EV_E_NOMEM, "checker: out of memory");
	int rc;
	if ((rc = ev_spec_num(&n->tolerance, spec, "tolerance", 1e-6, 0, HUGE_VAL)) ||
	    (rc = ev_spec_bool(&n->relative, spec, "relative", false))) {
		free(n);
		return rc;
	}
	if (!cJSON_AddNumberToObject(norm, "tolerance", n->tolerance) ||
	    !cJSON_AddBoolToObject(norm, "relative", n->relative)) {
		free(n);
		return ev_error_set(EV_E_NOMEM, "checker: out of memory");
	}
	*impl = n;
	return 0;
}

static bool close_enough(const numeric_checker *n, double got, double want)
{
	double d = fabs(got - want);
	if (!isfinite(d))
		return false;
	/* A relative tolerance around 0 would demand equality: fall back to
	 * the same value as an absolute one there. */
	double tol = n->relative && want != 0 ? n->tolerance * fabs(want) : n->tolerance;
	return d <= tol;
}

static int numeric_score(const void *impl, const ev_sample *sample, const char *answer, size_t len,
                         ev_check_out *out)
{
	const numeric_checker *n = impl;
	int rc = ev_check_need_targets(sample, "numeric");
	if (rc)
		return rc;
	double got, want;
	size_t st, en, a, b;
	bool found = last_boxed(answer, len, &a, &b) && last_number(answer, a, b, &got, &st, &en);
	if (!found)
		found = last_number(answer, 0, len, &got, &st, &en);
	bool hit = false;
	for (size_t i = 0; i < sample->n_targets; i++) {
		const char *t = sample->targets[i] ? sample->targets[i] : "";
		if (!ev_num_parse_whole(t, &want)) {
			char *q = ev_utf8_clip(t, strlen(t), EV_CHECK_MAX_QUOTE);
			rc = ev_error_set(EV_E_INVALID, "numeric checker: target \"%s\" is not a number", q ? q : "");
			free(q);
			return rc;
		}
		hit = hit || (found && close_enough(n, got, want));
	}
	if (!found) {
		out->reason = EV_REASON_NO_ANSWER;
		out->detail = ev_strdup("no number in the answer");
		return 0;
	}
	out->extracted = ev_utf8_clip(answer + st, en - st, EV_CHECK_MAX_EXTRACTED);
	out->score = hit ? 1.0 : 0.0;
	if (!hit) {
		out->reason = EV_REASON_WRONG_ANSWER;
		char *d = ev_check_detail_mismatch(sample, out->extracted ? out->extracted : "");
		out->detail = d ? ev_asprintf("%s (value %.17g, %s tolerance %g)", d, got,
		                              n->relative ? "relative" : "absolute", n->tolerance)
		                : NULL;
		free(d);
	}
	return 0;
}

const ev_checker_type ev_checker_numeric = {"numeric", numeric_fields, numeric_parse, numeric_score, free};
