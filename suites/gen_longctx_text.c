/*
 * suites/gen_longctx_text.c: the content of the long-context tasks.
 *
 * Word lists, the haystack kinds (essay-like sentences, random-word noise,
 * numbered log lines, word lists, agent tool rounds), the needle kinds and
 * the recipe of each task (needles, question, answers). Everything is drawn
 * from the ev_rng it is given, so a seed gives the same text everywhere.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "suites/gen_longctx_int.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static const char *const ADJ[] = {
	"quiet", "amber", "hollow", "brisk", "silver", "crooked", "gentle", "northern", "patient", "rusty",
	"bright", "distant", "narrow", "golden", "humble", "restless", "frozen", "velvet", "bitter", "swift",
	"ancient", "sleepy", "copper", "wild", "tidy", "stormy", "lonely", "scarlet", "wooden", "curious",
	"polished", "dusty", "faint", "hidden", "eager", "pale", "stubborn", "mellow", "sharp", "drowsy"};
static const char *const NOUN[] = {
	"river", "lantern", "harbor", "meadow", "engine", "orchard", "falcon", "bridge", "compass", "garden",
	"kettle", "glacier", "library", "violin", "canyon", "beacon", "ledger", "cellar", "tower", "pebble",
	"island", "carriage", "workshop", "forest", "mirror", "anchor", "window", "station", "quarry", "feather",
	"market", "valley", "signal", "blanket", "ferry", "chimney", "pasture", "theater", "ladder", "cottage"};
static const char *const VERB[] = {
	"watched", "repaired", "followed", "painted", "described", "carried", "measured", "ignored", "visited",
	"remembered", "sketched", "guarded", "polished", "questioned", "admired", "mapped", "counted", "praised",
	"studied", "collected"};
static const char *const PERSON[] = {
	"the old miller", "a young clerk", "the ferryman", "my grandmother", "a travelling tailor", "the teacher",
	"a tired soldier", "the baker's son", "an honest judge", "the lighthouse keeper", "a clever student",
	"the village doctor"};
static const char *const ADV[] = {
	"slowly", "every morning", "without a word", "after the rain", "in secret", "once a year", "with great care",
	"before dawn", "for hours", "now and then"};
static const char *const SERVICE[] = {"auth", "billing", "search", "gateway", "storage", "mailer", "scheduler",
				      "indexer"};
static const char *const LEVEL[] = {"INFO", "INFO", "INFO", "DEBUG", "WARN", "INFO", "ERROR"};
static const char *const EVENT[] = {"request served", "cache miss", "retrying upstream", "session opened",
				    "session closed", "job queued", "job finished", "connection reset",
				    "config reloaded", "health check passed"};
static const char *const SYL[] = {"ka", "lo", "mi", "ren", "tu", "sa", "vor", "pel", "dri", "no", "zan", "fi",
				  "gar", "be", "qui", "tal", "mo", "sen", "ro", "ush", "el", "pra", "ny", "dox"};

static const char *pick(ev_rng *r, const char *const *list, size_t n) { return list[ev_rng_below(r, n)]; }
#define PICK(r, list) pick((r), (list), N_OF(list))

static int nomem(void) { return ev_error_set(EV_E_NOMEM, "long-context generator: out of memory"); }

/* A formatted string in the arena. */
static char *afmt(ev_arena *a, const char *fmt, ...) EV_PRINTF(2, 3);
static char *afmt(ev_arena *a, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	char *s = ev_arena_alloc(a, (size_t)n + 1);
	if (!s)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return s;
}

static char *adup_buf(ev_arena *a, ev_buf *b)
{
	return ev_arena_strndup(a, b->data ? b->data : "", b->len);
}

/* A made-up word of 2-3 syllables. */
static void pseudo_word(ev_rng *r, char *out, size_t cap)
{
	int n = 2 + (int)ev_rng_below(r, 2);
	out[0] = 0;
	for (int i = 0; i < n; i++)
		strncat(out, PICK(r, SYL), cap - strlen(out) - 1);
}

/* ---- haystack units --------------------------------------------------------- */

static int unit_essay(lc_source *s, ev_buf *b)
{
	ev_rng *r = &s->rng;
	/* A paragraph break now and then, carried at the start of the unit. */
	const char *sep = ev_rng_below(r, 7) == 0 ? "\n\n" : " ";
	switch (ev_rng_below(r, 4)) {
	case 0:
		return ev_buf_printf(b, "%sThe %s %s %s the %s %s near the %s.", sep, PICK(r, ADJ), PICK(r, NOUN),
				     PICK(r, VERB), PICK(r, ADJ), PICK(r, NOUN), PICK(r, NOUN));
	case 1:
	{
		const char *who = PICK(r, PERSON);
		return ev_buf_printf(b, "%s%c%s %s the %s %s.", sep, who[0] - 32, who + 1, PICK(r, VERB), PICK(r, NOUN),
				     PICK(r, ADV));
	}
	case 2:
		return ev_buf_printf(b, "%sNobody knew why the %s by the %s was so %s, yet everyone %s it.", sep,
				     PICK(r, NOUN), PICK(r, NOUN), PICK(r, ADJ), PICK(r, VERB));
	default:
		return ev_buf_printf(b, "%sIn the %s %s, %s %s a %s %s.", sep, PICK(r, ADJ), PICK(r, NOUN),
				     PICK(r, PERSON), PICK(r, VERB), PICK(r, ADJ), PICK(r, NOUN));
	}
}

static int unit_noise(lc_source *s, ev_buf *b)
{
	ev_rng *r = &s->rng;
	int n = 5 + (int)ev_rng_below(r, 6);
	int rc = ev_buf_puts(b, ev_rng_below(r, 8) == 0 ? "\n" : " ");
	for (int i = 0; i < n && !rc; i++) {
		const char *w = ev_rng_below(r, 2) ? PICK(r, NOUN) : ev_rng_below(r, 2) ? PICK(r, ADJ) : PICK(r, VERB);
		rc = ev_buf_printf(b, "%s%s", i ? " " : "", w);
	}
	return rc;
}

static int unit_log(lc_source *s, ev_buf *b)
{
	ev_rng *r = &s->rng;
	s->serial += 1 + (long)ev_rng_below(r, 40);
	long t = s->serial;
	return ev_buf_printf(b, "\n2026-03-%02ld %02ld:%02ld:%02ld %s %s[%u]: %s id=%u in %u ms", 1 + (t / 86400) % 28,
			     (t / 3600) % 24, (t / 60) % 60, t % 60, PICK(r, LEVEL), PICK(r, SERVICE),
			     (unsigned)(100 + ev_rng_below(r, 900)), PICK(r, EVENT), (unsigned)ev_rng_below(r, 100000),
			     (unsigned)(1 + ev_rng_below(r, 900)));
}

/* One round of the word list: each frequent word once and `per_round`
 * words from the rare pool, taken in turn, shuffled together. A rare word
 * so appears at most ceil(rounds * per_round / n_rare) times, well under
 * the frequent words' count (n_rare = 10 * per_round). */
static int unit_words(lc_source *s, ev_buf *b)
{
	const char *w[64];
	size_t n = 0;
	for (size_t i = 0; i < 10; i++)
		w[n++] = s->common[i];
	for (size_t i = 0; i < s->per_round && n < N_OF(w); i++) {
		w[n++] = s->rare[s->rare_at];
		s->rare_at = (s->rare_at + 1) % s->n_rare;
	}
	for (size_t i = n; i > 1; i--) {
		size_t j = ev_rng_below(&s->rng, i);
		const char *t = w[i - 1];
		w[i - 1] = w[j];
		w[j] = t;
	}
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++)
		rc = ev_buf_printf(b, "%s%s", i == 0 ? "\n" : " ", w[i]);
	return rc;
}

static const char *const TOOLS_JSON =
	"[{\"type\":\"function\",\"function\":{\"name\":\"search_logs\",\"description\":\"Search the service logs.\","
	"\"parameters\":{\"type\":\"object\",\"properties\":{\"service\":{\"type\":\"string\"},\"query\":{\"type\":"
	"\"string\"}},\"required\":[\"service\",\"query\"]}}},"
	"{\"type\":\"function\",\"function\":{\"name\":\"get_ticket\",\"description\":\"Read a support ticket.\","
	"\"parameters\":{\"type\":\"object\",\"properties\":{\"ticket_id\":{\"type\":\"string\"}},\"required\":["
	"\"ticket_id\"]}}},"
	"{\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"description\":\"Read a file of the "
	"runbook.\",\"parameters\":{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}},"
	"\"required\":[\"path\"]}}},"
	"{\"type\":\"function\",\"function\":{\"name\":\"get_metrics\",\"description\":\"Current metrics of a "
	"service.\",\"parameters\":{\"type\":\"object\",\"properties\":{\"service\":{\"type\":\"string\"}},"
	"\"required\":[\"service\"]}}}]";

static char *call_json(ev_arena *a, const char *id, const char *name, const char *args_json)
{
	ev_buf b = EV_BUF_INIT(1 << 16);
	char *out = NULL;
	if (!ev_buf_printf(&b, "[{\"id\":\"%s\",\"type\":\"function\",\"function\":{\"name\":\"%s\",\"arguments\":",
			   id, name) &&
	    !ev_json_buf_str(&b, args_json) && !ev_buf_puts(&b, "}}]"))
		out = adup_buf(a, &b);
	ev_buf_free(&b);
	return out;
}

static void ticket_id(ev_rng *r, char out[16]) { snprintf(out, 16, "T-%05u", (unsigned)(10000 + ev_rng_below(r, 90000))); }

static void access_code(ev_rng *r, char out[16])
{
	static const char al[] = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
	for (int i = 0; i < 9; i++)
		out[i] = i == 4 ? '-' : al[ev_rng_below(r, sizeof al - 1)];
	out[9] = 0;
}

/* A ticket's tool answer; `code` is its access code. */
static int ticket_text(ev_buf *b, ev_rng *r, const char *id, const char *code)
{
	return ev_buf_printf(b, "ticket %s\nstatus: %s\nservice: %s\nreporter: %s\naccess code: %s\nsummary: the %s %s "
			     "%s the %s",
			     id, ev_rng_below(r, 2) ? "open" : "pending", PICK(r, SERVICE), PICK(r, PERSON), code,
			     PICK(r, ADJ), PICK(r, NOUN), PICK(r, VERB), PICK(r, NOUN));
}

static int unit_round(lc_source *s, ev_arena *a, lc_unit *u, ev_buf *b)
{
	ev_rng *r = &s->rng;
	char id[24], args[160];
	snprintf(id, sizeof id, "call_%08llx", (unsigned long long)(ev_rng_next(r) & 0xffffffffu));
	const char *name = NULL;
	int rc = 0;
	switch (ev_rng_below(r, 4)) {
	case 0: {
		const char *svc = PICK(r, SERVICE);
		name = "search_logs";
		snprintf(args, sizeof args, "{\"service\": \"%s\", \"query\": \"%s\"}", svc, PICK(r, EVENT));
		int n = 2 + (int)ev_rng_below(r, 4);
		for (int i = 0; i < n && !rc; i++) {
			lc_source tmp = *s;
			rc = unit_log(&tmp, b);
			s->rng = tmp.rng;
			s->serial = tmp.serial;
		}
		if (!rc && b->len && b->data[0] == '\n') {
			memmove(b->data, b->data + 1, b->len);
			b->len--;
		}
		break;
	}
	case 1: {
		char tid[16], code[16];
		do
			ticket_id(r, tid);
		while (!strcmp(tid, s->avoid));
		access_code(r, code);
		name = "get_ticket";
		snprintf(args, sizeof args, "{\"ticket_id\": \"%s\"}", tid);
		rc = ticket_text(b, r, tid, code);
		break;
	}
	case 2: {
		name = "read_file";
		snprintf(args, sizeof args, "{\"path\": \"runbook/%s-%s.md\"}", PICK(r, ADJ), PICK(r, NOUN));
		int n = 2 + (int)ev_rng_below(r, 3);
		for (int i = 0; i < n && !rc; i++)
			rc = unit_essay(s, b);
		if (!rc && b->len && (b->data[0] == ' ' || b->data[0] == '\n')) {
			size_t k = b->data[0] == ' ' ? 1 : 2;
			memmove(b->data, b->data + k, b->len - k + 1);
			b->len -= k;
		}
		break;
	}
	default: {
		const char *svc = PICK(r, SERVICE);
		name = "get_metrics";
		snprintf(args, sizeof args, "{\"service\": \"%s\"}", svc);
		rc = ev_buf_printf(b, "service: %s\nrequests_per_s: %u\nerror_rate: 0.%03u\np99_ms: %u\ninstances: %u", svc,
				   (unsigned)ev_rng_below(r, 5000), (unsigned)ev_rng_below(r, 1000),
				   (unsigned)(5 + ev_rng_below(r, 2000)), (unsigned)(1 + ev_rng_below(r, 40)));
	}
	}
	if (rc)
		return rc;
	s->serial++;
	u->tool = (char *)name;
	if (!(u->id = ev_arena_strdup(a, id)) || !(u->calls = call_json(a, id, name, args)) ||
	    !(u->text = adup_buf(a, b)))
		return nomem();
	return 0;
}

int ev_lc_pad_round(lc_source *src, ev_arena *a, size_t sentences, lc_unit *u)
{
	ev_rng *r = &src->rng;
	char id[24], args[160];
	memset(u, 0, sizeof *u);
	snprintf(id, sizeof id, "call_%08llx", (unsigned long long)(ev_rng_next(r) & 0xffffffffu));
	snprintf(args, sizeof args, "{\"path\": \"runbook/%s-%s-notes.md\"}", PICK(r, ADJ), PICK(r, NOUN));
	ev_buf b = EV_BUF_INIT((size_t)1 << 24);
	int rc = 0;
	for (size_t i = 0; i < sentences && !rc; i++)
		rc = unit_essay(src, &b);
	if (!rc && b.len) {
		size_t k = b.data[0] == ' ' ? 1 : 2;
		memmove(b.data, b.data + k, b.len - k + 1);
		b.len -= k;
	}
	u->tool = "read_file";
	if (!rc && (!(u->id = ev_arena_strdup(a, id)) || !(u->calls = call_json(a, id, "read_file", args)) ||
		    !(u->text = adup_buf(a, &b))))
		rc = nomem();
	ev_buf_free(&b);
	return rc;
}

int ev_lc_unit_next(lc_source *src, ev_arena *a, lc_unit *u)
{
	ev_buf b = EV_BUF_INIT(1 << 20);
	int rc = 0;
	memset(u, 0, sizeof *u);
	switch (src->kind) {
	case LC_HAY_ESSAY: rc = unit_essay(src, &b); break;
	case LC_HAY_NOISE: rc = unit_noise(src, &b); break;
	case LC_HAY_LOGS: rc = unit_log(src, &b); break;
	case LC_HAY_WORDS: rc = unit_words(src, &b); break;
	case LC_HAY_ROUNDS: rc = unit_round(src, a, u, &b); break;
	}
	if (!rc && src->kind != LC_HAY_ROUNDS && !(u->text = adup_buf(a, &b)))
		rc = nomem();
	ev_buf_free(&b);
	return rc;
}

/* ---- needles and recipes ---------------------------------------------------- */

typedef enum { NK_NUMBER, NK_CODE, NK_WORD } needle_kind;
static const char *const NK_NAME[] = {"number", "code", "word"};
static const char *const NK_NOUN[] = {"magic number", "access code", "secret word"};
static const char *const HAY_NAME[] = {"essay", "noise", "logs", "words", "rounds"};

static void needle_value(ev_rng *r, needle_kind k, char out[48])
{
	if (k == NK_NUMBER) {
		snprintf(out, 48, "%u", (unsigned)(1000000 + ev_rng_below(r, 9000000)));
	} else if (k == NK_CODE) {
		uint64_t x = ev_rng_next(r);
		snprintf(out, 48, "%08llx-%04llx-%04llx", (unsigned long long)(x >> 32),
			 (unsigned long long)((x >> 16) & 0xffff), (unsigned long long)(x & 0xffff));
	} else {
		snprintf(out, 48, "%s%s", PICK(r, ADJ), PICK(r, NOUN));
	}
}

static void key_of(ev_rng *r, char out[48]) { snprintf(out, 48, "%s-%s", PICK(r, ADJ), PICK(r, NOUN)); }

/* The separator a needle starts with, matching the haystack's units. */
static const char *needle_sep(lc_hay_kind k) { return k == LC_HAY_ESSAY || k == LC_HAY_NOISE ? " " : "\n"; }

static int add_needle(lc_recipe *R, ev_arena *a, const char *sep, needle_kind k, const char *key, const char *value,
		      double depth)
{
	if (R->n_needles >= LC_MAX_NEEDLES)
		return ev_error_set(EV_E_INTERNAL, "long-context generator: too many needles");
	lc_unit *u = &R->needles[R->n_needles++];
	memset(u, 0, sizeof *u);
	u->depth = depth;
	return (u->text = afmt(a, "%sThe special %s for %s is: %s.", sep, NK_NOUN[k], key, value)) ? 0 : nomem();
}

static int add_target(lc_recipe *R, ev_arena *a, const char *t)
{
	if (R->n_targets >= LC_MAX_TARGETS)
		return ev_error_set(EV_E_INTERNAL, "long-context generator: too many targets");
	return (R->targets[R->n_targets++] = ev_arena_strdup(a, t)) ? 0 : nomem();
}

static bool key_used(char keys[][48], size_t n, const char *k)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(keys[i], k))
			return true;
	return false;
}

static const char *const DOC_INTRO =
	"Below is a long document. Somewhere in it are special facts that you will be asked about. Read it "
	"carefully.\n\nDocument:";

static int recipe_niah_family(lc_recipe *R, ev_arena *a, const char *task, double d, size_t length, ev_rng *r)
{
	lc_hay_kind hk = (lc_hay_kind)ev_rng_below(r, 3);
	needle_kind nk = !strcmp(task, "niah") ? (needle_kind)ev_rng_below(r, 3) : NK_NUMBER;
	R->src.kind = hk;
	const char *sep = needle_sep(hk);
	char keys[LC_MAX_NEEDLES][48], val[48];
	size_t nk_keys = 0;
	int rc = 0;
	key_of(r, keys[0]);
	nk_keys = 1;
	if (!strcmp(task, "niah")) {
		needle_value(r, nk, val);
		if ((rc = add_needle(R, a, sep, nk, keys[0], val, d)) || (rc = add_target(R, a, val)))
			return rc;
		R->suffix = afmt(a, "\n\nWhat is the special %s for %s mentioned in the document above? Answer with "
				 "the %s only.", NK_NOUN[nk], keys[0], NK_NOUN[nk]);
	} else if (!strcmp(task, "multikey")) {
		/* Distractors share the adjective or the noun of the real key. */
		size_t n_dis = length >= 32768 ? 7 : 3;
		needle_value(r, nk, val);
		if ((rc = add_needle(R, a, sep, nk, keys[0], val, d)) || (rc = add_target(R, a, val)))
			return rc;
		const char *dash = strchr(keys[0], '-');
		for (size_t i = 0; i < n_dis; i++) {
			char k[48], v[48];
			do {
				if (ev_rng_below(r, 2))
					snprintf(k, sizeof k, "%.*s-%s", (int)(dash - keys[0]), keys[0], PICK(r, NOUN));
				else
					snprintf(k, sizeof k, "%s%s", PICK(r, ADJ), dash);
			} while (key_used(keys, nk_keys, k));
			memcpy(keys[nk_keys++], k, sizeof k);
			do
				needle_value(r, nk, v);
			while (!strcmp(v, val));
			if ((rc = add_needle(R, a, sep, nk, k, v, ev_rng_uniform(r))))
				return rc;
		}
		R->suffix = afmt(a, "\n\nWhat is the special magic number for %s mentioned in the document above? "
				 "Answer with the number only.", keys[0]);
	} else if (!strcmp(task, "multivalue")) {
		size_t nv = 4;
		for (size_t i = 0; i < nv; i++) {
			needle_value(r, nk, val);
			if ((rc = add_needle(R, a, sep, nk, keys[0], val, i == 0 ? d : ev_rng_uniform(r))) ||
			    (rc = add_target(R, a, val)))
				return rc;
		}
		R->all = true;
		R->suffix = afmt(a, "\n\nThe document gives several special magic numbers for %s. What are all of "
				 "them? Answer with the numbers only.", keys[0]);
	} else { /* multiquery */
		size_t nq = 4;
		ev_buf q = EV_BUF_INIT(4096);
		for (size_t i = 0; i < nq && !rc; i++) {
			if (i) {
				char k[48];
				do
					key_of(r, k);
				while (key_used(keys, nk_keys, k));
				memcpy(keys[nk_keys++], k, sizeof k);
			}
			needle_value(r, nk, val);
			if (!(rc = add_needle(R, a, sep, nk, keys[i], val, i == 0 ? d : ev_rng_uniform(r))) &&
			    !(rc = add_target(R, a, val)))
				rc = ev_buf_printf(&q, "%s%s", i == 0 ? "" : i + 1 == nq ? " and " : ", ", keys[i]);
		}
		if (!rc)
			R->suffix = afmt(a, "\n\nWhat are the special magic numbers for %s mentioned in the document "
					 "above? Answer with the numbers only.", q.data);
		ev_buf_free(&q);
		R->all = true;
		if (rc)
			return rc;
	}
	R->prefix = ev_arena_strdup(a, DOC_INTRO);
	cJSON_AddStringToObject(R->meta, "haystack", HAY_NAME[hk]);
	cJSON_AddStringToObject(R->meta, "needle", NK_NAME[nk]);
	cJSON_AddStringToObject(R->meta, "key", keys[0]);
	cJSON_AddNumberToObject(R->meta, "needles", (double)R->n_needles);
	return R->prefix && R->suffix ? 0 : nomem();
}

static void var_name(ev_rng *r, char out[8])
{
	for (int i = 0; i < 5; i++)
		out[i] = (char)('A' + ev_rng_below(r, 26));
	out[5] = 0;
}

/* Variable tracking: a chain of assignments from one value, and a
 * distractor chain from another, spread over the document in order. */
static int recipe_vt(lc_recipe *R, ev_arena *a, ev_rng *r)
{
	R->src.kind = ev_rng_below(r, 2) ? LC_HAY_ESSAY : LC_HAY_NOISE;
	char names[9][8];
	for (size_t i = 0; i < 9; i++) {
		bool dup;
		do {
			var_name(r, names[i]);
			dup = false;
			for (size_t j = 0; j < i; j++)
				dup = dup || !strcmp(names[j], names[i]);
		} while (dup);
	}
	unsigned v1 = (unsigned)(10000 + ev_rng_below(r, 90000)), v2;
	do
		v2 = (unsigned)(10000 + ev_rng_below(r, 90000));
	while (v2 == v1);
	int rc = 0;
	/* Chain 1: names[0..4]; chain 2: names[5..8]. Depths rise along a chain. */
	for (size_t c = 0; c < 2 && !rc; c++) {
		size_t from = c ? 5 : 0, to = c ? 9 : 5;
		double at = 0.02 + 0.1 * ev_rng_uniform(r);
		for (size_t i = from; i < to && !rc; i++) {
			if (R->n_needles >= LC_MAX_NEEDLES)
				return ev_error_set(EV_E_INTERNAL, "vt: too many needles");
			lc_unit *u = &R->needles[R->n_needles++];
			memset(u, 0, sizeof *u);
			u->depth = at;
			at += (0.95 - at) / (double)(to - i) * (0.5 + ev_rng_uniform(r));
			u->text = i == from ? afmt(a, " VAR %s = %u.", names[i], c ? v2 : v1)
			                    : afmt(a, " VAR %s = VAR %s.", names[i], names[i - 1]);
			if (!u->text)
				return nomem();
			if (!c)
				rc = add_target(R, a, names[i]);
		}
	}
	R->all = true;
	R->prefix = ev_arena_strdup(a, "Memorise the variable assignments (VAR X = ...) hidden in the text below; "
				    "you will be asked to track them.\n\nText:");
	R->suffix = afmt(a, "\n\nWhich variables in the text above are assigned the value %u, directly or through "
			 "other variables? Answer with all their names.", v1);
	cJSON_AddStringToObject(R->meta, "haystack", HAY_NAME[R->src.kind]);
	cJSON_AddNumberToObject(R->meta, "value", v1);
	return R->prefix && R->suffix ? 0 : nomem();
}

static int recipe_cwe(lc_recipe *R, ev_arena *a, ev_rng *r)
{
	lc_source *s = &R->src;
	s->kind = LC_HAY_WORDS;
	s->per_round = 30;
	s->n_rare = 10 * s->per_round;
	size_t total = 10 + s->n_rare;
	char **all = ev_arena_alloc(a, total * sizeof *all);
	if (!all)
		return nomem();
	for (size_t i = 0; i < total; i++) {
		char w[32];
		bool dup;
		do {
			pseudo_word(r, w, sizeof w);
			dup = false;
			for (size_t j = 0; j < i && !dup; j++)
				dup = !strcmp(all[j], w);
		} while (dup);
		if (!(all[i] = ev_arena_strdup(a, w)))
			return nomem();
	}
	s->common = all;
	s->rare = all + 10;
	s->rare_at = 0;
	int rc = 0;
	for (size_t i = 0; i < 10 && !rc; i++)
		rc = add_target(R, a, all[i]);
	R->all = true;
	R->prefix = ev_arena_strdup(a, "Below is a long list of words. Some of them appear much more often than the "
				    "others.\n\nWords:");
	R->suffix = ev_arena_strdup(a, "\n\nWhat are the 10 most common words in the list above? Answer with the 10 "
				    "words only.");
	return rc ? rc : R->prefix && R->suffix ? 0 : nomem();
}

/* Agent: many tool rounds; one early get_ticket round holds the access
 * code that the final question asks for. */
static int recipe_agent(lc_recipe *R, ev_arena *a, double d, ev_rng *r)
{
	R->src.kind = LC_HAY_ROUNDS;
	char tid[16], code[16], id[24], args[64];
	ticket_id(r, tid);
	access_code(r, code);
	snprintf(id, sizeof id, "call_%08llx", (unsigned long long)(ev_rng_next(r) & 0xffffffffu));
	snprintf(args, sizeof args, "{\"ticket_id\": \"%s\"}", tid);
	ev_buf b = EV_BUF_INIT(1 << 16);
	int rc = ticket_text(&b, r, tid, code);
	lc_unit *u = &R->needles[R->n_needles++];
	memset(u, 0, sizeof *u);
	u->depth = d;
	u->tool = "get_ticket";
	if (!rc && (!(u->id = ev_arena_strdup(a, id)) || !(u->calls = call_json(a, id, "get_ticket", args)) ||
		    !(u->text = adup_buf(a, &b))))
		rc = nomem();
	ev_buf_free(&b);
	if (rc)
		return rc;
	/* Filler rounds never read the asked ticket. */
	memcpy(R->src.avoid, tid, sizeof tid);
	if ((rc = add_target(R, a, code)))
		return rc;
	R->tools_json = (char *)TOOLS_JSON;
	R->system = ev_arena_strdup(a, "You are an on-call operations agent. Use the tools to investigate, then "
				    "answer the user's questions from what the tools returned.");
	R->prefix = ev_arena_strdup(a, "We had an incident overnight. Go through the tickets, logs, metrics and "
				    "runbooks and keep notes; I will ask you questions at the end.");
	R->suffix = afmt(a, "Thanks. One question: what access code was recorded on ticket %s? Answer with the code "
			 "only.", tid);
	cJSON_AddStringToObject(R->meta, "haystack", "rounds");
	cJSON_AddStringToObject(R->meta, "ticket", tid);
	return R->system && R->prefix && R->suffix ? 0 : nomem();
}

int ev_lc_recipe(lc_recipe *R, ev_arena *a, const char *task, int depth, size_t length, ev_rng *rng)
{
	memset(R, 0, sizeof *R);
	R->task = task;
	R->depth = depth;
	if (!(R->meta = cJSON_CreateObject()))
		return nomem();
	double d = depth < 0 ? 0.5 : depth / 100.0;
	int rc;
	if (!strcmp(task, "vt"))
		rc = recipe_vt(R, a, rng);
	else if (!strcmp(task, "cwe"))
		rc = recipe_cwe(R, a, rng);
	else if (!strcmp(task, "agent"))
		rc = recipe_agent(R, a, d, rng);
	else
		rc = recipe_niah_family(R, a, task, d, length, rng);
	/* The haystack has its own stream, so that fitting (which draws
	 * however many units it needs) never shifts the recipe's draws. */
	ev_rng_seed(&R->src.rng, ev_rng_next(rng));
	return rc;
}
