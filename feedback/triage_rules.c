/*
 * feedback/triage_rules.c: label rules for triage: "label<TAB>PCRE2 pattern"
 * lines (a file, or the built-in set), matched case-insensitively against an
 * issue's title and body with PCRE2 match and depth limits.
 */
#include "feedback/issues_int.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdlib.h>
#include <string.h>

#define RULES_MAX_FILE ((size_t)1 << 20)
#define RULES_MAX 1000
#define RULES_MATCH_LIMIT 1000000
#define RULES_DEPTH_LIMIT 10000

typedef struct {
	char *label;
	pcre2_code *re;
} rule;

struct ev_label_rules {
	rule *v;
	size_t n;
	pcre2_match_context *mctx;
};

/* The built-in rules: topics that community reports about a model release
 * fall into. Word boundaries keep "image" from matching "imagine". */
static const char *const builtin_rules[][2] = {
	{"vision", "\\b(images?|pictures?|photos?|screenshots?|ocr|vision|diagrams?|charts?|figures?|visual)\\b"},
	{"video", "\\b(videos?|clips?|frames?|mp4|webm|footage)\\b"},
	{"document", "\\b(pdfs?|docx?|pptx|xlsx|spreadsheets?|documents?|slides?|invoices?)\\b"},
	{"long-context", "\\b(long[- ]context|context (window|length)|\\d+k tokens|million tokens|needle|haystack|"
	                 "forgets? (the )?(beginning|start|earlier))\\b"},
	{"tool-use", "\\b(tool[- ]?(calls?|calling|use)|function[- ]call(s|ing)?|json schema|api calls?|"
	             "agents?|agentic)\\b"},
	{"coding", "\\b(code|coding|python|javascript|typescript|rust|golang|c\\+\\+|java|compil(e|er|es|ing)|"
	           "syntax errors?|stack ?traces?|unit tests?|humaneval|mbpp|bug in the (code|function))\\b"},
	{"math", "\\b(math|maths|arithmetic|calculat(e|es|ed|ion|ions)|equations?|algebra|geometry|integrals?|"
	         "gsm8k|multiplication|fractions?)\\b"},
	{"safety", "\\b(unsafe|harmful|jailbreaks?|refus(e|es|ed|al|als)|toxic|self[- ]harm|privacy|pii|"
	           "dangerous)\\b"},
	{"multilingual", "\\b(translat(e|es|ed|ion|ions)|multilingual|chinese|french|spanish|german|japanese|"
	                 "korean|arabic|hindi)\\b"},
	{"hallucination", "\\b(hallucinat(e|es|ed|ion|ions|ing)|made[- ]up|fabricat(e|es|ed|ion)|"
	                  "non-?existent|fake (citations?|references?))\\b"},
	{"formatting", "\\b(markdown|json output|malformed json|formatting|format(ted)? wrong|broken table)\\b"},
	{"reasoning", "\\b(reasoning|logic(al)?|step[- ]by[- ]step|chain[- ]of[- ]thought|thinking (loop|forever))\\b"},
	{"performance", "\\b(slow|latency|timeouts?|out of memory|oom|crash(es|ed)?|hangs?)\\b"},
};

void ev_label_rules_free(ev_label_rules *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++) {
		free(r->v[i].label);
		pcre2_code_free(r->v[i].re);
	}
	free(r->v);
	pcre2_match_context_free(r->mctx);
	free(r);
}

static int add_rule(ev_label_rules *r, const char *label, size_t label_len, const char *pat, size_t pat_len,
                    const char *where)
{
	if (r->n >= RULES_MAX)
		return ev_error_set(EV_E_LIMIT, "%s: more than %d rules", where, RULES_MAX);
	if (label_len == 0 || label_len > 64)
		return ev_error_set(EV_E_INVALID, "%s: label: expected 1-64 bytes", where);
	for (size_t i = 0; i < label_len; i++)
		if ((unsigned char)label[i] < 0x20 || label[i] == 0x7f)
			return ev_error_set(EV_E_INVALID, "%s: label: control character", where);
	if (pat_len == 0)
		return ev_error_set(EV_E_INVALID, "%s: pattern: empty", where);
	if (!ev_utf8_valid(label, label_len) || !ev_utf8_valid(pat, pat_len))
		return ev_error_set(EV_E_INVALID, "%s: not valid UTF-8", where);
	int err = 0;
	PCRE2_SIZE off = 0;
	pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, pat_len, PCRE2_CASELESS | PCRE2_UTF | PCRE2_UCP, &err, &off,
	                               NULL);
	if (!re) {
		PCRE2_UCHAR msg[160];
		pcre2_get_error_message(err, msg, sizeof msg);
		return ev_error_set(EV_E_INVALID, "%s: pattern: at offset %zu: %s", where, (size_t)off,
		                    (const char *)msg);
	}
	rule *nv = realloc(r->v, (r->n + 1) * sizeof *nv);
	if (!nv) {
		pcre2_code_free(re);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	r->v = nv;
	if (!(r->v[r->n].label = ev_strndup(label, label_len))) {
		pcre2_code_free(re);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	r->v[r->n].re = re;
	r->n++;
	return 0;
}

int ev_label_rules_new(ev_label_rules **out, const char *path)
{
	ev_label_rules *r = calloc(1, sizeof *r);
	char *text = NULL;
	size_t len = 0;
	int rc = 0;
	*out = NULL;
	if (!r || !(r->mctx = pcre2_match_context_create(NULL))) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	pcre2_set_match_limit(r->mctx, RULES_MATCH_LIMIT);
	pcre2_set_depth_limit(r->mctx, RULES_DEPTH_LIMIT);
	if (!path) {
		for (size_t i = 0; i < sizeof builtin_rules / sizeof builtin_rules[0]; i++)
			if ((rc = add_rule(r, builtin_rules[i][0], strlen(builtin_rules[i][0]), builtin_rules[i][1],
			                   strlen(builtin_rules[i][1]), "built-in rules")))
				goto done;
	} else {
		if ((rc = ev_file_read(&text, &len, path, RULES_MAX_FILE)))
			goto done;
		size_t lineno = 0;
		for (const char *p = text; p < text + len;) {
			const char *e = memchr(p, '\n', (size_t)(text + len - p));
			size_t n = e ? (size_t)(e - p) : (size_t)(text + len - p);
			lineno++;
			size_t m = n;
			if (m && p[m - 1] == '\r')
				m--;
			char where[300];
			snprintf(where, sizeof where, "%s:%zu", path, lineno);
			const char *q = p;
			while (q < p + m && (*q == ' ' || *q == '\t'))
				q++;
			if (q < p + m && *q != '#') {
				const char *tab = memchr(p, '\t', m);
				if (!tab) {
					rc = ev_error_set(EV_E_PARSE, "%s: expected label<TAB>pattern", where);
					goto done;
				}
				if ((rc = add_rule(r, p, (size_t)(tab - p), tab + 1, (size_t)(p + m - tab - 1), where)))
					goto done;
			}
			p += n + (e ? 1 : 0);
		}
	}
	*out = r;
	r = NULL;
done:
	free(text);
	ev_label_rules_free(r);
	return rc;
}

int ev_label_rules_apply(const ev_label_rules *r, const char *text, int (*add)(void *ctx, const char *label),
                         void *ctx)
{
	int rc = 0;
	if (!r || !text)
		return 0;
	size_t len = strlen(text);
	if (!ev_utf8_valid(text, len))
		return ev_error_set(EV_E_INVALID, "label rules: text is not valid UTF-8");
	for (size_t i = 0; i < r->n && !rc; i++) {
		pcre2_match_data *md = pcre2_match_data_create_from_pattern(r->v[i].re, NULL);
		if (!md)
			return ev_error_set(EV_E_NOMEM, "out of memory");
		int m = pcre2_match(r->v[i].re, (PCRE2_SPTR)text, len, 0, PCRE2_NO_UTF_CHECK, md, r->mctx);
		pcre2_match_data_free(md);
		/* A rule that hits its match limit is simply no match: one bad
		 * pattern must not stop triage. */
		if (m > 0)
			rc = add(ctx, r->v[i].label);
		else if (m != PCRE2_ERROR_NOMATCH)
			ev_log_debug("label rule %s: no match (pcre2 error %d)", r->v[i].label, m);
	}
	return rc;
}
