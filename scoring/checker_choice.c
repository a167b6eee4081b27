/*
 * scoring/checker_choice.c: the multiple-choice checker.
 *
 * The answer's letter is found by these rules, in order:
 *   1. the last explicit answer: "answer" followed by connecting words and
 *      formatting ("The answer is (C)", "**Final answer:** C",
 *      "Answer: $\boxed{C}$"); a bare letter there must be upper case;
 *   2. a lone letter: the whole answer is one letter, give or take
 *      formatting ("C", "(c)", "**C**.");
 *   3. an option label opening the answer: "C) Paris", "(C) Paris",
 *      "C. Paris", "**C:** Paris";
 *   4. the last formatted letter anywhere: "(C)", "[C]", "C)", "**C**",
 *      "\boxed{C}" (upper case, not inside a word).
 * Only letters in `letters` (default A-Z) count. The target is one letter,
 * possibly formatted the same ways; comparison ignores case.
 */
#include "scoring/scoring_int.h"

#include <stdlib.h>
#include <string.h>

/* Connecting words between "answer" and the letter are single tokens in a
 * possessive loop, so a failed match never backtracks through them. */
static const char EXPLICIT[] =
	"(?i)\\banswers?\\b"
	"(?:\\s|[:=\\-$*_>]|\\\\boxed\\{|\\\\text(?:bf)?\\{|\\\\mathrm\\{|\\bis\\b|\\bwas\\b|\\bwill\\s+be\\b"
	"|\\bwould\\s+be\\b|\\bshould\\s+be\\b|\\bmust\\s+be\\b|\\bchoice\\b|\\boption\\b|\\bletter\\b)*+"
	"(?:[(\\[](?<p>[a-z])[)\\]]|(?-i:(?<u>[A-Z]))(?![\\p{L}\\p{N}]))";
static const char LABEL[] =
	"\\A\\s*(?:\\*\\*|__)?[(\\[]?(?<l>[A-Z])(?:[)\\].:]|\\*\\*[)\\].:]?)(?:\\*\\*|__)?(?=\\s|\\z)";
static const char FORMATTED[] =
	"(?<![\\p{L}\\p{N}])(?:\\((?<a>[A-Z])\\)|\\[(?<b>[A-Z])\\]|(?<c>[A-Z])\\)|\\*\\*(?<d>[A-Z])\\*\\*"
	"|\\\\boxed\\{(?:\\\\text\\{)?(?<e>[A-Z])\\}?\\})";

typedef struct {
	bool allowed[26];
	char letters[27];
	ev_rx explicit_, label, formatted;
	pcre2_match_context *mctx;
} choice_checker;

static const char *const choice_fields[] = {"letters", NULL};

static void choice_free(void *impl)
{
	choice_checker *c = impl;
	if (!c)
		return;
	ev_rx_clear(&c->explicit_);
	ev_rx_clear(&c->label);
	ev_rx_clear(&c->formatted);
	pcre2_match_context_free(c->mctx);
	free(c);
}

static int choice_parse(void **impl, const cJSON *spec, cJSON *norm)
{
	int rc = 0;
	choice_checker *c = calloc(1, sizeof *c);
	if (!c)
		return ev_error_set(EV_E_NOMEM, "checker: out of memory");
	const cJSON *letters = cJSON_GetObjectItemCaseSensitive(spec, "letters");
	if (letters) {
		const char *s = cJSON_IsString(letters) ? letters->valuestring : NULL;
		if (!s || !*s) {
			rc = ev_error_set(EV_E_INVALID, "checker.letters: expected a string of letters such as \"ABCD\"");
			goto done;
		}
		for (size_t i = 0; s[i]; i++) {
			char ch = s[i];
			if (ch >= 'a' && ch <= 'z')
				ch = (char)(ch - 32);
			if (ch < 'A' || ch > 'Z') {
				rc = ev_error_set(EV_E_INVALID, "checker.letters: character %zu is not a letter A-Z", i);
				goto done;
			}
			c->allowed[ch - 'A'] = true;
		}
	} else {
		memset(c->allowed, 1, sizeof c->allowed);
	}
	size_t n = 0;
	for (int i = 0; i < 26; i++)
		if (c->allowed[i])
			c->letters[n++] = (char)('A' + i);
	c->letters[n] = '\0';
	/* The built-in patterns are fixed: a failure here is a bug. */
	if ((rc = ev_rx_compile(&c->explicit_, EXPLICIT, sizeof EXPLICIT - 1, 0, "choice explicit pattern")) ||
	    (rc = ev_rx_compile(&c->label, LABEL, sizeof LABEL - 1, 0, "choice label pattern")) ||
	    (rc = ev_rx_compile(&c->formatted, FORMATTED, sizeof FORMATTED - 1, 0, "choice formatted pattern")))
		goto done;
	c->mctx = ev_rx_context(EV_RX_MATCH_LIMIT, EV_RX_DEPTH_LIMIT);
	if (!c->mctx || !cJSON_AddStringToObject(norm, "letters", c->letters)) {
		rc = ev_error_set(EV_E_NOMEM, "checker: out of memory");
		goto done;
	}
	*impl = c;
	c = NULL;
done:
	choice_free(c);
	return rc;
}

static char upper_allowed(const choice_checker *c, char ch)
{
	if (ch >= 'a' && ch <= 'z')
		ch = (char)(ch - 32);
	return ch >= 'A' && ch <= 'Z' && c->allowed[ch - 'A'] ? ch : 0;
}

/* The letter of the first (or last) match of rx whose named letter group
 * holds an allowed letter; 0 when none, a negative PCRE2 error on a limit. */
static int find_letter(const choice_checker *c, const ev_rx *rx, const char *s, size_t len, bool last, char *out)
{
	pcre2_match_data *md = pcre2_match_data_create_from_pattern(rx->code, NULL);
	if (!md)
		return PCRE2_ERROR_NOMEMORY;
	size_t off = 0;
	int rc;
	*out = 0;
	while ((rc = ev_rx_next(rx, c->mctx, md, s, len, &off)) == 1) {
		PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
		char ch = 0;
		/* Exactly one letter group takes part in a match. */
		for (uint32_t g = 1; g <= rx->n_groups && !ch; g++)
			if (ov[2 * g] != PCRE2_UNSET && ov[2 * g + 1] == ov[2 * g] + 1)
				ch = upper_allowed(c, s[ov[2 * g]]);
		if (ch) {
			*out = ch;
			if (!last)
				break;
		}
	}
	pcre2_match_data_free(md);
	return rc < 0 ? rc : 0;
}

/* Formatting that may surround a lone letter. */
static bool decoration(char ch) { return strchr(" \t\r\n*_()[]{}.:$", ch) != NULL && ch != '\0'; }

static char lone_letter(const choice_checker *c, const char *s, size_t len)
{
	size_t a = 0, b = len;
	while (a < b && decoration(s[a]))
		a++;
	while (b > a && decoration(s[b - 1]))
		b--;
	return b == a + 1 ? upper_allowed(c, s[a]) : 0;
}

/* The answer's letter; 0 when none; a negative PCRE2 error on a limit. */
static int extract(const choice_checker *c, const char *s, size_t len, char *out)
{
	int rc;
	if ((rc = find_letter(c, &c->explicit_, s, len, true, out)) || *out)
		return rc;
	if ((*out = lone_letter(c, s, len)))
		return 0;
	if ((rc = find_letter(c, &c->label, s, len, false, out)) || *out)
		return rc;
	return find_letter(c, &c->formatted, s, len, true, out);
}

static int choice_score(const void *impl, const ev_sample *sample, const char *answer, size_t len,
                        ev_check_out *out)
{
	const choice_checker *c = impl;
	int rc = ev_check_need_targets(sample, "choice");
	if (rc)
		return rc;
	char got = 0;
	int x = extract(c, answer, len, &got);
	if (x == PCRE2_ERROR_NOMEMORY)
		return ev_error_set(EV_E_NOMEM, "scoring: out of memory");
	if (x < 0) {
		char msg[128];
		ev_rx_errtext(x, msg, sizeof msg);
		out->reason = EV_REASON_MATCH_LIMIT;
		out->detail = ev_asprintf("choice extraction: %s on a %zu-byte answer", msg, len);
		return 0;
	}
	bool hit = false;
	for (size_t i = 0; i < sample->n_targets; i++) {
		const char *t = sample->targets[i] ? sample->targets[i] : "";
		char want = lone_letter(c, t, strlen(t));
		if (!want) {
			char *q = ev_utf8_clip(t, strlen(t), EV_CHECK_MAX_QUOTE);
			rc = ev_error_set(EV_E_INVALID, "choice checker: target \"%s\" is not one of the letters %s",
			                  q ? q : "", c->letters);
			free(q);
			return rc;
		}
		hit = hit || want == got;
	}
	if (!got) {
		out->reason = EV_REASON_NO_ANSWER;
		out->detail = ev_asprintf("no choice letter (%s) found in the answer", c->letters);
		return 0;
	}
	char g[2] = {got, '\0'};
	out->extracted = ev_strdup(g);
	out->score = hit ? 1.0 : 0.0;
	if (!hit) {
		out->reason = EV_REASON_WRONG_ANSWER;
		out->detail = ev_check_detail_mismatch(sample, g);
	}
	return 0;
}

const ev_checker_type ev_checker_choice = {"choice", choice_fields, choice_parse, choice_score, choice_free};
