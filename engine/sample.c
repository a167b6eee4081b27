/*
 * engine/sample.c: choosing the next token and the generation loop.
 * Processing follows the Hugging Face order: repetition penalty, then
 * temperature, top-k, top-p, min-p, and a draw from ev_rng. Temperature 0
 * is greedy. The reported log-probability is the model's own (log-softmax
 * of the raw logits), so it does not depend on the sampling settings.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"

struct eng_sampler {
	eng_sample_options o;
	int vocab;
	ev_rng rng;
	float *work;   /* [vocab] processed logits */
	int *idx;      /* [vocab] candidate ids */
};

int eng_sampler_new(eng_sampler **out, const eng_sample_options *opts, int vocab)
{
	*out = NULL;
	eng_sample_options o = ENG_SAMPLE_OPTIONS_INIT;
	if (opts)
		o = *opts;
	if (!(o.temperature >= 0 && o.temperature <= 100) || o.top_k < 0 || !(o.top_p > 0 && o.top_p <= 1) ||
	    !(o.min_p >= 0 && o.min_p <= 1) || !(o.repetition_penalty > 0 && o.repetition_penalty <= 100))
		return ev_error_set(EV_E_INVALID,
				    "sampling: temperature in [0, 100], top_k >= 0, top_p in (0, 1], min_p in [0, 1], "
				    "repetition_penalty in (0, 100]");
	if (vocab < 1)
		return ev_error_set(EV_E_INVALID, "sampling: vocab %d", vocab);
	eng_sampler *s = calloc(1, sizeof(*s));
	if (!s || !(s->work = malloc((size_t)vocab * sizeof(float))) || !(s->idx = malloc((size_t)vocab * sizeof(int)))) {
		eng_sampler_free(s);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	s->o = o;
	s->vocab = vocab;
	ev_rng_seed(&s->rng, o.seed);
	*out = s;
	return 0;
}

void eng_sampler_free(eng_sampler *s)
{
	if (!s)
		return;
	free(s->work);
	free(s->idx);
	free(s);
}

/* qsort has no context pointer in C11: the keys go through a thread-local
 * (samplers on different threads may sort at once) */
static _Thread_local const float *sort_keys;

static int by_logit_desc(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	float u = sort_keys[x], v = sort_keys[y];
	if (u != v)
		return u > v ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* Keeps the candidate list sorted by descending logit (ties: lower id). */
static void sort_candidates(const float *w, int *idx, int n)
{
	sort_keys = w;
	qsort(idx, (size_t)n, sizeof(int), by_logit_desc);
}

/* The log-softmax's shift and normaliser: log p_i = x_i - *mx - *lse. */
static void log_normalizer(const float *x, int n, double *mx, double *lse)
{
	float m = x[0];
	for (int i = 1; i < n; i++)
		m = x[i] > m ? x[i] : m;
	double sum = 0;
	for (int i = 0; i < n; i++)
		sum += exp((double)x[i] - m);
	*mx = m;
	*lse = log(sum);
}

int eng_sample(eng_sampler *s, int32_t *token_out, double *logprob_out, const float *logits, const int32_t *history,
	       long n_history)
{
	int V = s->vocab;
	float *w = s->work;
	memcpy(w, logits, (size_t)V * sizeof(float));
	for (int i = 0; i < V; i++)
		if (isnan(w[i]))
			return ev_error_set(EV_E_BACKEND, "sampling: logit %d is NaN", i);
	if (s->o.repetition_penalty != 1.0 && history) {
		float pen = (float)s->o.repetition_penalty;
		/* each id is penalised once however often it occurs: the new
		 * value is computed from the raw logit, not the running one */
		for (long i = 0; i < n_history; i++) {
			int32_t t = history[i];
			if (t < 0 || t >= V)
				continue;
			float raw = logits[t];
			w[t] = raw > 0 ? raw / pen : raw * pen;
		}
	}
	int choice = 0;
	if (s->o.temperature == 0) {
		for (int i = 1; i < V; i++)
			if (w[i] > w[choice])
				choice = i;
	} else {
		float T = (float)s->o.temperature;
		for (int i = 0; i < V; i++)
			w[i] /= T;
		int n = V;
		for (int i = 0; i < V; i++)
			s->idx[i] = i;
		bool need_sort = (s->o.top_k > 0 && s->o.top_k < V) || s->o.top_p < 1.0;
		if (need_sort) {
			sort_candidates(w, s->idx, V);
			if (s->o.top_k > 0 && s->o.top_k < n)
				n = s->o.top_k;
		}
		float mx = -INFINITY;
		for (int i = 0; i < n; i++)
			mx = w[s->idx[i]] > mx ? w[s->idx[i]] : mx;
		double sum = 0;
		for (int i = 0; i < n; i++)
			sum += exp((double)w[s->idx[i]] - mx);
		if (s->o.top_p < 1.0) {
			/* smallest prefix of the sorted list whose mass reaches top_p */
			double cum = 0;
			int keep = n;
			for (int i = 0; i < n; i++) {
				cum += exp((double)w[s->idx[i]] - mx) / sum;
				if (cum >= s->o.top_p) {
					keep = i + 1;
					break;
				}
			}
			n = keep;
		}
		if (s->o.min_p > 0) {
			/* drop candidates below min_p times the top probability */
			double thr = log(s->o.min_p);
			int k = 0;
			for (int i = 0; i < n; i++)
				if ((double)w[s->idx[i]] - mx >= thr)
					s->idx[k++] = s->idx[i];
			n = k ? k : 1;
		}
		sum = 0;
		for (int i = 0; i < n; i++)
			sum += exp((double)w[s->idx[i]] - mx);
		double r = ev_rng_uniform(&s->rng) * sum, acc = 0;
		choice = s->idx[n - 1];
		for (int i = 0; i < n; i++) {
			acc += exp((double)w[s->idx[i]] - mx);
			if (r < acc) {
				choice = s->idx[i];
				break;
			}
		}
	}
	*token_out = choice;
	if (logprob_out) {
		double mx, lse;
		log_normalizer(logits, V, &mx, &lse);
		*logprob_out = (double)logits[choice] - mx - lse;
	}
	return 0;
}

void eng_logprob_of(eng_logprob *out, const float *logits, int vocab, int32_t tok, int n_top)
{
	double mx, lse;
	log_normalizer(logits, vocab, &mx, &lse);
	out->token = tok;
	out->logprob = tok >= 0 && tok < vocab ? (double)logits[tok] - mx - lse : NAN;
	n_top = n_top < 0 ? 0 : n_top > ENG_MAX_TOP_LOGPROBS ? ENG_MAX_TOP_LOGPROBS : n_top;
	n_top = n_top < vocab ? n_top : vocab;
	/* insertion into a short descending list: n_top is at most 20 */
	int n = 0;
	for (int i = 0; i < vocab; i++) {
		if (n == n_top && (n == 0 || !(logits[i] > logits[out->top_id[n - 1]])))
			continue;
		int at = n < n_top ? n++ : n - 1;
		while (at > 0 && logits[i] > logits[out->top_id[at - 1]]) {
			out->top_id[at] = out->top_id[at - 1];
			at--;
		}
		out->top_id[at] = i;
	}
	out->n_top = n;
	for (int k = 0; k < n; k++)
		out->top_lp[k] = (double)logits[out->top_id[k]] - mx - lse;
}

/* ---- thinking budget ---------------------------------------------------- */

eng_think_state eng_think_start(const eng_think_options *o)
{
	eng_think_state st = {o && o->enforce && o->open_at_start, 0, 0};
	return st;
}

int32_t eng_think_forced(const eng_think_options *o, const eng_think_state *st)
{
	return o && o->enforce && st->in && st->used >= o->budget ? o->close_id : -1;
}

void eng_think_step(const eng_think_options *o, eng_think_state *st, int32_t tok)
{
	if (!o || !o->enforce)
		return;
	if (tok == o->open_id)
		st->in = true, st->tags++;
	else if (tok == o->close_id)
		st->in = false, st->tags++;
	else if (st->in)
		st->used++;
}

bool eng_think_answer_full(const eng_think_options *o, const eng_think_state *st, int max_tokens, long n_out)
{
	return o && o->enforce && max_tokens > 0 && n_out - st->used - st->tags >= max_tokens;
}

/* Generated tokens allowed: max_tokens (0 = the room left), plus the
 * thinking and its close when a budget is enforced. */
long eng_generate_limit(const eng_generate_options *o, long room)
{
	long max = o->max_tokens;
	if (max > 0 && o->think.enforce)
		max += (long)o->think.budget + 1;
	return max > 0 && max < room + 1 ? max : room + 1;
}

int eng_generate(eng_seq *s, const int32_t *prompt, int n_prompt, const eng_generate_options *opts, eng_token_cb cb,
		 void *cb_ctx, int32_t *out_tokens, int out_cap, int *n_out, eng_stop_reason *reason)
{
	eng_generate_options o = ENG_GENERATE_OPTIONS_INIT;
	if (opts)
		o = *opts;
	eng_model *m = s->m;
	eng_sampler *smp = NULL;
	int32_t *hist = NULL;
	long nh = 0, cap;
	int rc, n = 0;
	eng_stop_reason why = ENG_STOP_LENGTH;
	eng_think_state think = eng_think_start(&o.think);
	if (n_out)
		*n_out = 0;
	if (o.stop_token_out)
		*o.stop_token_out = -1;
	const int32_t *stop = o.stop_ids ? o.stop_ids : m->c.eos_ids;
	int nstop = o.stop_ids ? o.n_stop : m->c.n_eos;
	if ((rc = eng_sampler_new(&smp, &o.sample, m->c.vocab)))
		return rc;
	if (n_prompt > 0 && (rc = eng_forward(s, prompt, n_prompt, NULL)))
		goto done;
	if (!eng_seq_logits(s)) {
		rc = ev_error_set(EV_E_INVALID, "generate: empty prompt and empty sequence");
		goto done;
	}
	if (o.think.enforce && o.think.budget < 0) {
		rc = ev_error_set(EV_E_INVALID, "generate: thinking budget %d is negative", o.think.budget);
		goto done;
	}
	long max = eng_generate_limit(&o, m->max_context - s->len);
	/* history for the repetition penalty: the prompt and what follows */
	cap = n_prompt + max + 1;
	if (o.sample.repetition_penalty != 1.0) {
		if (!(hist = malloc((size_t)cap * sizeof(*hist)))) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		if (n_prompt > 0)
			memcpy(hist, prompt, (size_t)n_prompt * sizeof(*hist));
		nh = n_prompt;
	}
	while (n < max) {
		int32_t tok;
		double lp;
		int32_t forced = eng_think_forced(&o.think, &think);
		if (forced >= 0) { /* the budget is spent: the block closes here */
			eng_logprob f;
			eng_logprob_of(&f, s->logits, m->c.vocab, forced, 0);
			tok = forced, lp = f.logprob;
		} else if ((rc = eng_sample(smp, &tok, &lp, s->logits, hist, nh))) {
			goto done;
		}
		bool is_stop = false;
		for (int i = 0; forced < 0 && i < nstop; i++)
			is_stop |= stop[i] == tok;
		if (is_stop) {
			why = ENG_STOP_EOS;
			if (o.stop_token_out)
				*o.stop_token_out = tok;
			break;
		}
		eng_think_step(&o.think, &think, tok);
		if (out_tokens && n < out_cap)
			out_tokens[n] = tok;
		n++;
		if (hist)
			hist[nh++] = tok;
		if (cb && cb(cb_ctx, tok, lp)) {
			why = ENG_STOP_CALLBACK;
			break;
		}
		if (n >= max || s->len >= m->max_context || eng_think_answer_full(&o.think, &think, o.max_tokens, n))
			break;
		if ((rc = eng_forward(s, &tok, 1, NULL)))
			goto done;
	}
done:
	if (o.think_used_out)
		*o.think_used_out = think.used;
	if (n_out)
		*n_out = n;
	if (reason)
		*reason = why;
	free(hist);
	eng_sampler_free(smp);
	return rc;
}
