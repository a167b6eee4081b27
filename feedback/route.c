/*
 * feedback/route.c: routing evaluated offline over stored runs. Given the
 * runs of several models on the same suites, each sample's score and cost
 * (tokens or seconds) in each run are read, and routers are scored on the
 * samples every run answered:
 *
 *   - each model alone;
 *   - "category": per category (the sample's metadata "category", else
 *     "task", else its suite) the model with the best mean score, ties to
 *     the cheaper; learned on one half of the samples and applied to the
 *     other (halves by a hash of the sample's id, then swapped), so the
 *     router is scored on samples it did not see;
 *   - "cost": per category the cheapest model whose mean score is within
 *     `threshold` of that category's best (same two halves);
 *   - "oracle": per sample the cheapest model among those that scored best
 *     on it (the ceiling no router beats).
 *
 * Each gets its mean score with a 95% bootstrap interval (samples
 * resampled, seeded) and its mean cost; the models' points' upper convex
 * hull over cost, and the area under it with cost scaled to [0, 1].
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/strset.h"
#include "feedback/feedback.h"

typedef struct {
	char *key;      /* suite \x1f id */
	char *category;
	double *score;  /* one a run (NAN: not answered in that run) */
	double *cost;
	int *n;         /* scored epochs a run */
} route_sample;

typedef struct {
	route_sample *v;
	size_t n, cap;
	size_t *slots;  /* open addressing: position + 1, 0 empty */
	size_t n_slots; /* a power of two, at least twice n */
	size_t runs;
	size_t run; /* the run being read */
	bool latency;
	const char *by; /* the metadata key of the category, or NULL */
	int rc;
} route_data;

/* The slot of key: where it is, or the empty one where it would go. */
static size_t *slot_of(route_data *d, const char *key)
{
	size_t mask = d->n_slots - 1, i = (size_t)ev_hash_str(key) & mask;
	while (d->slots[i] && strcmp(d->v[d->slots[i] - 1].key, key))
		i = (i + 1) & mask;
	return &d->slots[i];
}

static int grow_slots(route_data *d)
{
	size_t ns = d->n_slots ? 2 * d->n_slots : 1024;
	size_t *old = d->slots, on = d->n_slots;
	if (!(d->slots = calloc(ns, sizeof *d->slots))) {
		d->slots = old;
		return ev_error_set(EV_E_NOMEM, "route: out of memory");
	}
	d->n_slots = ns;
	for (size_t i = 0; i < on; i++)
		if (old[i])
			*slot_of(d, d->v[old[i] - 1].key) = old[i];
	free(old);
	return 0;
}

static const char *category_of(const ev_result *r, const char *by, char *buf, size_t cap)
{
	ev_sample_category(buf, cap, r->suite, r->metadata_json, by); /* a long one cut: still a category */
	ev_error_clear();
	return buf;
}

static int read_cb(void *ctx, const ev_result *r)
{
	route_data *d = ctx;
	if (ev_result_is_error(r))
		return 0;
	char *key = ev_asprintf("%s\x1f%s", r->suite, r->sample_id);
	if (!key)
		return ev_error_set(EV_E_NOMEM, "route: out of memory");
	if (2 * (d->n + 1) > d->n_slots && grow_slots(d)) {
		free(key);
		return ev_error_code();
	}
	size_t *slot = slot_of(d, key);
	route_sample *s;
	if (*slot) {
		s = &d->v[*slot - 1];
		free(key);
	} else {
		if (d->n == d->cap) {
			size_t nc = d->cap ? 2 * d->cap : 256;
			route_sample *nv = realloc(d->v, nc * sizeof *nv);
			if (!nv) {
				free(key);
				return ev_error_set(EV_E_NOMEM, "route: out of memory");
			}
			d->v = nv, d->cap = nc;
		}
		s = &d->v[d->n];
		memset(s, 0, sizeof *s);
		char cb[257];
		s->key = key;
		s->category = ev_strdup(category_of(r, d->by, cb, sizeof cb));
		s->score = malloc(d->runs * sizeof(double));
		s->cost = calloc(d->runs, sizeof(double));
		s->n = calloc(d->runs, sizeof(int));
		if (!s->category || !s->score || !s->cost || !s->n)
			return ev_error_set(EV_E_NOMEM, "route: out of memory");
		for (size_t k = 0; k < d->runs; k++)
			s->score[k] = NAN;
		*slot = ++d->n;
	}
	size_t k = d->run;
	double c = d->latency ? r->latency_s : (double)(r->prompt_tokens + r->completion_tokens);
	/* running means over the scored epochs */
	int n = ++s->n[k];
	s->score[k] = n == 1 ? r->score : s->score[k] + (r->score - s->score[k]) / n;
	s->cost[k] += (c - s->cost[k]) / n;
	return 0;
}


/* Per category and run, the sums of scores and costs over the samples
 * not in half `skip` (-1: all): {category: [score_0.., cost_0.., count]}. */
static cJSON *category_sums(const route_sample *const *v, size_t n, size_t runs, int skip)
{
	cJSON *cats = cJSON_CreateObject();
	for (size_t i = 0; cats && i < n; i++) {
		if ((int)(ev_hash_str(v[i]->key) & 1) == skip)
			continue;
		cJSON *c = cJSON_GetObjectItemCaseSensitive(cats, v[i]->category);
		if (!c) {
			c = cJSON_AddArrayToObject(cats, v[i]->category);
			for (size_t k = 0; k < 2 * runs + 1; k++)
				cJSON_AddItemToArray(c, cJSON_CreateNumber(0));
		}
		for (size_t k = 0; k < runs; k++) {
			cJSON *sc = cJSON_GetArrayItem(c, (int)k), *co = cJSON_GetArrayItem(c, (int)(runs + k));
			cJSON_SetNumberValue(sc, sc->valuedouble + v[i]->score[k]);
			cJSON_SetNumberValue(co, co->valuedouble + v[i]->cost[k]);
		}
		cJSON *cnt = cJSON_GetArrayItem(c, (int)(2 * runs));
		cJSON_SetNumberValue(cnt, cnt->valuedouble + 1);
	}
	return cats;
}

/* The overall cheapest run: the choice for a category never seen. */
static int cheapest_run(const route_sample *const *v, size_t n, size_t runs)
{
	size_t cheapest = 0;
	double cmin = INFINITY;
	for (size_t k = 0; k < runs; k++) {
		double t = 0;
		for (size_t i = 0; i < n; i++)
			t += v[i]->cost[k];
		if (t < cmin)
			cmin = t, cheapest = k;
	}
	return (int)cheapest;
}

/* The run a rule picks for a category's sums: the best mean score (ties to
 * the cheaper), or with by_cost the cheapest within threshold of it. */
static int pick_run(const cJSON *c, size_t runs, double threshold, bool by_cost, int fallback)
{
	if (!c)
		return fallback;
	double cnt = cJSON_GetArrayItem(c, (int)(2 * runs))->valuedouble, best = -1;
	for (size_t k = 0; k < runs; k++)
		best = fmax(best, cJSON_GetArrayItem(c, (int)k)->valuedouble / cnt);
	int pick = -1;
	double pick_cost = INFINITY, pick_score = -1;
	for (size_t k = 0; k < runs; k++) {
		double sc = cJSON_GetArrayItem(c, (int)k)->valuedouble / cnt,
		       co = cJSON_GetArrayItem(c, (int)(runs + k))->valuedouble / cnt;
		bool ok = by_cost ? sc >= best - threshold : sc >= best;
		if (!ok)
			continue;
		if (by_cost ? co < pick_cost : (sc > pick_score || (sc == pick_score && co < pick_cost)))
			pick = (int)k, pick_cost = co, pick_score = sc;
	}
	return pick < 0 ? fallback : pick;
}

/* For each sample, the run a rule chooses, learned on the other half. */
static void learn_and_apply(const route_sample *const *v, size_t n, size_t runs, double threshold, bool by_cost,
                            int *choice)
{
	int cheapest = cheapest_run(v, n, runs);
	for (int half = 0; half < 2; half++) {
		cJSON *cats = category_sums(v, n, runs, half); /* learn on the other half */
		for (size_t i = 0; i < n; i++)
			if ((int)(ev_hash_str(v[i]->key) & 1) == half)
				choice[i] = pick_run(cJSON_GetObjectItemCaseSensitive(cats, v[i]->category), runs, threshold, by_cost,
				                     cheapest);
		cJSON_Delete(cats);
	}
}

/* The rule learned on every sample, as `evald run --router FILE` reads it:
 * {"by": KEY?, "routes": {category: run place (1-based)}, "default": N}. */
static cJSON *router_table(const route_sample *const *v, size_t n, size_t runs, double threshold, bool by_cost,
                           const char *by)
{
	cJSON *cats = category_sums(v, n, runs, -1), *t = cJSON_CreateObject(), *c;
	int cheapest = cheapest_run(v, n, runs);
	if (cats && t) {
		if (by)
			cJSON_AddStringToObject(t, "by", by);
		cJSON *routes = cJSON_AddObjectToObject(t, "routes");
		cJSON_ArrayForEach(c, cats) cJSON_AddNumberToObject(routes, c->string,
		                                                    pick_run(c, runs, threshold, by_cost, cheapest) + 1);
		cJSON_AddNumberToObject(t, "default", cheapest + 1);
	}
	cJSON_Delete(cats);
	return t;
}

/* Mean score and cost of a choice per sample, with a bootstrap interval of the score. */
static cJSON *point(const char *name, const route_sample *const *v, size_t n, const int *choice, uint64_t seed)
{
	double *sc = calloc(n ? n : 1, sizeof *sc), *zero = calloc(n ? n : 1, sizeof *zero);
	if (!sc || !zero) {
		free(sc), free(zero);
		return NULL;
	}
	double s = 0, c = 0;
	for (size_t i = 0; i < n; i++) {
		sc[i] = v[i]->score[choice[i]];
		s += sc[i];
		c += v[i]->cost[choice[i]];
	}
	double lo = 0, hi = 0;
	/* the interval of mean(sc - 0): the paired bootstrap against zeros */
	ev_paired_bootstrap_ci(&lo, &hi, zero, sc, n, seed, 2000);
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "name", name);
	cJSON_AddNumberToObject(o, "score", n ? s / (double)n : 0);
	cJSON_AddNumberToObject(o, "ci_low", lo);
	cJSON_AddNumberToObject(o, "ci_high", hi);
	cJSON_AddNumberToObject(o, "cost", n ? c / (double)n : 0);
	free(sc), free(zero);
	return o;
}

static int by_cost_cmp(const void *a, const void *b)
{
	double x = ev_json_num(*(const cJSON *const *)a, "cost", 0), y = ev_json_num(*(const cJSON *const *)b, "cost", 0);
	return (x > y) - (x < y);
}

/* The models' upper hull over cost (score never falling as cost rises,
 * concave), and the area under it with cost scaled to [0, 1] (the hull
 * held flat past its last point). */
static void hull(cJSON *out, cJSON *const *pts, size_t n)
{
	cJSON *sorted[256];
	size_t m = n < 256 ? n : 256;
	memcpy(sorted, pts, m * sizeof *sorted);
	qsort(sorted, m, sizeof *sorted, by_cost_cmp);
	size_t h[256], nh = 0;
	for (size_t i = 0; i < m; i++) {
		double xi = ev_json_num(sorted[i], "cost", 0), yi = ev_json_num(sorted[i], "score", 0);
		if (nh && yi <= ev_json_num(sorted[h[nh - 1]], "score", 0))
			continue; /* dominated: costs more, scores no better */
		while (nh >= 2) {
			double x1 = ev_json_num(sorted[h[nh - 2]], "cost", 0), y1 = ev_json_num(sorted[h[nh - 2]], "score", 0);
			double x2 = ev_json_num(sorted[h[nh - 1]], "cost", 0), y2 = ev_json_num(sorted[h[nh - 1]], "score", 0);
			if ((x2 - x1) * (yi - y1) - (y2 - y1) * (xi - x1) >= 0)
				nh--; /* the middle point lies under the chord */
			else
				break;
		}
		h[nh++] = i;
	}
	cJSON *names = cJSON_AddArrayToObject(out, "hull");
	double cmin = m ? ev_json_num(sorted[0], "cost", 0) : 0, cmax = m ? ev_json_num(sorted[m - 1], "cost", 0) : 0;
	double span = cmax > cmin ? cmax - cmin : 1, area = 0;
	for (size_t k = 0; k < nh; k++) {
		cJSON_AddItemToArray(names, cJSON_CreateString(ev_json_str(sorted[h[k]], "name", "")));
		if (k) {
			double x0 = (ev_json_num(sorted[h[k - 1]], "cost", 0) - cmin) / span,
			       x1 = (ev_json_num(sorted[h[k]], "cost", 0) - cmin) / span;
			area += (x1 - x0) * (ev_json_num(sorted[h[k - 1]], "score", 0) + ev_json_num(sorted[h[k]], "score", 0)) / 2;
		}
	}
	if (nh) { /* flat from the hull's last point to the largest cost */
		double xl = (ev_json_num(sorted[h[nh - 1]], "cost", 0) - cmin) / span;
		area += (1 - xl) * ev_json_num(sorted[h[nh - 1]], "score", 0);
		if (nh == 1 && m == 1)
			area = ev_json_num(sorted[h[0]], "score", 0);
	}
	cJSON_AddNumberToObject(out, "hull_area", area);
}

int ev_route_eval(ev_tracker *t, const int64_t *runs, size_t n_runs, const ev_route_options *opt, char **out_json)
{
	*out_json = NULL;
	if (n_runs < 2 || n_runs > 64)
		return ev_error_set(EV_E_INVALID, "route: 2 to 64 runs");
	route_data d = {.runs = n_runs, .latency = opt && opt->latency, .by = opt ? opt->by : NULL};
	int rc = 0;
	char **names = calloc(n_runs, sizeof *names);
	for (size_t k = 0; k < n_runs && !rc; k++) {
		ev_run_row row = {0};
		if ((rc = ev_tracker_run_get(t, runs[k], &row)))
			break;
		names[k] = ev_asprintf("%s (run %lld)", row.model ? row.model : "?", (long long)runs[k]);
		ev_run_row_clear(&row);
		d.run = k;
		rc = ev_tracker_results_each(t, runs[k], read_cb, &d);
	}
	/* the samples every run scored */
	const route_sample **v = rc ? NULL : malloc((d.n ? d.n : 1) * sizeof *v);
	int *choice = rc ? NULL : malloc((d.n ? d.n : 1) * sizeof *choice);
	size_t n = 0;
	if (!rc && (!v || !choice))
		rc = ev_error_set(EV_E_NOMEM, "route: out of memory");
	for (size_t i = 0; !rc && i < d.n; i++) {
		bool all = true;
		for (size_t k = 0; k < n_runs; k++)
			all = all && d.v[i].n[k] > 0;
		if (all)
			v[n++] = &d.v[i];
	}
	if (!rc && n == 0)
		rc = ev_error_set(EV_E_INVALID, "route: no sample was scored in every run (the runs must share suites)");
	cJSON *o = NULL;
	if (!rc) {
		uint64_t seed = opt ? opt->seed : 1;
		o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, "samples", (double)n);
		cJSON_AddStringToObject(o, "cost", d.latency ? "latency_s" : "tokens");
		cJSON *models = cJSON_AddArrayToObject(o, "models"), *routers = cJSON_AddArrayToObject(o, "routers");
		cJSON *pts[64];
		for (size_t k = 0; k < n_runs; k++) {
			for (size_t i = 0; i < n; i++)
				choice[i] = (int)k;
			cJSON *p = point(names[k] ? names[k] : "?", v, n, choice, seed);
			if (!p) {
				rc = ev_error_set(EV_E_NOMEM, "route: out of memory");
				break;
			}
			cJSON_AddNumberToObject(p, "run", (double)runs[k]);
			cJSON_AddItemToArray(models, p);
			pts[k] = p;
		}
		double thr = opt ? opt->threshold : 0.05;
		if (rc)
			goto out;
		learn_and_apply(v, n, n_runs, 0, false, choice);
		cJSON *r1 = point("category", v, n, choice, seed);
		learn_and_apply(v, n, n_runs, thr, true, choice);
		cJSON *r2 = point("cost", v, n, choice, seed);
		cJSON_AddNumberToObject(r2, "threshold", thr);
		/* the oracle: per sample, the cheapest of those that scored best */
		for (size_t i = 0; i < n; i++) {
			int pick = 0;
			for (size_t k = 1; k < n_runs; k++) {
				double s = v[i]->score[k], ps = v[i]->score[pick];
				if (s > ps || (s == ps && v[i]->cost[k] < v[i]->cost[pick]))
					pick = (int)k;
			}
			choice[i] = pick;
		}
		cJSON *r3 = point("oracle", v, n, choice, seed);
		if (!r1 || !r2 || !r3) {
			cJSON_Delete(r1), cJSON_Delete(r2), cJSON_Delete(r3);
			rc = ev_error_set(EV_E_NOMEM, "route: out of memory");
			goto out;
		}
		cJSON_AddItemToArray(routers, r1);
		cJSON_AddItemToArray(routers, r2);
		cJSON_AddItemToArray(routers, r3);
		/* the category and cost rules learned on every sample, for live use */
		cJSON *tables = cJSON_AddObjectToObject(o, "tables");
		cJSON_AddItemToObject(tables, "category", router_table(v, n, n_runs, 0, false, d.by));
		cJSON_AddItemToObject(tables, "cost", router_table(v, n, n_runs, thr, true, d.by));
		hull(o, pts, n_runs);
		*out_json = ev_json_print(o);
		if (!*out_json)
			rc = ev_error_set(EV_E_NOMEM, "route: out of memory");
	}
out:
	cJSON_Delete(o);
	for (size_t i = 0; i < d.n; i++)
		free(d.v[i].key), free(d.v[i].category), free(d.v[i].score), free(d.v[i].cost), free(d.v[i].n);
	free(d.v);
	free(d.slots);
	for (size_t k = 0; k < n_runs; k++)
		free(names[k]);
	free(names), free(v), free(choice);
	return rc;
}
