/*
 * suites/gen_longctx.c: long-context suites fitted to exact token lengths.
 *
 * For each sample: build the recipe (gen_longctx_text.c), count its fixed
 * parts once (the prompt with an empty haystack) and each needle, then
 * draw haystack units, counting each unit once, until they cover the
 * budget. A binary search over the prefix sums picks the most units that
 * fit, a second one the most words of the next unit (the "pad"); needles
 * go to the unit boundary nearest their depth in haystack tokens. The
 * whole prompt is then rendered and counted once; the difference from the
 * estimate (tokens that merge across unit boundaries, template effects)
 * corrects the budget and the fit is redone, a few times at most. The
 * result never exceeds the target.
 */
#include <stdlib.h>
#include <string.h>

#include "suites/gen_longctx_int.h"

#define MAX_FIT_ROUNDS 8
#define PAD_CANDIDATES 8

static const char *const TASKS[] = {"niah", "multikey", "multivalue", "multiquery", "vt", "cwe", "agent"};
#define N_TASKS (sizeof TASKS / sizeof TASKS[0])

static int nomem(void) { return ev_error_set(EV_E_NOMEM, "long-context generator: out of memory"); }

bool ev_longctx_task_known(const char *name)
{
	for (size_t i = 0; name && i < N_TASKS; i++)
		if (!strcmp(name, TASKS[i]))
			return true;
	return false;
}

int ev_longctx_parse_length(size_t *out, const char *text)
{
	if (!text || !*text)
		return ev_error_set(EV_E_INVALID, "length: empty");
	size_t n = strlen(text);
	uint64_t mul = 1;
	char num[32];
	if (n >= sizeof num)
		return ev_error_set(EV_E_INVALID, "length \"%.32s\": too long", text);
	memcpy(num, text, n + 1);
	char last = num[n - 1];
	if (last == 'k' || last == 'K')
		mul = 1024;
	else if (last == 'm' || last == 'M')
		mul = 1024 * 1024;
	if (mul > 1)
		num[n - 1] = 0;
	int64_t v = 0;
	if (!ev_parse_i64(num, &v) || v <= 0 || num[0] == '+' || num[0] == ' ')
		return ev_error_set(EV_E_INVALID, "length \"%s\": expected a positive number, optionally with k or m",
				    text);
	if ((uint64_t)v > EV_LONGCTX_MAX_LENGTH / mul)
		return ev_error_set(EV_E_INVALID, "length \"%s\": over the limit of %zu tokens", text,
				    (size_t)EV_LONGCTX_MAX_LENGTH);
	*out = (size_t)((uint64_t)v * mul);
	return 0;
}

/* ---- counting ------------------------------------------------------------------ */

static int count_text(const ev_token_counter *tc, const char *text, size_t len, size_t *out)
{
	*out = 0;
	if (!len)
		return 0;
	int rc = tc->count(tc->ctx, text, len, out);
	return rc ? ev_error_wrap(rc, "long-context generator: counting tokens") : 0;
}

/* The prompt text of `msgs`: the counter's template, or the contents
 * joined by newlines when it has none. */
static int render(const ev_token_counter *tc, const ev_token_msg *msgs, size_t n, const char *tools, char **out,
		  size_t *len)
{
	*out = NULL;
	if (tc->render) {
		int rc = tc->render(tc->ctx, msgs, n, tools, out, len);
		return rc ? ev_error_wrap(rc, "long-context generator: rendering the prompt") : 0;
	}
	ev_buf b = EV_BUF_INIT((size_t)1 << 30);
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		if (msgs[i].content)
			rc = ev_buf_printf(&b, "%s%s", i ? "\n" : "", msgs[i].content);
		if (!rc && msgs[i].tool_calls_json)
			rc = ev_buf_printf(&b, "%s%s", i ? "\n" : "", msgs[i].tool_calls_json);
	}
	if (!rc && !b.data)
		rc = ev_buf_puts(&b, "");
	if (rc) {
		ev_buf_free(&b);
		return rc;
	}
	*out = ev_buf_detach(&b, len);
	return 0;
}

static int count_msgs(const ev_token_counter *tc, const ev_token_msg *msgs, size_t n, const char *tools, size_t *out)
{
	char *text = NULL;
	size_t len = 0;
	int rc = render(tc, msgs, n, tools, &text, &len);
	if (!rc)
		rc = count_text(tc, text, len, out);
	free(text);
	return rc;
}

static void round_msgs(ev_token_msg m[2], const lc_unit *u, const char *content)
{
	memset(m, 0, 2 * sizeof *m);
	m[0].role = "assistant";
	m[0].tool_calls_json = u->calls;
	m[1].role = "tool";
	m[1].content = content;
	m[1].tool_call_id = u->id;
	m[1].name = u->tool;
}

/* ---- the fitting ----------------------------------------------------------------- */

typedef struct {
	const ev_token_counter *tc;
	lc_recipe *R;
	ev_arena *arena;
	bool rounds;       /* agent: units are tool rounds */
	size_t base;       /* tokens of an empty prompt (rounds are counted as a difference) */
	lc_unit *units;
	size_t n_units, cap_units;
	size_t *prefix;    /* prefix[i]: tokens of units [0, i) */
	lc_unit long_pad;  /* agent: a long read_file round to cut the pad from */
	bool have_long_pad;
} fitter;

/* Tokens of a unit as it stands in the prompt (`text` overrides u->text). */
static int unit_tokens(fitter *F, const lc_unit *u, const char *text, size_t *out)
{
	if (!F->rounds)
		return count_text(F->tc, text, strlen(text), out);
	ev_token_msg m[2];
	round_msgs(m, u, text);
	size_t n = 0;
	int rc = count_msgs(F->tc, m, 2, NULL, &n);
	*out = n > F->base ? n - F->base : 0;
	return rc;
}

static int push_unit(fitter *F)
{
	if (F->n_units + 2 > F->cap_units) {
		size_t cap = F->cap_units ? F->cap_units * 2 : 1024;
		lc_unit *u = realloc(F->units, cap * sizeof *u);
		if (!u)
			return nomem();
		F->units = u;
		size_t *p = realloc(F->prefix, (cap + 1) * sizeof *p);
		if (!p)
			return nomem();
		F->prefix = p;
		F->cap_units = cap;
	}
	if (!F->n_units)
		F->prefix[0] = 0;
	lc_unit *u = &F->units[F->n_units];
	int rc = ev_lc_unit_next(&F->R->src, F->arena, u);
	if (!rc)
		rc = unit_tokens(F, u, u->text, &u->tokens);
	if (rc)
		return rc;
	F->prefix[F->n_units + 1] = F->prefix[F->n_units] + u->tokens;
	F->n_units++;
	return 0;
}

/* Draws units until they cover `budget` tokens with PAD_CANDIDATES to
 * spare (the pad comes out of one of the units after the last whole one). */
static int cover(fitter *F, size_t budget)
{
	while (F->n_units < PAD_CANDIDATES + 1 || F->prefix[F->n_units - PAD_CANDIDATES] <= budget) {
		int rc = push_unit(F);
		if (rc)
			return rc;
	}
	return 0;
}

static bool is_sep(char c) { return c == ' ' || c == '\n'; }

/* Bytes of the first `w` whitespace-separated pieces of `t`; the pieces
 * keep their leading separators. */
static size_t pad_len(const char *t, size_t w)
{
	if (!w)
		return 0;
	size_t seen = 0;
	for (size_t i = 1; t[i]; i++)
		if (is_sep(t[i]) && !is_sep(t[i - 1]) && ++seen == w)
			return i;
	return strlen(t);
}

static size_t n_pieces(const char *t)
{
	size_t n = *t ? 1 : 0;
	for (size_t i = 1; t[i]; i++)
		n += is_sep(t[i]) && !is_sep(t[i - 1]);
	return n;
}

typedef struct {
	size_t k, w, pad_tokens, estimate;
	size_t at[LC_MAX_NEEDLES]; /* boundary of each needle: 0..k, or k+1 after the pad */
	char *pad;                 /* arena */
	const lc_unit *pad_unit;   /* the unit the pad is cut from */
} layout;

/* The most pieces of unit j whose tokens fit in `rem`. */
static int pad_fit(fitter *F, const lc_unit *u, size_t rem, size_t *w_out, size_t *tok_out)
{
	size_t lo = 0, hi = n_pieces(u->text), tok = 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo + 1) / 2, t = 0;
		char *s = ev_arena_strndup(F->arena, u->text, pad_len(u->text, mid));
		if (!s)
			return nomem();
		int rc = unit_tokens(F, u, s, &t);
		if (rc)
			return rc;
		if (t <= rem) {
			lo = mid;
			tok = t;
		} else {
			hi = mid - 1;
		}
	}
	*w_out = lo;
	*tok_out = lo ? tok : 0;
	return 0;
}

static int choose(fitter *F, size_t budget, size_t fixed, layout *L)
{
	int rc = cover(F, budget);
	if (rc)
		return rc;
	/* The most whole units that fit. */
	size_t lo = 0, hi = F->n_units - 1;
	while (lo < hi) {
		size_t mid = lo + (hi - lo + 1) / 2;
		if (F->prefix[mid] <= budget)
			lo = mid;
		else
			hi = mid - 1;
	}
	/* The pad: the most pieces of one unit that fit in what is left. A
	 * tool round costs its headers before its first word, so the next
	 * unit may not fit at all where a later, longer one would, or where
	 * dropping the last whole unit would leave room: try a few and move
	 * the best one into place. */
	size_t best_k = lo, best_j = lo, best_w = 0, best_tok = 0;
	for (size_t k = lo > 2 ? lo - 2 : 0; k <= lo; k++) {
		for (size_t j = k; j < k + PAD_CANDIDATES && j < F->n_units; j++) {
			size_t rem = budget - F->prefix[k], w = 0, t = 0;
			if ((rc = pad_fit(F, &F->units[j], rem, &w, &t)))
				return rc;
			if (F->prefix[k] + t > F->prefix[best_k] + best_tok) {
				best_k = k;
				best_j = j;
				best_w = w;
				best_tok = t;
			}
		}
		if (budget - F->prefix[best_k] - best_tok <= 1)
			break;
	}
	/* Agent rounds are long: the gap can still be most of one. Cut the
	 * pad from a long read_file round instead, after k or k - 1 units. */
	bool use_long = false;
	if (F->rounds && budget - F->prefix[best_k] - best_tok > 1) {
		if (!F->have_long_pad) {
			if ((rc = ev_lc_pad_round(&F->R->src, F->arena, 120, &F->long_pad)))
				return rc;
			F->have_long_pad = true;
		}
		for (size_t k = lo > 0 ? lo - 1 : 0; k <= lo; k++) {
			size_t w = 0, t = 0;
			if ((rc = pad_fit(F, &F->long_pad, budget - F->prefix[k], &w, &t)))
				return rc;
			if (w && F->prefix[k] + t > F->prefix[best_k] + best_tok) {
				best_k = k;
				best_w = w;
				best_tok = t;
				use_long = true;
			}
		}
	}
	if (!use_long && best_j != best_k) {
		lc_unit t = F->units[best_j];
		memmove(&F->units[best_k + 1], &F->units[best_k], (best_j - best_k) * sizeof t);
		F->units[best_k] = t;
		for (size_t i = best_k; i < best_j + 1; i++)
			F->prefix[i + 1] = F->prefix[i] + F->units[i].tokens;
	}
	L->k = best_k;
	L->w = best_w;
	L->pad_tokens = best_tok;
	L->pad_unit = use_long ? &F->long_pad : &F->units[L->k];
	L->pad = ev_arena_strndup(F->arena, L->pad_unit->text, pad_len(L->pad_unit->text, L->w));
	if (!L->pad)
		return nomem();
	L->estimate = fixed + F->prefix[L->k] + L->pad_tokens;
	/* Needles at the boundary nearest depth * haystack tokens. */
	size_t H = F->prefix[L->k] + L->pad_tokens;
	for (size_t i = 0; i < F->R->n_needles; i++) {
		double d = F->R->needles[i].depth;
		if (d >= 1.0) {
			L->at[i] = L->k + 1;
			continue;
		}
		double T = d * (double)H;
		size_t a = 0, b = L->k;
		while (a < b) { /* first boundary with prefix >= T */
			size_t m = (a + b) / 2;
			if ((double)F->prefix[m] >= T)
				b = m;
			else
				a = m + 1;
		}
		if (a > 0 && T - (double)F->prefix[a - 1] < (double)F->prefix[a] - T)
			a--;
		L->at[i] = a;
	}
	return 0;
}

/* The messages of a layout; text tasks write their one user message's
 * content into `content`. *msgs is malloc'd. */
static int assemble(fitter *F, const layout *L, ev_buf *content, ev_token_msg **msgs_out, size_t *n_out)
{
	lc_recipe *R = F->R;
	size_t cap = 4 + 2 * (L->k + 2 + R->n_needles);
	ev_token_msg *m = calloc(cap, sizeof *m);
	if (!m)
		return nomem();
	size_t n = 0;
	int rc = 0;
	if (!F->rounds) {
		ev_buf_reset(content);
		rc = ev_buf_puts(content, R->prefix);
	} else {
		m[n].role = "system";
		m[n++].content = R->system;
		m[n].role = "user";
		m[n++].content = R->prefix;
	}
	for (size_t j = 0; j <= L->k + 1 && !rc; j++) {
		for (size_t i = 0; i < R->n_needles && !rc; i++) {
			if (L->at[i] != j)
				continue;
			if (F->rounds) {
				round_msgs(&m[n], &R->needles[i], R->needles[i].text);
				n += 2;
			} else {
				rc = ev_buf_puts(content, R->needles[i].text);
			}
		}
		if (j > L->k || rc)
			continue;
		if (j == L->k && !L->w)
			continue;
		const lc_unit *u = j < L->k ? &F->units[j] : L->pad_unit;
		const char *text = j < L->k ? u->text : L->pad;
		if (F->rounds) {
			round_msgs(&m[n], u, text);
			n += 2;
		} else {
			rc = ev_buf_puts(content, text);
		}
	}
	if (!rc && !F->rounds)
		rc = ev_buf_puts(content, R->suffix);
	if (!rc) {
		m[n].role = "user";
		m[n++].content = F->rounds ? R->suffix : content->data;
	}
	if (rc) {
		free(m);
		return rc;
	}
	*msgs_out = m;
	*n_out = n;
	return 0;
}

typedef struct {
	ev_token_msg *msgs;
	size_t n_msgs;
	ev_buf content;
	size_t tokens;        /* counted, whole prompt */
	size_t needle_token;  /* first needle's first token in the prompt, or SIZE_MAX */
	size_t haystack;      /* haystack tokens (estimate, needles left out) */
	double depth_actual;  /* first needle, from the unit counts */
	size_t units;
} fitted;

static void fitted_free(fitted *f)
{
	free(f->msgs);
	ev_buf_free(&f->content);
}

static int fit(const ev_token_counter *tc, lc_recipe *R, ev_arena *arena, size_t target, fitted *out)
{
	fitter F;
	memset(&F, 0, sizeof F);
	F.tc = tc;
	F.R = R;
	F.arena = arena;
	F.rounds = R->src.kind == LC_HAY_ROUNDS;
	ev_buf content = EV_BUF_INIT((size_t)1 << 30);
	ev_token_msg *msgs = NULL;
	char *text = NULL;
	size_t n_msgs = 0, len = 0;
	layout L, best_L;
	bool have_best = false;
	size_t best_tokens = 0;
	int rc = 0;
	memset(out, 0, sizeof *out);
	if (F.rounds && (rc = count_msgs(tc, NULL, 0, NULL, &F.base)))
		goto done;
	/* Fixed parts: the prompt with no haystack and no needles. */
	size_t fixed = 0, needles = 0;
	{
		lc_unit none[LC_MAX_NEEDLES];
		size_t nn = R->n_needles;
		memcpy(none, R->needles, sizeof none);
		R->n_needles = 0;
		memset(&L, 0, sizeof L);
		L.k = 0;
		L.w = 0;
		/* assemble() reads units[0] only when k > 0 or w > 0. */
		rc = assemble(&F, &L, &content, &msgs, &n_msgs);
		R->n_needles = nn;
		memcpy(R->needles, none, sizeof none);
		if (rc || (rc = count_msgs(tc, msgs, n_msgs, R->tools_json, &fixed)))
			goto done;
		free(msgs);
		msgs = NULL;
	}
	for (size_t i = 0; i < R->n_needles; i++) {
		lc_unit *u = &R->needles[i];
		if ((rc = unit_tokens(&F, u, u->text, &u->tokens)))
			goto done;
		needles += u->tokens;
	}
	if (target < fixed + needles + 8) {
		rc = ev_error_set(EV_E_INVALID, "%s: length %zu is too small (the question and needles alone take %zu tokens)",
				  R->task, target, fixed + needles);
		goto done;
	}
	size_t budget0 = target - fixed - needles;
	long adj = 0, over = 0;
	for (int round = 0; round < MAX_FIT_ROUNDS; round++) {
		long b = (long)budget0 - adj;
		size_t budget = b > 0 ? (size_t)b : 0;
		if ((rc = choose(&F, budget, fixed + needles, &L)))
			goto done;
		free(msgs);
		msgs = NULL;
		if ((rc = assemble(&F, &L, &content, &msgs, &n_msgs)))
			goto done;
		free(text);
		text = NULL;
		size_t A = 0;
		if ((rc = render(tc, msgs, n_msgs, R->tools_json, &text, &len)) || (rc = count_text(tc, text, len, &A)))
			goto done;
		ev_log_debug("longctx fit %s: round %d target %zu estimate %zu actual %zu (k %zu, w %zu, pad %zu)", R->task,
			     round, target, L.estimate, A, L.k, L.w, L.pad_tokens);
		if (A <= target && (!have_best || A > best_tokens)) {
			best_L = L;
			best_tokens = A;
			have_best = true;
		}
		/* Done when exact, or when the estimate was exact: the same
		 * budget would give the same layout again. */
		if (A <= target && (target - A <= 1 || A == L.estimate))
			break;
		/* The drift of the whole against the sum of its parts; when still
		 * over, lean further down each time so that the loop ends. */
		if (A > target)
			over++;
		adj = (long)A - (long)L.estimate + over * over;
	}
	if (!have_best) {
		rc = ev_error_set(EV_E_INTERNAL, "%s: could not fit %zu tokens", R->task, target);
		goto done;
	}
	if (best_L.k != L.k || best_L.w != L.w) {
		L = best_L;
		free(msgs);
		msgs = NULL;
		free(text);
		text = NULL;
		if ((rc = assemble(&F, &L, &content, &msgs, &n_msgs)) ||
		    (rc = render(tc, msgs, n_msgs, R->tools_json, &text, &len)))
			goto done;
	}
	out->tokens = best_tokens;
	out->needle_token = SIZE_MAX;
	out->haystack = F.prefix[L.k] + L.pad_tokens;
	out->units = L.k;
	out->depth_actual = -1;
	if (R->n_needles) {
		/* Where the first needle starts in the prompt, counted exactly. */
		const char *nt = R->needles[0].text;
		const char *hit = memmem(text, len, nt, strlen(nt));
		size_t j = L.at[0];
		size_t before = j <= L.k ? F.prefix[j] : out->haystack;
		out->depth_actual = out->haystack ? (double)before / (double)out->haystack : 0;
		if (hit && (rc = count_text(tc, text, (size_t)(hit - text), &out->needle_token)))
			goto done;
	}
	out->msgs = msgs;
	out->n_msgs = n_msgs;
	msgs = NULL;
	out->content = content;
	memset(&content, 0, sizeof content);
	/* Text tasks: the user message points into `content`, moved above. */
	if (!F.rounds)
		out->msgs[0].content = out->content.data;
done:
	free(text);
	free(msgs);
	ev_buf_free(&content);
	free(F.units);
	free(F.prefix);
	return rc;
}

/* ---- writing ------------------------------------------------------------------ */

static cJSON *msg_json(const ev_token_msg *m)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	bool ok = cJSON_AddStringToObject(o, "role", m->role) != NULL;
	if (ok && m->content)
		ok = cJSON_AddStringToObject(o, "content", m->content) != NULL;
	else if (ok)
		ok = cJSON_AddNullToObject(o, "content") != NULL;
	if (ok && m->tool_calls_json) {
		cJSON *tc = cJSON_Parse(m->tool_calls_json);
		ok = tc && cJSON_AddItemToObject(o, "tool_calls", tc);
	}
	if (ok && m->tool_call_id)
		ok = cJSON_AddStringToObject(o, "tool_call_id", m->tool_call_id) != NULL;
	if (ok && m->name)
		ok = cJSON_AddStringToObject(o, "name", m->name) != NULL;
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* A regex that matches only when every target occurs as a whole word. */
static char *all_of_pattern(const lc_recipe *R)
{
	ev_buf b = EV_BUF_INIT(1 << 16);
	int rc = ev_buf_puts(&b, "(?s)^");
	for (size_t i = 0; i < R->n_targets && !rc; i++) {
		rc = ev_buf_puts(&b, "(?=.*?\\b");
		for (const char *p = R->targets[i]; *p && !rc; p++) {
			/* Targets are letters, digits and dashes; escape anything else. */
			if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
			      *p == '-'))
				rc = ev_buf_putc(&b, '\\');
			if (!rc)
				rc = ev_buf_putc(&b, *p);
		}
		if (!rc)
			rc = ev_buf_puts(&b, "\\b)");
	}
	if (!rc)
		rc = ev_buf_putc(&b, '.');
	if (rc) {
		ev_buf_free(&b);
		return NULL;
	}
	return ev_buf_detach(&b, NULL);
}

static int sample_line(ev_buf *out, const char *id, const lc_recipe *R, size_t target, const fitted *f)
{
	cJSON *o = cJSON_CreateObject(), *msgs = NULL, *meta = NULL;
	char *line = NULL, *pat = NULL;
	int rc = 0;
	if (!o || !cJSON_AddStringToObject(o, "id", id) || !(msgs = cJSON_AddArrayToObject(o, "messages")))
		goto nomem;
	for (size_t i = 0; i < f->n_msgs; i++) {
		cJSON *m = msg_json(&f->msgs[i]);
		if (!m || !cJSON_AddItemToArray(msgs, m))
			goto nomem;
	}
	if (R->tools_json) {
		cJSON *t = cJSON_Parse(R->tools_json);
		if (!t || !cJSON_AddItemToObject(o, "tools", t))
			goto nomem;
	}
	if (R->n_targets == 1 && !R->all) {
		if (!cJSON_AddStringToObject(o, "target", R->targets[0]))
			goto nomem;
	} else {
		cJSON *t = cJSON_CreateStringArray((const char *const *)R->targets, (int)R->n_targets);
		if (!t || !cJSON_AddItemToObject(o, "target", t))
			goto nomem;
	}
	cJSON *ck = cJSON_AddObjectToObject(o, "checker");
	if (!ck)
		goto nomem;
	if (R->all) {
		if (!(pat = all_of_pattern(R)) || !cJSON_AddStringToObject(ck, "type", "regex") ||
		    !cJSON_AddStringToObject(ck, "pattern", pat) || !cJSON_AddStringToObject(ck, "compare", "none") ||
		    !cJSON_AddBoolToObject(ck, "ignore_case", true))
			goto nomem;
	} else if (!cJSON_AddStringToObject(ck, "type", "includes")) {
		goto nomem;
	}
	if (!(meta = cJSON_Duplicate(R->meta, true)) || !cJSON_AddItemToObject(o, "metadata", meta))
		goto nomem;
	bool ok = cJSON_AddStringToObject(meta, "task", R->task) && cJSON_AddNumberToObject(meta, "length", (double)target) &&
		  cJSON_AddNumberToObject(meta, "tokens", (double)f->tokens) &&
		  (R->depth >= 0 ? cJSON_AddNumberToObject(meta, "depth", R->depth) != NULL
		                 : cJSON_AddNullToObject(meta, "depth") != NULL) &&
		  cJSON_AddNumberToObject(meta, "needle_token",
					  f->needle_token == SIZE_MAX ? -1.0 : (double)f->needle_token) &&
		  cJSON_AddNumberToObject(meta, "depth_actual",
					  f->depth_actual < 0 ? -1.0 : (double)(long)(f->depth_actual * 10000) / 100.0) &&
		  cJSON_AddNumberToObject(meta, "haystack_tokens", (double)f->haystack) &&
		  cJSON_AddNumberToObject(meta, "units", (double)f->units);
	if (!ok || !(line = cJSON_PrintUnformatted(o)))
		goto nomem;
	if (!(rc = ev_buf_puts(out, line)))
		rc = ev_buf_putc(out, '\n');
	goto done;
nomem:
	rc = nomem();
done:
	free(pat);
	cJSON_free(line);
	cJSON_Delete(o);
	return rc;
}

static uint64_t sample_seed(uint64_t seed, const char *id)
{
	char buf[256];
	unsigned char h[32];
	int n = snprintf(buf, sizeof buf, "%llu/%s", (unsigned long long)seed, id);
	ev_sha256(h, buf, n > 0 ? (size_t)n : 0);
	uint64_t s = 0;
	for (int i = 0; i < 8; i++)
		s = s << 8 | h[i];
	return s;
}

static int one_sample(ev_buf *out, const ev_token_counter *tc, const char *task, size_t length, int depth, int idx,
		      uint64_t seed)
{
	char id[128];
	if (depth >= 0)
		snprintf(id, sizeof id, "%s-%zu-d%d-%d", task, length, depth, idx);
	else
		snprintf(id, sizeof id, "%s-%zu-%d", task, length, idx);
	ev_arena *a = NULL;
	lc_recipe R;
	fitted f;
	memset(&R, 0, sizeof R);
	memset(&f, 0, sizeof f);
	ev_rng rng;
	ev_rng_seed(&rng, sample_seed(seed, id));
	int rc = ev_arena_new(&a, (size_t)4 << 30);
	if (!rc)
		rc = ev_lc_recipe(&R, a, task, depth, length, &rng);
	if (!rc)
		rc = fit(tc, &R, a, length, &f);
	if (!rc)
		rc = sample_line(out, id, &R, length, &f);
	if (rc)
		ev_error_wrap(rc, "%s", id);
	fitted_free(&f);
	cJSON_Delete(R.meta);
	ev_arena_free(a);
	return rc;
}

int ev_gen_longctx(const ev_longctx_options *opt, const ev_token_counter *tc, const char *out_dir)
{
	static const size_t def_len[] = {4096};
	static const int def_depth[] = {0, 25, 50, 75, 100};
	if (!opt || !tc || !tc->count || !out_dir)
		return ev_error_set(EV_E_INVALID, "long-context generator: options, counter and folder are required");
	const char *const *tasks = opt->n_tasks ? opt->tasks : TASKS;
	size_t n_tasks = opt->n_tasks ? opt->n_tasks : N_TASKS;
	const size_t *lens = opt->n_lengths ? opt->lengths : def_len;
	size_t n_lens = opt->n_lengths ? opt->n_lengths : 1;
	const int *depths = opt->n_depths ? opt->depths : def_depth;
	size_t n_depths = opt->n_depths ? opt->n_depths : 5;
	if (opt->samples < 1)
		return ev_error_set(EV_E_INVALID, "samples: %d (at least 1)", opt->samples);
	for (size_t i = 0; i < n_tasks; i++)
		if (!ev_longctx_task_known(tasks[i]))
			return ev_error_set(EV_E_INVALID, "tasks: unknown task \"%.40s\" (niah, multikey, multivalue, "
					    "multiquery, vt, cwe, agent)", tasks[i] ? tasks[i] : "");
	for (size_t i = 0; i < n_depths; i++)
		if (depths[i] < 0 || depths[i] > 100)
			return ev_error_set(EV_E_INVALID, "depths: %d is outside 0..100", depths[i]);
	for (size_t i = 0; i < n_lens; i++)
		if (!lens[i] || lens[i] > EV_LONGCTX_MAX_LENGTH)
			return ev_error_set(EV_E_INVALID, "lengths: %zu is outside 1..%zu", lens[i],
					    (size_t)EV_LONGCTX_MAX_LENGTH);
	const char *name = opt->name ? opt->name : "longctx";
	if (!*name || strlen(name) > 64)
		return ev_error_set(EV_E_INVALID, "name: 1 to 64 characters");
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' ||
		      *p == '_' || *p == '.'))
			return ev_error_set(EV_E_INVALID, "name: \"%.40s\": letters, digits, '-', '_' and '.' only", name);
	long total = 0;
	for (size_t t = 0; t < n_tasks; t++) {
		bool nodepth = !strcmp(tasks[t], "vt") || !strcmp(tasks[t], "cwe");
		total += (long)(n_lens * (nodepth ? 1 : n_depths)) * opt->samples;
	}
	if (total > EV_LONGCTX_MAX_SAMPLES)
		return ev_error_set(EV_E_LIMIT, "%ld samples asked (at most %d)", total, EV_LONGCTX_MAX_SAMPLES);

	ev_buf out = EV_BUF_INIT((size_t)2 << 30);
	ev_progress *pg = NULL;
	char *suite = NULL;
	long done_n = 0;
	int rc = ev_progress_new(&pg, "longctx", total, stderr, opt->quiet);
	for (size_t t = 0; t < n_tasks && !rc; t++) {
		bool nodepth = !strcmp(tasks[t], "vt") || !strcmp(tasks[t], "cwe");
		for (size_t l = 0; l < n_lens && !rc; l++)
			for (size_t d = 0; d < (nodepth ? 1 : n_depths) && !rc; d++)
				for (int i = 0; i < opt->samples && !rc; i++) {
					rc = one_sample(&out, tc, tasks[t], lens[l], nodepth ? -1 : depths[d], i, opt->seed);
					ev_progress_update(pg, ++done_n, -1, 0);
				}
	}
	ev_progress_finish(pg);
	if (rc)
		goto done;
	suite = ev_asprintf("{\"name\":\"%s\",\"version\":\"1\",\"kind\":\"long-context\",\"description\":"
			    "\"Long-context tasks fitted to exact token lengths (seed %llu)\",\"checker\":{\"type\":"
			    "\"includes\"},\"generation\":{\"max_tokens\":256,\"temperature\":0}}\n",
			    name, (unsigned long long)opt->seed);
	if (!suite) {
		rc = nomem();
		goto done;
	}
	rc = ev_import_write_suite(out_dir, suite, out.data ? out.data : "", out.len);
done:
	free(suite);
	ev_progress_free(pg);
	ev_buf_free(&out);
	return rc;
}
