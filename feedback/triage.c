/*
 * feedback/triage.c: grouping near-duplicate open reports and labelling them.
 *
 * Text: title and body lowercased, punctuation dropped, whitespace collapsed,
 * cut into word 3-shingles; each issue gets a MinHash signature of 128
 * hashes. LSH with 64 bands of 2 rows proposes candidate pairs (a pair with
 * Jaccard J shares a band with probability 1 - (1 - J^2)^64: 0.9999 at 0.3),
 * and a candidate is joined when the estimated Jaccard (the fraction of equal
 * hashes) reaches the threshold. Issues that share an attachment (same
 * sha256) are joined too. Union-find makes the groups.
 */
#include "feedback/issues_int.h"

#include <stdlib.h>
#include <string.h>

#define TRIAGE_HASHES 128
#define TRIAGE_ROWS 2
#define TRIAGE_BANDS (TRIAGE_HASHES / TRIAGE_ROWS)
#define TRIAGE_BUCKET_ALL 64 /* buckets larger than this compare each member with a few only */

typedef struct {
	int64_t id;
	int64_t old_cluster; /* 0: none */
	char *text;          /* title + body */
	char *title;
	uint64_t sig[TRIAGE_HASHES];
	bool has_sig;
	size_t parent, rank;
} titem;

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

static size_t uf_find(titem *v, size_t i)
{
	while (v[i].parent != i) {
		v[i].parent = v[v[i].parent].parent;
		i = v[i].parent;
	}
	return i;
}

static void uf_union(titem *v, size_t a, size_t b)
{
	a = uf_find(v, a);
	b = uf_find(v, b);
	if (a == b)
		return;
	if (v[a].rank < v[b].rank) {
		size_t x = a;
		a = b;
		b = x;
	}
	v[b].parent = a;
	if (v[a].rank == v[b].rank)
		v[a].rank++;
}

/* ---- shingles and signatures --------------------------------------------------- */

/* The words of the normalised text: ASCII letters and digits lowercased,
 * bytes of multi-byte UTF-8 kept (part of a word), everything else a break.
 * Returns (start, length) pairs into `text` via the callback-free arrays. */
typedef struct {
	const char *p;
	size_t n;
} word;

static bool word_byte(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

static uint64_t fnv_word(uint64_t h, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c >= 'A' && c <= 'Z')
			c = (unsigned char)(c + 32);
		h ^= c;
		h *= 0x100000001b3ULL;
	}
	h ^= ' ';
	h *= 0x100000001b3ULL;
	return h;
}

static int signature(titem *it, const uint64_t *seeds)
{
	const char *s = it->text;
	size_t n_words = 0, cap = 0;
	word *w = NULL;
	for (size_t i = 0; s[i];) {
		while (s[i] && !word_byte((unsigned char)s[i]))
			i++;
		size_t st = i;
		while (s[i] && word_byte((unsigned char)s[i]))
			i++;
		if (i > st) {
			if (EV_GROW(w, cap, n_words + 1)) {
				free(w);
				return ev_error_set(EV_E_NOMEM, "out of memory");
			}
			w[n_words].p = s + st;
			w[n_words].n = i - st;
			n_words++;
		}
	}
	for (int k = 0; k < TRIAGE_HASHES; k++)
		it->sig[k] = UINT64_MAX;
	it->has_sig = n_words > 0;
	size_t n_sh = n_words >= 3 ? n_words - 2 : (n_words ? 1 : 0);
	for (size_t i = 0; i < n_sh; i++) {
		uint64_t h = 0xcbf29ce484222325ULL;
		for (size_t j = i; j < i + 3 && j < n_words; j++)
			h = fnv_word(h, w[j].p, w[j].n);
		for (int k = 0; k < TRIAGE_HASHES; k++) {
			uint64_t v = mix64(h ^ seeds[k]);
			if (v < it->sig[k])
				it->sig[k] = v;
		}
	}
	free(w);
	return 0;
}

static double estimate(const titem *a, const titem *b)
{
	int eq = 0;
	for (int k = 0; k < TRIAGE_HASHES; k++)
		eq += a->sig[k] == b->sig[k];
	return (double)eq / TRIAGE_HASHES;
}

typedef struct {
	uint64_t key;
	size_t idx;
} bucket_ent;

static int cmp_bucket(const void *x, const void *y)
{
	const bucket_ent *a = x, *b = y;
	if (a->key != b->key)
		return a->key < b->key ? -1 : 1;
	return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static void try_pair(titem *v, size_t a, size_t b, double threshold)
{
	if (uf_find(v, a) != uf_find(v, b) && estimate(&v[a], &v[b]) >= threshold)
		uf_union(v, a, b);
}

static int lsh_join(titem *v, size_t n, double threshold)
{
	bucket_ent *b = malloc((n ? n : 1) * sizeof *b);
	if (!b)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	for (int band = 0; band < TRIAGE_BANDS; band++) {
		size_t m = 0;
		for (size_t i = 0; i < n; i++) {
			if (!v[i].has_sig)
				continue;
			uint64_t h = (uint64_t)band * 0x9e3779b97f4a7c15ULL;
			for (int r = 0; r < TRIAGE_ROWS; r++)
				h = mix64(h ^ v[i].sig[band * TRIAGE_ROWS + r]);
			b[m].key = h;
			b[m].idx = i;
			m++;
		}
		qsort(b, m, sizeof *b, cmp_bucket);
		for (size_t s = 0; s < m;) {
			size_t e = s + 1;
			while (e < m && b[e].key == b[s].key)
				e++;
			size_t sz = e - s;
			for (size_t x = s; x < e; x++) {
				/* Every pair in a small bucket; in a large one (many copies
				 * of one report) each member with its next few neighbours,
				 * which the union-find links transitively. */
				size_t lim = sz <= TRIAGE_BUCKET_ALL ? e : (x + 8 < e ? x + 8 : e);
				for (size_t y = x + 1; y < lim; y++)
					try_pair(v, b[x].idx, b[y].idx, threshold);
			}
			s = e;
		}
	}
	free(b);
	return 0;
}

/* ---- loading --------------------------------------------------------------------- */

static void items_free(titem *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].text);
		free(v[i].title);
	}
	free(v);
}

static int load_open(ev_tracker *t, titem **out, size_t *n_out)
{
	sqlite3_stmt *st = NULL;
	titem *v = NULL;
	size_t n = 0, cap = 0;
	int rc = ev_tracker_prepare(t, &st,
	                           "SELECT id, coalesce(cluster_id, 0), title || ' ' || body, title FROM issues "
	                           "WHERE status = 'open' ORDER BY id");
	if (rc)
		return rc;
	int r;
	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		if (EV_GROW(v, cap, n + 1)) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		memset(&v[n], 0, sizeof v[n]);
		v[n].id = sqlite3_column_int64(st, 0);
		v[n].old_cluster = sqlite3_column_int64(st, 1);
		v[n].parent = n;
		v[n].title = ev_strdup((const char *)sqlite3_column_text(st, 3));
		if (!(v[n].text = ev_strdup((const char *)sqlite3_column_text(st, 2))) || !v[n].title) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		n++;
	}
	if (r != SQLITE_DONE)
		rc = ev_tracker_sqlerr(t, r, "reading open issues");
done:
	sqlite3_finalize(st);
	if (rc) {
		items_free(v, n);
		return rc;
	}
	*out = v;
	*n_out = n;
	return 0;
}

static size_t find_item(const titem *v, size_t n, int64_t id)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (v[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo].id == id ? lo : SIZE_MAX;
}

/* Joins open issues that share an attachment. */
static int join_attachments(ev_tracker *t, titem *v, size_t n)
{
	sqlite3_stmt *st = NULL;
	int rc = ev_tracker_prepare(t, &st,
	                           "SELECT ia.sha256, ia.issue_id FROM issue_attachments ia JOIN issues i ON i.id = "
	                           "ia.issue_id WHERE i.status = 'open' ORDER BY ia.sha256, ia.issue_id");
	if (rc)
		return rc;
	char prev[EV_SHA256_HEX] = "";
	size_t first = SIZE_MAX;
	int r;
	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		const char *sha = (const char *)sqlite3_column_text(st, 0);
		size_t idx = find_item(v, n, sqlite3_column_int64(st, 1));
		if (idx == SIZE_MAX)
			continue;
		if (strcmp(sha, prev) != 0) {
			snprintf(prev, sizeof prev, "%s", sha);
			first = idx;
		} else {
			uf_union(v, first, idx);
		}
	}
	if (r != SQLITE_DONE)
		rc = ev_tracker_sqlerr(t, r, "reading attachments");
	sqlite3_finalize(st);
	return rc;
}

/* ---- groups ------------------------------------------------------------------------ */

typedef struct {
	size_t root;
	size_t *members; /* indices into the items, ascending ids */
	size_t n;
	int64_t cluster; /* 0 until assigned (stays 0 in a dry run for a new one) */
	bool is_new;
} tgroup;

static int cmp_group(const void *x, const void *y)
{
	const tgroup *a = x, *b = y;
	if (a->n != b->n)
		return a->n > b->n ? -1 : 1;
	return a->members[0] < b->members[0] ? -1 : a->members[0] > b->members[0];
}

static void groups_free(tgroup *g, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(g[i].members);
	free(g);
}

static int make_groups(titem *v, size_t n, tgroup **out, size_t *n_out)
{
	size_t *count = calloc(n ? n : 1, sizeof *count), *slot = malloc((n ? n : 1) * sizeof *slot);
	tgroup *g = NULL;
	size_t ng = 0;
	int rc = 0;
	if (!count || !slot) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	for (size_t i = 0; i < n; i++)
		count[uf_find(v, i)]++;
	for (size_t i = 0; i < n; i++)
		if (count[i] >= 2)
			ng++;
	g = calloc(ng ? ng : 1, sizeof *g);
	if (!g) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		slot[i] = SIZE_MAX;
		if (count[i] >= 2) {
			g[k].root = i;
			if (!(g[k].members = malloc(count[i] * sizeof(size_t)))) {
				rc = ev_error_set(EV_E_NOMEM, "out of memory");
				goto done;
			}
			slot[i] = k++;
		}
	}
	for (size_t i = 0; i < n; i++) {
		size_t r = uf_find(v, i);
		if (count[r] >= 2) {
			tgroup *gr = &g[slot[r]];
			gr->members[gr->n++] = i;
		}
	}
	qsort(g, ng, sizeof *g, cmp_group);
	*out = g;
	*n_out = ng;
	g = NULL;
done:
	if (g)
		groups_free(g, ng);
	free(count);
	free(slot);
	return rc;
}

/* The cluster a group keeps: the id most of its members already had, when
 * no larger group took it first. */
static int64_t reuse_cluster(const tgroup *g, const titem *v, const tgroup *all, size_t upto)
{
	int64_t best = 0;
	size_t best_n = 0;
	for (size_t i = 0; i < g->n; i++) {
		int64_t c = v[g->members[i]].old_cluster;
		if (!c)
			continue;
		bool taken = false;
		for (size_t j = 0; j < upto && !taken; j++)
			taken = all[j].cluster == c;
		if (taken)
			continue;
		size_t cnt = 0;
		for (size_t k = 0; k < g->n; k++)
			cnt += v[g->members[k]].old_cluster == c;
		if (cnt > best_n || (cnt == best_n && c < best)) {
			best = c;
			best_n = cnt;
		}
	}
	return best;
}

/* ---- labels -------------------------------------------------------------------------- */

typedef struct {
	ev_tracker *t;
	sqlite3_stmt *ins;
	int64_t issue;
	long added;
	bool dry_run;
} label_ctx;

static int add_label(void *ctx, const char *label)
{
	label_ctx *c = ctx;
	if (c->dry_run)
		return 0;
	sqlite3_reset(c->ins);
	sqlite3_bind_int64(c->ins, 1, c->issue);
	sqlite3_bind_text(c->ins, 2, label, -1, SQLITE_TRANSIENT);
	int rc = ev_tracker_step_done(c->t, c->ins, "adding a label");
	if (!rc)
		c->added += sqlite3_changes(c->t->db);
	return rc;
}

static int apply_labels(ev_tracker *t, titem *v, size_t n, const ev_label_rules *rules, bool dry_run, long *added)
{
	label_ctx c = {t, NULL, 0, 0, dry_run};
	sqlite3_stmt *mod = NULL;
	int rc = ev_tracker_prepare(t, &c.ins, "INSERT OR IGNORE INTO labels (issue_id, label) VALUES (?1, ?2)");
	if (rc || (rc = ev_tracker_prepare(t, &mod,
	                                  "SELECT DISTINCT a.mime FROM issue_attachments ia JOIN attachments a ON "
	                                  "a.sha256 = ia.sha256 WHERE ia.issue_id = ?1")))
		goto done;
	for (size_t i = 0; i < n && !rc; i++) {
		c.issue = v[i].id;
		if ((rc = ev_label_rules_apply(rules, v[i].text, add_label, &c)))
			break;
		sqlite3_reset(mod);
		sqlite3_bind_int64(mod, 1, v[i].id);
		int r;
		while (!rc && (r = sqlite3_step(mod)) == SQLITE_ROW) {
			const char *k = ev_attach_kind((const char *)sqlite3_column_text(mod, 0));
			rc = add_label(&c, !strcmp(k, "image") ? "vision" : k);
		}
	}
	*added = c.added;
done:
	sqlite3_finalize(c.ins);
	sqlite3_finalize(mod);
	return rc;
}

/* ---- storing ---------------------------------------------------------------------------- */

static int store_groups(ev_tracker *t, titem *v, size_t n, tgroup *g, size_t ng)
{
	sqlite3_stmt *clear = NULL, *newc = NULL, *set = NULL, *sizes = NULL, *prune = NULL;
	int rc;
	if ((rc = ev_tracker_prepare(t, &clear, "UPDATE issues SET cluster_id = NULL WHERE status = 'open'")) ||
	    (rc = ev_tracker_prepare(t, &newc, "INSERT INTO clusters (created, size) VALUES (?1, 0)")) ||
	    (rc = ev_tracker_prepare(t, &set, "UPDATE issues SET cluster_id = ?2 WHERE id = ?1")) ||
	    (rc = ev_tracker_prepare(t, &sizes,
	                            "UPDATE clusters SET size = (SELECT count(*) FROM issues i WHERE i.cluster_id = "
	                            "clusters.id)")) ||
	    (rc = ev_tracker_prepare(t, &prune,
	                            "DELETE FROM clusters WHERE size = 0 AND NOT EXISTS (SELECT 1 FROM "
	                            "proposal_evidence e WHERE e.kind = 'cluster' AND e.ref = CAST(clusters.id AS "
	                            "TEXT))")))
		goto done;
	if ((rc = ev_tracker_step_done(t, clear, "clearing clusters")))
		goto done;
	double now = ev_wall_time();
	for (size_t k = 0; k < ng; k++) {
		if (!g[k].cluster) {
			sqlite3_reset(newc);
			sqlite3_bind_double(newc, 1, now);
			if ((rc = ev_tracker_step_done(t, newc, "creating a cluster")))
				goto done;
			g[k].cluster = sqlite3_last_insert_rowid(t->db);
		}
		for (size_t i = 0; i < g[k].n; i++) {
			sqlite3_reset(set);
			sqlite3_bind_int64(set, 1, v[g[k].members[i]].id);
			sqlite3_bind_int64(set, 2, g[k].cluster);
			if ((rc = ev_tracker_step_done(t, set, "setting a cluster")))
				goto done;
		}
	}
	if ((rc = ev_tracker_step_done(t, sizes, "counting clusters")) ||
	    (rc = ev_tracker_step_done(t, prune, "pruning empty clusters")))
		goto done;
	(void)n;
done:
	sqlite3_finalize(clear);
	sqlite3_finalize(newc);
	sqlite3_finalize(set);
	sqlite3_finalize(sizes);
	sqlite3_finalize(prune);
	return rc;
}

static int cmp_out(const void *x, const void *y)
{
	const tgroup *a = x, *b = y;
	if (a->n != b->n)
		return a->n > b->n ? -1 : 1;
	if (a->is_new != b->is_new)
		return a->is_new ? -1 : 1;
	return a->cluster > b->cluster ? -1 : a->cluster < b->cluster;
}

int ev_triage_run(ev_tracker *t, const ev_triage_options *opt_in, char **out_json)
{
	ev_triage_options opt = opt_in ? *opt_in : (ev_triage_options)EV_TRIAGE_OPTIONS_INIT;
	titem *v = NULL;
	size_t n = 0, ng = 0;
	tgroup *g = NULL;
	ev_label_rules *rules = NULL;
	bool in_tx = false;
	long labeled = 0;
	int rc;

	if (out_json)
		*out_json = NULL;
	if (!(opt.threshold > 0 && opt.threshold <= 1))
		return ev_error_set(EV_E_INVALID, "triage: threshold %g: expected a number in (0, 1]", opt.threshold);
	if ((rc = ev_label_rules_new(&rules, opt.rules_path)))
		return rc;
	if (!opt.dry_run) {
		if ((rc = ev_intake_begin(t)))
			goto done;
		in_tx = true;
	}
	if ((rc = load_open(t, &v, &n)))
		goto done;
	uint64_t seeds[TRIAGE_HASHES];
	ev_rng rng;
	ev_rng_seed(&rng, 0x7269616765ULL);
	for (int k = 0; k < TRIAGE_HASHES; k++)
		seeds[k] = ev_rng_next(&rng);
	for (size_t i = 0; i < n; i++)
		if ((rc = signature(&v[i], seeds)))
			goto done;
	if ((rc = lsh_join(v, n, opt.threshold)) || (rc = join_attachments(t, v, n)) ||
	    (rc = make_groups(v, n, &g, &ng)))
		goto done;
	for (size_t k = 0; k < ng; k++) {
		g[k].cluster = reuse_cluster(&g[k], v, g, k);
		g[k].is_new = g[k].cluster == 0;
	}
	if (!opt.dry_run && (rc = store_groups(t, v, n, g, ng)))
		goto done;
	if ((rc = apply_labels(t, v, n, rules, opt.dry_run, &labeled)))
		goto done;
	if (in_tx) {
		if ((rc = ev_intake_commit(t)))
			goto done;
		in_tx = false;
	}
	if (out_json) {
		qsort(g, ng, sizeof *g, cmp_out);
		cJSON *o = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(o, "clusters");
		for (size_t k = 0; k < ng && arr; k++) {
			cJSON *c = cJSON_CreateObject();
			if (g[k].cluster)
				cJSON_AddNumberToObject(c, "id", (double)g[k].cluster);
			else
				cJSON_AddNullToObject(c, "id");
			cJSON_AddNumberToObject(c, "size", (double)g[k].n);
			cJSON_AddBoolToObject(c, "new", g[k].is_new);
			cJSON *ids = cJSON_AddArrayToObject(c, "issues"), *titles = cJSON_AddArrayToObject(c, "titles");
			for (size_t i = 0; i < g[k].n; i++) {
				cJSON_AddItemToArray(ids, cJSON_CreateNumber((double)v[g[k].members[i]].id));
				cJSON_AddItemToArray(titles, cJSON_CreateString(v[g[k].members[i]].title));
			}
			cJSON_AddItemToArray(arr, c);
		}
		cJSON_AddNumberToObject(o, "issues", (double)n);
		cJSON_AddNumberToObject(o, "labeled", (double)labeled);
		cJSON_AddNumberToObject(o, "threshold", opt.threshold);
		rc = ev_intake_emit(out_json, o);
	}
done:
	if (in_tx)
		ev_intake_rollback(t);
	groups_free(g, ng);
	items_free(v, n);
	ev_label_rules_free(rules);
	return rc;
}
