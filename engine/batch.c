/*
 * engine/batch.c: continuous batching over eng_forward_batch.
 *
 * Requests wait in a FIFO queue; up to max_batch of them are active. Each
 * step builds one batch: a prefilling sequence contributes the next chunk of
 * its prompt (all prefills together at most max_step_tokens), a decoding one
 * the token it sampled last. After the forward, every sequence whose prompt
 * is complete samples with its own sampler, exactly as eng_generate's loop
 * does (same order of checks), so a request's tokens do not depend on what
 * else shares the batch: the forward's rows are independent (engine README,
 * "Exactness"). A finished sequence frees its KV pages at once and the next
 * queued request takes its place on the following step.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

typedef enum { JOB_QUEUED, JOB_PREFILL, JOB_DECODE } job_state;

typedef struct job {
	struct job *next;
	uint64_t id;
	void *cookie;
	job_state state;
	eng_generate_options gen;
	int32_t *stop; /* owned copy of gen.stop_ids, or the model's EOS ids */
	int nstop;
	eng_token_cb cb;
	void *cb_ctx;
	eng_seq *seq;
	eng_sampler *smp;
	/* the prompt, then every generated token: the repetition history */
	int32_t *all;
	long n_all, cap_all;
	int n_prompt, fed;
	long max;      /* generated tokens allowed, set when the prompt is in */
	int n_out;
	int32_t next_tok;
	eng_think_state think;
	bool want_lp, want_plp, prompt_only;
	int top_lp;
	eng_logprob *lp, *plp; /* generated (cap_all - n_prompt), prompt (n_prompt) */
	float *embeds; /* image rows for the prompt's placeholders (n_embeds x hidden) */
	int n_embeds;
	int status;
	char *error;
	eng_stop_reason reason;
} job;

/* A cached prompt: its sequence holds the KV of toks[0..n). */
typedef struct {
	eng_seq *seq;
	int32_t *toks;
	long n;
	uint64_t used; /* LRU tick */
} pcache_entry;

struct eng_batch {
	eng_model *m;
	eng_model_info info;
	eng_batch_options opt;
	uint64_t next_id;
	job *queue, *queue_tail;
	job **active;
	int n_active;
	job *done, *done_tail;
	int n_queued, n_done;
	/* step scratch, max_batch entries each */
	eng_seq **seqs;
	const int32_t **toks;
	int *ntok;
	job **part;
	bool *every; /* part[p] wants every row's logits (prompt logprobs) */
	pcache_entry *pc; /* opt.prefix_cache entries */
	int npc;
	uint64_t tick;
	long reused;
};

/* How many leading tokens a and b share, up to lim. */
static long common_prefix(const int32_t *a, const int32_t *b, long lim)
{
	long k = 0;
	while (k < lim && a[k] == b[k])
		k++;
	return k;
}

/* The least recently used cached prompt (npc > 0). */
static int pc_oldest(const eng_batch *b)
{
	int old = 0;
	for (int i = 1; i < b->npc; i++)
		old = b->pc[i].used < b->pc[old].used ? i : old;
	return old;
}

static void pc_drop(eng_batch *b, int i)
{
	eng_seq_free(b->pc[i].seq);
	free(b->pc[i].toks);
	b->pc[i] = b->pc[--b->npc];
}

/* With a KV byte bound: drop cached prompts, oldest first, while the live
 * KV is past half of it, so the cache never starves running requests. */
static void pc_trim(eng_batch *b)
{
	while (b->npc && b->info.kv_max_bytes && eng_model_kv_bytes(b->m) > b->info.kv_max_bytes / 2)
		pc_drop(b, pc_oldest(b));
}

/* The cached prompt sharing the longest prefix with toks[0..n); *lcp set. */
static int pc_find(eng_batch *b, const int32_t *toks, long n, long *lcp)
{
	int best = -1;
	*lcp = 0;
	for (int i = 0; i < b->npc; i++) {
		long k = common_prefix(b->pc[i].toks, toks, b->pc[i].n < n ? b->pc[i].n : n);
		if (k > *lcp) {
			*lcp = k;
			best = i;
		}
	}
	return best;
}

/* Keeps the KV of job j's prompt (whole pages only: nothing is copied,
 * the pages are shared) unless a cached prompt already covers it. */
static void pc_keep(eng_batch *b, job *j)
{
	int B = b->info.block_size > 0 ? b->info.block_size : 64;
	long n = (long)j->n_prompt / B * B;
	if (b->opt.prefix_cache <= 0 || n < b->opt.prefix_min || n < 1 || j->n_embeds)
		return;
	long lcp;
	int i = pc_find(b, j->all, n, &lcp);
	if (i >= 0 && lcp >= n) { /* already there */
		b->pc[i].used = ++b->tick;
		return;
	}
	if (b->npc == b->opt.prefix_cache)
		pc_drop(b, pc_oldest(b));
	pcache_entry e = {NULL, malloc((size_t)n * sizeof(int32_t)), n, ++b->tick};
	if (!e.toks || eng_seq_fork(&e.seq, j->seq, n)) {
		free(e.toks); /* no memory for it: just not cached */
		return;
	}
	memcpy(e.toks, j->all, (size_t)n * sizeof(int32_t));
	b->pc[b->npc++] = e;
	pc_trim(b);
}

/* Starts job j from the cached prompt sharing the longest prefix with its
 * own, when that is at least prefix_min tokens; at least one prompt token
 * is always left to feed, for the logits. */
static int pc_start(eng_batch *b, job *j)
{
	long lcp;
	int i = b->opt.prefix_cache > 0 && !j->want_plp && !j->n_embeds ? pc_find(b, j->all, j->n_prompt - 1, &lcp) : -1;
	if (i < 0 || lcp < b->opt.prefix_min) {
		int rc = eng_seq_new(&j->seq, b->m);
		if (!rc && j->n_embeds)
			rc = eng_seq_add_embeddings(j->seq, j->embeds, j->n_embeds);
		return rc;
	}
	int rc = eng_seq_fork(&j->seq, b->pc[i].seq, lcp);
	if (rc)
		return rc;
	b->pc[i].used = ++b->tick;
	j->fed = (int)lcp;
	b->reused += lcp;
	return 0;
}

long eng_batch_prefix_reused(const eng_batch *b)
{
	return b ? b->reused : 0;
}

void eng_batch_result_clear(eng_batch_result *r)
{
	if (!r)
		return;
	free(r->error);
	free(r->tokens);
	free(r->logprobs);
	free(r->prompt_logprobs);
	memset(r, 0, sizeof *r);
}

static void job_free(job *j)
{
	if (!j)
		return;
	eng_seq_free(j->seq);
	eng_sampler_free(j->smp);
	free(j->stop);
	free(j->all);
	free(j->lp);
	free(j->plp);
	free(j->embeds);
	free(j->error);
	free(j);
}

int eng_batch_new(eng_batch **out, eng_model *m, const eng_batch_options *opt)
{
	*out = NULL;
	eng_batch_options o = ENG_BATCH_OPTIONS_INIT;
	if (opt)
		o = *opt;
	if (!m)
		return ev_error_set(EV_E_INVALID, "batch: no model");
	if (o.max_batch < 1 || o.max_batch > 4096)
		return ev_error_set(EV_E_INVALID, "batch: max_batch %d is not within 1..4096", o.max_batch);
	if (o.max_step_tokens < 1 || o.max_step_tokens > (1 << 24))
		return ev_error_set(EV_E_INVALID, "batch: max_step_tokens %d is not within 1..16777216",
				    o.max_step_tokens);
	if (o.prefix_cache < 0 || o.prefix_cache > 64 || o.prefix_min < 1)
		return ev_error_set(EV_E_INVALID, "batch: prefix_cache %d is not within 0..64 or prefix_min %d < 1",
				    o.prefix_cache, o.prefix_min);
	eng_batch *b = calloc(1, sizeof *b);
	if (!b)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	b->m = m;
	b->opt = o;
	b->next_id = 1;
	eng_model_get_info(m, &b->info);
	size_t n = (size_t)o.max_batch;
	b->active = calloc(n, sizeof *b->active);
	b->seqs = calloc(n, sizeof *b->seqs);
	b->toks = calloc(n, sizeof *b->toks);
	b->ntok = calloc(n, sizeof *b->ntok);
	b->part = calloc(n, sizeof *b->part);
	b->every = calloc(n, sizeof *b->every);
	b->pc = calloc((size_t)o.prefix_cache + 1, sizeof *b->pc);
	if (!b->active || !b->seqs || !b->toks || !b->ntok || !b->part || !b->every || !b->pc) {
		eng_batch_free(b);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	*out = b;
	return 0;
}

void eng_batch_free(eng_batch *b)
{
	if (!b)
		return;
	for (job *j = b->queue, *n; j; j = n) {
		n = j->next;
		job_free(j);
	}
	for (job *j = b->done, *n; j; j = n) {
		n = j->next;
		job_free(j);
	}
	for (int i = 0; i < b->n_active; i++)
		job_free(b->active[i]);
	while (b->pc && b->npc)
		pc_drop(b, b->npc - 1);
	free(b->pc);
	free(b->active);
	free(b->seqs);
	free(b->toks);
	free(b->ntok);
	free(b->part);
	free(b->every);
	free(b);
}

int eng_batch_add(eng_batch *b, const eng_batch_request *req, uint64_t *id_out)
{
	if (!b || !req)
		return ev_error_set(EV_E_INVALID, "batch: bad arguments");
	if (req->n_prompt < 1 || !req->prompt)
		return ev_error_set(EV_E_INVALID, "batch: empty prompt");
	if (req->gen.n_stop < 0 || req->gen.n_stop > 4096 || (req->gen.n_stop && !req->gen.stop_ids))
		return ev_error_set(EV_E_INVALID, "batch: bad stop id list (%d ids)", req->gen.n_stop);
	if (req->gen.max_tokens < 0)
		return ev_error_set(EV_E_INVALID, "batch: max_tokens %d is negative", req->gen.max_tokens);
	if (req->gen.think.enforce &&
	    (req->gen.think.budget < 0 || req->gen.think.close_id < 0 || req->gen.think.close_id >= b->info.vocab))
		return ev_error_set(EV_E_INVALID, "batch: thinking budget %d with close id %d", req->gen.think.budget,
				    req->gen.think.close_id);
	if (req->top_logprobs < 0 || req->top_logprobs > ENG_MAX_TOP_LOGPROBS)
		return ev_error_set(EV_E_INVALID, "batch: top_logprobs %d is not within 0..%d", req->top_logprobs,
				    ENG_MAX_TOP_LOGPROBS);
	for (int i = 0; i < req->n_prompt; i++)
		if (req->prompt[i] < 0 || req->prompt[i] >= b->info.vocab)
			return ev_error_set(EV_E_INVALID, "batch: prompt token %d at index %d is outside the vocabulary (%d)",
					    req->prompt[i], i, b->info.vocab);
	job *j = calloc(1, sizeof *j);
	if (!j)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	j->gen = req->gen;
	j->cb = req->cb;
	j->cb_ctx = req->cb_ctx;
	j->cookie = req->cookie;
	j->n_prompt = req->n_prompt;
	j->want_lp = req->logprobs;
	j->want_plp = req->prompt_logprobs;
	j->prompt_only = req->prompt_only;
	j->top_lp = req->top_logprobs;
	const int32_t *stop = req->gen.stop_ids ? req->gen.stop_ids : b->info.eos_ids;
	j->nstop = req->gen.stop_ids ? req->gen.n_stop : b->info.n_eos;
	j->cap_all = (long)req->n_prompt + 64;
	j->all = malloc((size_t)j->cap_all * sizeof *j->all);
	j->stop = malloc((size_t)(j->nstop + 1) * sizeof *j->stop);
	if (j->want_lp && !(j->lp = malloc((size_t)(j->cap_all - j->n_prompt) * sizeof *j->lp)))
		j->all = (free(j->all), NULL);
	if (j->want_plp && !(j->plp = malloc((size_t)j->n_prompt * sizeof *j->plp)))
		j->all = (free(j->all), NULL);
	if (req->n_embeds > 0) {
		size_t bytes = (size_t)req->n_embeds * (size_t)b->info.hidden * sizeof(float);
		if (!req->embeds || req->n_embeds > (1 << 22)) {
			job_free(j);
			return ev_error_set(EV_E_INVALID, "batch: %d embedding rows", req->n_embeds);
		}
		if ((j->embeds = malloc(bytes)))
			memcpy(j->embeds, req->embeds, bytes);
		else
			j->all = (free(j->all), NULL);
		j->n_embeds = req->n_embeds;
	}
	if (!j->all || !j->stop) {
		job_free(j);
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	memcpy(j->all, req->prompt, (size_t)req->n_prompt * sizeof *j->all);
	j->n_all = req->n_prompt;
	if (j->nstop)
		memcpy(j->stop, stop, (size_t)j->nstop * sizeof *j->stop);
	j->gen.stop_ids = NULL; /* the copy above is what counts */
	j->id = b->next_id++;
	if (b->queue_tail)
		b->queue_tail->next = j;
	else
		b->queue = j;
	b->queue_tail = j;
	b->n_queued++;
	if (id_out)
		*id_out = j->id;
	return 0;
}

/* Ends job j (already out of the queue and the active set). */
static void finish(eng_batch *b, job *j, eng_stop_reason why, int status)
{
	j->reason = why;
	if (status && !j->status) {
		j->status = status;
		j->error = ev_strdup(ev_error_msg());
	}
	/* the KV pages go back to the pool now, not when the result is taken */
	eng_seq_free(j->seq);
	j->seq = NULL;
	eng_sampler_free(j->smp);
	j->smp = NULL;
	j->next = NULL;
	if (b->done_tail)
		b->done_tail->next = j;
	else
		b->done = j;
	b->done_tail = j;
	b->n_done++;
}

static void drop_active(eng_batch *b, int i)
{
	memmove(&b->active[i], &b->active[i + 1], (size_t)(b->n_active - i - 1) * sizeof *b->active);
	b->n_active--;
}

int eng_batch_cancel(eng_batch *b, uint64_t id)
{
	job *prev = NULL;
	for (job *j = b->queue; j; prev = j, j = j->next) {
		if (j->id != id)
			continue;
		if (prev)
			prev->next = j->next;
		else
			b->queue = j->next;
		if (b->queue_tail == j)
			b->queue_tail = prev;
		b->n_queued--;
		finish(b, j, ENG_STOP_CALLBACK, 0);
		return 0;
	}
	for (int i = 0; i < b->n_active; i++) {
		job *j = b->active[i];
		if (j->id != id)
			continue;
		drop_active(b, i);
		finish(b, j, ENG_STOP_CALLBACK, 0);
		return 0;
	}
	return ev_error_set(EV_E_NOTFOUND, "batch: request %llu is not queued or active", (unsigned long long)id);
}

/* Whether queued job j shares at least prefix_min prompt tokens with a
 * prompt being prefilled now: it then waits for that prefill, to start
 * from its cached pages instead of computing the same KV beside it. */
static bool waits_for_prefix(const eng_batch *b, const job *j)
{
	if (b->opt.prefix_cache <= 0 || j->n_prompt <= b->opt.prefix_min || j->want_plp || j->n_embeds)
		return false;
	for (int i = 0; i < b->n_active; i++) {
		const job *a = b->active[i];
		if (a->state != JOB_PREFILL || a->n_prompt < b->opt.prefix_min)
			continue;
		if (common_prefix(a->all, j->all, b->opt.prefix_min) == b->opt.prefix_min)
			return true;
	}
	return false;
}

/* Moves queued requests into free active slots, in order, but for those
 * waiting for a shared prefix (waits_for_prefix). */
static int admit(eng_batch *b)
{
	job *prev = NULL, *next;
	for (job *j = b->queue; j && b->n_active < b->opt.max_batch; j = next) {
		next = j->next;
		if (waits_for_prefix(b, j)) { /* stays queued, in its place */
			prev = j;
			continue;
		}
		if (prev)
			prev->next = next;
		else
			b->queue = next;
		if (b->queue_tail == j)
			b->queue_tail = prev;
		b->n_queued--;
		j->next = NULL;
		int rc = 0;
		if (j->n_prompt > b->info.max_context)
			rc = ev_error_set(EV_E_LIMIT, "batch: a prompt of %d tokens passes the context limit of %ld",
					  j->n_prompt, b->info.max_context);
		if (!rc) {
			pc_trim(b);
			rc = pc_start(b, j);
		}
		if (!rc)
			rc = eng_sampler_new(&j->smp, &j->gen.sample, b->info.vocab);
		if (rc) {
			finish(b, j, ENG_STOP_LENGTH, rc);
			if (rc == EV_E_NOMEM)
				return rc;
			continue;
		}
		if (j->want_plp) { /* nothing precedes the first token */
			memset(&j->plp[0], 0, sizeof j->plp[0]);
			j->plp[0].token = j->all[0];
			j->plp[0].logprob = NAN;
		}
		j->state = JOB_PREFILL;
		b->active[b->n_active++] = j;
	}
	return 0;
}

static int push_token(job *j, int32_t tok)
{
	if (j->n_all == j->cap_all) {
		long cap = j->cap_all * 2;
		int32_t *p = realloc(j->all, (size_t)cap * sizeof *p);
		if (!p)
			return ev_error_set(EV_E_NOMEM, "out of memory");
		j->all = p;
		if (j->want_lp) {
			eng_logprob *q = realloc(j->lp, (size_t)(cap - j->n_prompt) * sizeof *q);
			if (!q)
				return ev_error_set(EV_E_NOMEM, "out of memory");
			j->lp = q;
		}
		j->cap_all = cap;
	}
	j->all[j->n_all++] = tok;
	return 0;
}

/* One sampling step of job j, whose logits are fresh: the body of
 * eng_generate's loop. Returns 1 when the job ended, 0 when it goes on,
 * or a negative status. */
static int sample_one(eng_batch *b, job *j)
{
	int32_t tok;
	double lp;
	bool pen = j->gen.sample.repetition_penalty != 1.0;
	int32_t forced = eng_think_forced(&j->gen.think, &j->think);
	if (forced >= 0) { /* the thinking budget is spent: the block closes here */
		eng_logprob f;
		eng_logprob_of(&f, eng_seq_logits(j->seq), b->info.vocab, forced, 0);
		tok = forced, lp = f.logprob;
	} else {
		int rc = eng_sample(j->smp, &tok, &lp, eng_seq_logits(j->seq), pen ? j->all : NULL, pen ? j->n_all : 0);
		if (rc)
			return rc;
	}
	int rc;
	for (int i = 0; forced < 0 && i < j->nstop; i++)
		if (j->stop[i] == tok) {
			j->reason = ENG_STOP_EOS;
			return 1;
		}
	eng_think_step(&j->gen.think, &j->think, tok);
	if ((rc = push_token(j, tok)))
		return rc;
	if (j->want_lp)
		eng_logprob_of(&j->lp[j->n_out], eng_seq_logits(j->seq), b->info.vocab, tok, j->top_lp);
	j->n_out++;
	if (j->cb && j->cb(j->cb_ctx, tok, lp)) {
		j->reason = ENG_STOP_CALLBACK;
		return 1;
	}
	if (j->n_out >= j->max || eng_seq_len(j->seq) >= b->info.max_context ||
	    eng_think_answer_full(&j->gen.think, &j->think, j->gen.max_tokens, j->n_out)) {
		j->reason = ENG_STOP_LENGTH;
		return 1;
	}
	j->next_tok = tok;
	return 0;
}

/* eng_forward_batch_rows' sink: row r of step part p is prompt position
 * fed + r, whose logits score the prompt token after it. */
static void prompt_row(void *ctx, int p, long r, const float *logits)
{
	eng_batch *b = ctx;
	job *j = b->part[p];
	long at = j->fed + r + 1;
	if (at < j->n_prompt)
		eng_logprob_of(&j->plp[at], logits, b->info.vocab, j->all[at], j->top_lp);
}

int eng_batch_step(eng_batch *b)
{
	int rc = admit(b);
	if (rc)
		return rc;
	int n = 0, budget = b->opt.max_step_tokens;
	for (int i = 0; i < b->n_active; i++) {
		job *j = b->active[i];
		int k;
		const int32_t *t;
		if (j->state == JOB_DECODE) {
			k = 1;
			t = &j->next_tok;
		} else {
			k = j->n_prompt - j->fed < budget ? j->n_prompt - j->fed : budget;
			t = j->all + j->fed;
			budget -= k;
		}
		if (k <= 0)
			continue; /* prompt budget spent this step: wait for the next */
		b->part[n] = j;
		b->seqs[n] = j->seq;
		b->toks[n] = t;
		b->ntok[n] = k;
		n++;
	}
	if (!n)
		return 0;
	bool rows = false;
	for (int p = 0; p < n; p++)
		rows |= b->every[p] = b->part[p]->state == JOB_PREFILL && b->part[p]->want_plp;
	rc = rows ? eng_forward_batch_rows(b->m, b->seqs, b->toks, b->ntok, n, b->every, prompt_row, b)
	          : eng_forward_batch(b->m, b->seqs, b->toks, b->ntok, n);
	if (rc) {
		/* Every sequence of this step is in an unknown state: end them. */
		for (int p = 0; p < n; p++)
			for (int i = 0; i < b->n_active; i++)
				if (b->active[i] == b->part[p]) {
					drop_active(b, i);
					finish(b, b->part[p], ENG_STOP_LENGTH, rc);
					break;
				}
		return rc == EV_E_NOMEM ? rc : 0;
	}
	for (int p = 0; p < n; p++) {
		job *j = b->part[p];
		if (j->state == JOB_PREFILL) {
			j->fed += b->ntok[p];
			if (j->fed < j->n_prompt)
				continue;
			j->max = eng_generate_limit(&j->gen, b->info.max_context - eng_seq_len(j->seq));
			j->think = eng_think_start(&j->gen.think);
			j->state = JOB_DECODE;
			pc_keep(b, j);
		}
		int r = j->prompt_only ? (j->reason = ENG_STOP_LENGTH, 1) : sample_one(b, j);
		if (r == 0)
			continue;
		for (int i = 0; i < b->n_active; i++)
			if (b->active[i] == j) {
				drop_active(b, i);
				break;
			}
		finish(b, j, j->reason, r < 0 ? r : 0);
		if (r == EV_E_NOMEM)
			return r;
	}
	return 0;
}

int eng_batch_take(eng_batch *b, eng_batch_result *out, int max)
{
	int n = 0;
	while (b->done && n < max) {
		job *j = b->done;
		b->done = j->next;
		if (!b->done)
			b->done_tail = NULL;
		b->n_done--;
		eng_batch_result *r = &out[n++];
		memset(r, 0, sizeof *r);
		r->cookie = j->cookie;
		r->id = j->id;
		r->status = j->status;
		r->error = j->error;
		j->error = NULL;
		r->n_prompt = j->n_prompt;
		r->n_tokens = j->n_out;
		r->n_think = j->think.used;
		r->reason = j->reason;
		r->logprobs = j->lp;
		r->prompt_logprobs = j->plp;
		j->lp = j->plp = NULL;
		/* hand over the generated part of the history */
		memmove(j->all, j->all + j->n_prompt, (size_t)j->n_out * sizeof *j->all);
		r->tokens = j->all;
		j->all = NULL;
		job_free(j);
	}
	return n;
}

int eng_batch_pending(const eng_batch *b) { return b ? b->n_queued + b->n_active + b->n_done : 0; }
int eng_batch_active(const eng_batch *b) { return b ? b->n_queued + b->n_active : 0; }
int eng_batch_finished(const eng_batch *b) { return b ? b->n_done : 0; }
