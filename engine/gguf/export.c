/*
 * engine/gguf/export.c: a checkpoint folder written as one GGUF file
 * (README.md "Writing GGUF files"), what llama.cpp's converter makes of
 * it: the architecture's keys from config.json as the engine reads it,
 * the byte-level BPE tokenizer of tokenizer.json under the llama.cpp name
 * of its pre-tokenizer, the chat template, and the tensors under GGUF's
 * names in the type asked for. convert.c reads such a file back into the
 * same folder.
 */
#include "engine/gguf/gguf.h"
#include "engine/backend.h"
#include "engine/gguf/gguf_int.h"
#include "engine/gguf/quant.h"
#include "engine/tokenizer/tokenizer_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/fs.h"

/* The largest tokenizer.json and tokenizer_config.json read. */
#define EXPORT_JSON_MAX ((size_t)512 << 20)

/* ---- the architecture ---------------------------------------------------- */

/* general.architecture for the folder's model, or NULL (refused, said) */
static const char *arch_of(const eng_config *c, const char *dir)
{
	const char *a = NULL;
	switch (c->arch) {
	case ENG_ARCH_LLAMA:
	case ENG_ARCH_MISTRAL:
	case ENG_ARCH_MIXTRAL: a = "llama"; break;
	case ENG_ARCH_QWEN2: a = "qwen2"; break;
	case ENG_ARCH_QWEN3: a = "qwen3"; break;
	case ENG_ARCH_QWEN3_MOE: a = "qwen3moe"; break;
	case ENG_ARCH_QWEN2_MOE: a = "qwen2moe"; break;
	default:
		ev_error_set(EV_E_UNSUPPORTED, "%s: %s has no GGUF architecture evald writes (llama, Mistral, Mixtral, "
		                               "qwen2, qwen3, qwen2moe, qwen3moe)", dir, c->architecture);
		return NULL;
	}
	if (c->sliding_window > 0) {
		ev_error_set(EV_E_UNSUPPORTED, "%s: sliding_window %ld: GGUF's %s attends the whole context", dir,
		             c->sliding_window, a);
		return NULL;
	}
	if (c->o_bias) {
		ev_error_set(EV_E_UNSUPPORTED, "%s: a bias on the attention output (attention_bias): GGUF's %s has none", dir, a);
		return NULL;
	}
	if (c->rope_dim != c->head_dim) {
		ev_error_set(EV_E_UNSUPPORTED, "%s: RoPE on %d of a head's %d channels: GGUF's %s turns them all", dir,
		             c->rope_dim, c->head_dim, a);
		return NULL;
	}
	return a;
}

/* The factors llama.cpp divides each rotary frequency by (rope_freqs):
 * Llama 3.1's formula from its four settings, or the folder's own */
static float *rope_factors(const eng_config *c, int *n)
{
	*n = c->rope_dim / 2;
	float *f = malloc((size_t)*n * sizeof *f);
	if (!f)
		return NULL;
	for (int i = 0; i < *n; i++) {
		if (c->rope_kind == 3) {
			f[i] = c->rope_freq_factors[i];
			continue;
		}
		double freq = pow(c->rope_theta, -2.0 * i / c->rope_dim), wl = 2 * M_PI / freq, orig = (double)c->rope_orig_max;
		if (wl < orig / c->rope_high)
			f[i] = 1;
		else if (wl > orig / c->rope_low)
			f[i] = (float)c->rope_factor;
		else {
			double sm = (orig / wl - c->rope_low) / (c->rope_high - c->rope_low);
			f[i] = (float)(1 / ((1 - sm) / c->rope_factor + sm));
		}
	}
	return f;
}

static int put_config(eng_gguf_writer *w, const char *arch, const eng_config *c, const char *name, int file_type)
{
	char k[160];
#define KEY(s) (snprintf(k, sizeof k, "%s.%s", arch, s), k)
	int rc = eng_gguf_put_str(w, "general.architecture", arch);
	if (!rc)
		rc = eng_gguf_put_str(w, "general.name", name);
	if (!rc && file_type >= 0)
		rc = eng_gguf_put_u32(w, "general.file_type", (uint32_t)file_type);
	if (!rc)
		rc = eng_gguf_put_u32(w, KEY("context_length"), (uint32_t)c->max_position);
	if (!rc)
		rc = eng_gguf_put_u32(w, KEY("embedding_length"), (uint32_t)c->hidden);
	if (!rc)
		rc = eng_gguf_put_u32(w, KEY("block_count"), (uint32_t)c->layers);
	if (!rc)
		rc = eng_gguf_put_u32(w, KEY("feed_forward_length"), (uint32_t)c->intermediate);
	if (!rc)
		rc = eng_gguf_put_u32(w, KEY("attention.head_count"), (uint32_t)c->heads);
	if (!rc)
		rc = eng_gguf_put_u32(w, KEY("attention.head_count_kv"), (uint32_t)c->kv_heads);
	if (!rc)
		rc = eng_gguf_put_u32(w, KEY("attention.key_length"), (uint32_t)c->head_dim);
	if (!rc)
		rc = eng_gguf_put_u32(w, KEY("attention.value_length"), (uint32_t)c->head_dim);
	if (!rc)
		rc = eng_gguf_put_f32(w, KEY("attention.layer_norm_rms_epsilon"), (float)c->rms_eps);
	if (!rc)
		rc = eng_gguf_put_f32(w, KEY("rope.freq_base"), (float)c->rope_theta);
	if (!rc)
		rc = eng_gguf_put_u32(w, KEY("rope.dimension_count"), (uint32_t)c->rope_dim);
	if (!rc)
		rc = eng_gguf_put_u32(w, KEY("vocab_size"), (uint32_t)c->vocab);
	if (!rc && c->rope_kind == 2) {
		rc = eng_gguf_put_str(w, KEY("rope.scaling.type"), "linear");
		if (!rc)
			rc = eng_gguf_put_f32(w, KEY("rope.scaling.factor"), (float)c->rope_factor);
	}
	if (!rc && c->experts) {
		rc = eng_gguf_put_u32(w, KEY("expert_count"), (uint32_t)c->experts);
		if (!rc)
			rc = eng_gguf_put_u32(w, KEY("expert_used_count"), (uint32_t)c->top_k);
		if (!rc && c->arch != ENG_ARCH_MIXTRAL)
			rc = eng_gguf_put_u32(w, KEY("expert_feed_forward_length"), (uint32_t)c->moe_intermediate);
		if (!rc && c->arch == ENG_ARCH_QWEN2_MOE)
			rc = eng_gguf_put_u32(w, KEY("expert_shared_feed_forward_length"), (uint32_t)c->shared_intermediate);
		if (!rc)
			rc = eng_gguf_put_bool(w, KEY("expert_weights_norm"), c->norm_topk);
	}
#undef KEY
	return rc;
}

/* ---- the tokenizer ------------------------------------------------------- */

/* whether the post-processor puts a special token before each text (the BOS) */
static bool adds_bos(const cJSON *pp)
{
	const char *ty = ev_json_str(pp, "type", "");
	if (!strcmp(ty, "Sequence")) {
		const cJSON *x;
		cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(pp, "processors")) if (adds_bos(x)) return true;
		return false;
	}
	const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(pp, "single"), 0);
	return !strcmp(ty, "TemplateProcessing") && cJSON_HasObjectItem(first, "SpecialToken");
}

static cJSON *read_json(const char *dir, const char *file, bool required, int *rc)
{
	char *path = ev_asprintf("%s/%s", dir, file), *text = NULL;
	size_t len = 0;
	*rc = 0;
	if (!path) {
		*rc = ev_error_set(EV_E_NOMEM, "out of memory");
		return NULL;
	}
	int r = ev_file_read(&text, &len, path, EXPORT_JSON_MAX);
	if (r) {
		if (r == EV_E_NOTFOUND && !required)
			ev_error_clear();
		else
			*rc = r;
		free(path);
		return NULL;
	}
	cJSON *j = cJSON_ParseWithLength(text, len);
	if (!j || !cJSON_IsObject(j))
		*rc = ev_error_set(EV_E_INVALID, "%s: not a JSON object", path);
	free(text), free(path);
	if (*rc) {
		cJSON_Delete(j);
		return NULL;
	}
	return j;
}

/* The chat template: tokenizer_config.json's (a string, or the one named
 * "default" of a list), else chat_template.jinja; NULL when there is none.
 * *rc set on an error. */
static char *chat_template(const char *dir, const cJSON *tc, int *rc)
{
	*rc = 0;
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(tc, "chat_template");
	if (cJSON_IsString(t))
		return ev_strdup(t->valuestring);
	const cJSON *x;
	cJSON_ArrayForEach(x, t) if (!strcmp(ev_json_str(x, "name", ""), "default") && ev_json_str(x, "template", NULL))
		return ev_strdup(ev_json_str(x, "template", ""));
	char *path = ev_asprintf("%s/chat_template.jinja", dir), *text = NULL;
	size_t len = 0;
	int r = path ? ev_file_read(&text, &len, path, EXPORT_JSON_MAX) : ev_error_set(EV_E_NOMEM, "out of memory");
	free(path);
	if (r == EV_E_NOTFOUND)
		ev_error_clear();
	else
		*rc = r;
	return text;
}

#define META "\xe2\x96\x81" /* U+2581, SentencePiece's space */

/* Whether a pre-tokenizer is Metaspace with SentencePiece's space, and
 * whether it puts one first (*prefix) */
static bool metaspace(const cJSON *m, bool *prefix)
{
	if (strcmp(ev_json_str(m, "type", ""), "Metaspace") || strcmp(ev_json_str(m, "replacement", META), META))
		return false;
	const char *scheme = ev_json_str(m, "prepend_scheme", NULL);
	*prefix = scheme ? strcmp(scheme, "never") != 0 : ev_json_bool(m, "add_prefix_space", true);
	return true;
}

/* Whether a normalizer replaces spaces with SentencePiece's (Replace ' '
 * -> U+2581), after a Prepend of it (*prefix) or alone */
static bool spm_normalizer(const cJSON *n, bool *prefix)
{
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, "normalizers"), *rep = n;
	*prefix = false;
	if (!strcmp(ev_json_str(n, "type", ""), "Sequence")) {
		int k = cJSON_GetArraySize(list);
		const cJSON *first = cJSON_GetArrayItem(list, 0);
		if (k == 2 && !strcmp(ev_json_str(first, "type", ""), "Prepend") && !strcmp(ev_json_str(first, "prepend", ""), META))
			*prefix = true;
		else if (k != 1)
			return false;
		rep = cJSON_GetArrayItem(list, k - 1);
	}
	return !strcmp(ev_json_str(rep, "type", ""), "Replace") &&
	       !strcmp(ev_json_str(cJSON_GetObjectItemCaseSensitive(rep, "pattern"), "String", ""), " ") &&
	       !strcmp(ev_json_str(rep, "content", ""), META);
}

/* A SentencePiece BPE as transformers converts one (byte_fallback): the
 * space as U+2581 by a normalizer with no pre-tokenizer (Llama 2), or by
 * a Metaspace pre-tokenizer; *prefix whether one is put first (GGUF's
 * tokenizer.ggml.add_space_prefix). */
static bool spm_form(const cJSON *norm, const cJSON *pre, bool *prefix)
{
	if ((!pre || cJSON_IsNull(pre)) && norm && !cJSON_IsNull(norm))
		return spm_normalizer(norm, prefix);
	return (!norm || cJSON_IsNull(norm)) && metaspace(pre, prefix);
}

/* GGUF's SentencePiece scores from a converted tokenizer's merges: those
 * are every pair whose join is a piece, ordered by the join's score,
 * highest first (transformers' conversion), so each join scores minus the
 * rank of its first merge, the order the scores had; pieces no merge
 * makes (characters, bytes, specials) score below every join, which
 * SentencePiece never asks of them. */
static int spm_scores(float *scores, char *const *toks, int V, char *const *merges, int nm)
{
	ev_strset *joins = NULL;
	int rc = ev_strset_new(&joins);
	for (int m = 0; m < nm && !rc; m++) {
		const char *sp = strchr(merges[m], ' ');
		if (!sp) {
			rc = ev_error_set(EV_E_INVALID, "merge %d ('%.40s') is not two pieces", m, merges[m]);
			break;
		}
		char *join = ev_asprintf("%.*s%s", (int)(sp - merges[m]), merges[m], sp + 1);
		rc = !join ? ev_error_set(EV_E_NOMEM, "out of memory") : ev_strset_add(joins, join, strlen(join), NULL, NULL);
		free(join);
	}
	for (int i = 0; i < V && !rc; i++) {
		long at = ev_strset_find(joins, toks[i], strlen(toks[i]));
		scores[i] = at >= 0 ? -(float)at : -(float)ev_strset_count(joins) - 1.0f;
	}
	ev_strset_free(joins);
	return rc;
}

/* tokenizer.ggml.* and tokenizer.chat_template from the folder: its BPE
 * vocabulary by id (the model's vocab_size of them; ids the tokenizer
 * leaves out as "[PADn]", unused), added tokens as control (special) or
 * user-defined, BOS/EOS from config.json; a byte-level BPE's merges and
 * pre-tokenizer name, or SentencePiece's scores, types and space flag */
static int put_tokenizer(eng_gguf_writer *w, const char *dir, const eng_config *c, char pre_out[16])
{
	int rc = 0;
	cJSON *tj = read_json(dir, "tokenizer.json", true, &rc), *tc = tj ? read_json(dir, "tokenizer_config.json", false, &rc) : NULL;
	if (rc) {
		cJSON_Delete(tj);
		return rc;
	}
	const cJSON *model = cJSON_GetObjectItemCaseSensitive(tj, "model"), *norm = cJSON_GetObjectItemCaseSensitive(tj, "normalizer");
	const char *mtype = ev_json_str(model, "type", "");
	const cJSON *ptk = cJSON_GetObjectItemCaseSensitive(tj, "pre_tokenizer");
	bool im = ev_json_bool(model, "ignore_merges", false), spm = ev_json_bool(model, "byte_fallback", false),
	     prefix = false;
	const eng_gguf_pre *pg = NULL;
	int V = c->vocab;
	char **toks = calloc((size_t)V, sizeof *toks);
	int32_t *types = malloc((size_t)V * sizeof *types);
	float *scores = spm ? malloc((size_t)V * sizeof *scores) : NULL;
	char **merges = NULL, *tmpl = NULL;
	int nm = 0;
	if (!toks || !types || (spm && !scores))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	else if (strcmp(mtype, "BPE"))
		rc = ev_error_set(EV_E_UNSUPPORTED, "%s/tokenizer.json: a %s model; only BPE tokenizers are written", dir,
		                  *mtype ? mtype : "typeless");
	else if (spm && !spm_form(norm, ptk, &prefix))
		rc = ev_error_set(EV_E_UNSUPPORTED, "%s/tokenizer.json: a SentencePiece-style BPE (byte_fallback) whose spaces "
		                                    "are not U+2581 by a Replace normalizer (after a Prepend, or alone) or by a "
		                                    "Metaspace pre-tokenizer: GGUF's 'llama' tokenizer has no other form", dir);
	else if (spm && prefix && cJSON_IsObject(ptk))
		ev_log_warn("%s/tokenizer.json: a Metaspace pre-tokenizer puts no U+2581 before a text that begins with a "
		            "space; GGUF's 'llama' tokenizer (add_space_prefix) puts one before every text, so such texts "
		            "tokenize otherwise in the GGUF file", dir);
	else if (spm)
		; /* no pre-tokenizer to name */
	else if (spm_form(norm, ptk, &prefix))
		rc = ev_error_set(EV_E_UNSUPPORTED, "%s/tokenizer.json: a SentencePiece-style BPE without byte_fallback: GGUF's "
		                                    "'llama' tokenizer falls back to byte pieces (<0x00> ...) for what its "
		                                    "pieces do not cover", dir);
	else if (norm && !cJSON_IsNull(norm) && strcmp(ev_json_str(norm, "type", ""), "NFC"))
		rc = ev_error_set(EV_E_UNSUPPORTED, "%s/tokenizer.json: normalizer '%s': GGUF's byte-level tokenizers have none",
		                  dir, ev_json_str(norm, "type", "?"));
	else if (!cJSON_IsObject(ptk))
		rc = ev_error_set(EV_E_UNSUPPORTED, "%s/tokenizer.json: no pre_tokenizer; GGUF's byte-level tokenizers name "
		                                    "one", dir);
	else if ((rc = eng_gguf_pre_match(ptk, im, &pg)))
		rc = ev_error_wrap(rc, "%s/tokenizer.json", dir);
	else if (!pg)
		rc = ev_error_set(EV_E_UNSUPPORTED, "%s/tokenizer.json: its pre_tokenizer splits text as none of the "
		                                    "pre-tokenizers llama.cpp names (evald engine gguf --pre-tokenizers lists "
		                                    "them)", dir);
	const char *pre = spm ? "" : pg ? pg->names[0] : NULL;
	if (!rc && !spm && im != pg->ignore_merges)
		ev_log_warn("%s/tokenizer.json: ignore_merges is %s, where llama.cpp's '%s' %s: a word that is a whole "
		            "token the merges do not reach may split otherwise in the GGUF file", dir, im ? "true" : "false",
		            pre, im ? "follows the merges" : "takes such words whole");
	for (int i = 0; i < V && !rc; i++)
		types[i] = 1; /* normal */
	const cJSON *x, *vocab = rc ? NULL : cJSON_GetObjectItemCaseSensitive(model, "vocab"),
	            *added = cJSON_GetObjectItemCaseSensitive(tj, "added_tokens");
	cJSON_ArrayForEach(x, vocab)
	{
		if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble >= V || toks[x->valueint]) {
			rc = ev_error_set(EV_E_INVALID, "%s/tokenizer.json: token '%.40s' has id %.0f (the model's vocab_size is %d; "
			                                "ids 0 .. %d, each once)", dir, x->string, x->valuedouble, V, V - 1);
			break;
		}
		toks[x->valueint] = x->string;
	}
	if (rc)
		added = NULL;
	cJSON_ArrayForEach(x, added)
	{
		double id = ev_json_num(x, "id", -1);
		const char *content = ev_json_str(x, "content", NULL);
		if (id < 0 || id >= V || !content) {
			rc = ev_error_set(EV_E_INVALID, "%s/tokenizer.json: added token '%.40s' has id %.0f (the model's "
			                                "vocab_size is %d)", dir, content ? content : "?", id, V);
			break;
		}
		toks[(int)id] = (char *)content;
		types[(int)id] = ev_json_bool(x, "special", false) ? 3 : 4; /* control, user-defined */
	}
	char **pads = NULL; /* the names made for ids the tokenizer leaves out */
	if (!rc && !(pads = calloc((size_t)V, sizeof *pads)))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	for (int i = 0; i < V && !rc; i++)
		if (!toks[i]) {
			if (!(pads[i] = toks[i] = ev_asprintf("[PAD%d]", i)))
				rc = ev_error_set(EV_E_NOMEM, "out of memory");
			types[i] = 5; /* unused */
		}
	const cJSON *mg = cJSON_GetObjectItemCaseSensitive(model, "merges");
	if (!rc && (nm = cJSON_GetArraySize(mg)) > 0 && !(merges = calloc((size_t)nm, sizeof *merges)))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	int i = 0;
	if (rc)
		mg = NULL;
	cJSON_ArrayForEach(x, mg)
	{ /* "a b", or ["a", "b"] */
		const cJSON *l = cJSON_GetArrayItem(x, 0), *r = cJSON_GetArrayItem(x, 1);
		merges[i] = cJSON_IsString(x)                                ? ev_strdup(x->valuestring)
		            : cJSON_IsString(l) && cJSON_IsString(r) && cJSON_GetArraySize(x) == 2 ? ev_asprintf("%s %s", l->valuestring, r->valuestring)
		                                                                 : NULL;
		if (!merges[i++]) {
			rc = ev_error_set(EV_E_INVALID, "%s/tokenizer.json: merge %d is not \"a b\" or a pair of strings", dir, i - 1);
			break;
		}
	}
	long unk = -1;
	if (!rc && spm) { /* the unknown piece, the byte pieces, and the scores in place of the merges */
		const char *ut = ev_json_str(model, "unk_token", NULL);
		for (int k = 0; k < V; k++) {
			unsigned b;
			char tail;
			if (ut && types[k] != 5 && !strcmp(toks[k], ut))
				types[k] = 2, unk = k;
			else if (types[k] == 1 && strlen(toks[k]) == 6 && sscanf(toks[k], "<0x%2X%c", &b, &tail) == 2 && tail == '>')
				types[k] = 6;
		}
		if ((rc = spm_scores(scores, toks, V, merges, nm)))
			ev_error_wrap(rc, "%s/tokenizer.json", dir);
	}
	if (!rc)
		rc = eng_gguf_put_str(w, "tokenizer.ggml.model", spm ? "llama" : "gpt2");
	if (!rc && !spm)
		rc = eng_gguf_put_str(w, "tokenizer.ggml.pre", pre);
	if (!rc)
		rc = eng_gguf_put_strs(w, "tokenizer.ggml.tokens", (const char *const *)toks, (size_t)V);
	if (!rc && spm)
		rc = eng_gguf_put_f32s(w, "tokenizer.ggml.scores", scores, (size_t)V);
	if (!rc)
		rc = eng_gguf_put_i32s(w, "tokenizer.ggml.token_type", types, (size_t)V);
	if (!rc && !spm)
		rc = eng_gguf_put_strs(w, "tokenizer.ggml.merges", (const char *const *)merges, (size_t)nm);
	if (!rc && spm)
		rc = eng_gguf_put_bool(w, "tokenizer.ggml.add_space_prefix", prefix);
	if (!rc && unk >= 0)
		rc = eng_gguf_put_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)unk);
	/* (what tokenizer.json's post-processor does, as the folder's tokenizer does it) */
	bool bos = c->bos_id >= 0 && c->bos_id < V && adds_bos(cJSON_GetObjectItemCaseSensitive(tj, "post_processor"));
	if (!rc && c->bos_id >= 0 && c->bos_id < V)
		rc = eng_gguf_put_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)c->bos_id);
	if (!rc)
		rc = eng_gguf_put_bool(w, "tokenizer.ggml.add_bos_token", bos);
	if (!rc && c->n_eos > 0 && c->eos_ids[0] >= 0 && c->eos_ids[0] < V)
		rc = eng_gguf_put_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)c->eos_ids[0]);
	if (!rc && (tmpl = chat_template(dir, tc, &rc)) && !rc)
		rc = eng_gguf_put_str(w, "tokenizer.chat_template", tmpl);
	if (!rc)
		snprintf(pre_out, 16, "%s", pre);
	for (int k = 0; k < V && pads; k++)
		free(pads[k]);
	for (int k = 0; k < nm && merges; k++)
		free(merges[k]);
	free(pads), free(merges), free(toks), free(types), free(scores), free(tmpl);
	cJSON_Delete(tj), cJSON_Delete(tc);
	return rc;
}

/* ---- the tensors ----------------------------------------------------------- */

/* A tensor's elements */
static size_t elements(const eng_tensor *t)
{
	size_t n = 1;
	for (int d = 0; d < t->ndim; d++)
		n *= (size_t)t->shape[d];
	return n;
}

/* One tensor of the file, planned before the file is written and made
 * while it is (eng_gguf_write_with): a folder tensor (rows permuted over
 * `heads` heads when heads > 0), or a layer's experts' matrices stacked */
typedef struct {
	const eng_tensor *t;   /* NULL: stacked experts */
	int layer, leaf;       /* (stacked experts) */
	int heads;
	eng_dtype from;        /* as stored (the experts': expert 0's) */
	uint32_t to;           /* as written */
	size_t n;              /* elements */
} planned;

typedef struct {
	const eng_config *c;
	eng_tensor_set *ts;
	const char *dir;
	uint32_t target; /* when typed */
	bool typed;
	int mix;
	eng_gguf_export_stats *st;
	planned *plan;
	size_t n_plan, cap_plan;
	float *f;        /* scratch: a tensor's values */
	void *p;         /* and its rows permuted as stored */
	size_t cap_f, cap_p;
} exporter;

/* llama.cpp's row order of a q or k projection: within each head of hd
 * rows, HF row j * hd / 2 + i goes to 2i + j (rows of rb bytes) */
static void permute_rows(void *dst, const void *src, int64_t rows, size_t rb, int heads)
{
	int64_t hd = rows / heads;
	for (int h = 0; h < heads; h++)
		for (int64_t i = 0; i < hd / 2; i++)
			for (int j = 0; j < 2; j++)
				memcpy((char *)dst + (size_t)(h * hd + 2 * i + j) * rb,
				       (const char *)src + (size_t)(h * hd + j * (hd / 2) + i) * rb, rb);
}

/* The type a tensor is written in: norms and biases F32 as llama.cpp
 * writes them, a weight in its stored type when untyped, else by
 * eng_gguf_weight_type's rules */
static uint32_t type_for(const exporter *e, const char *name, eng_dtype from, const uint64_t *dims, int nd)
{
	uint32_t as_is = nd == 1 ? ENG_GGML_F32 : eng_dtype_ggml(from);
	return e->typed ? eng_gguf_weight_type(name, nd, dims[0], as_is, e->target, e->mix, e->c->layers, !e->c->tie)
	                : as_is;
}

/* A tensor's entry in the file, its bytes to come (fill_one) */
static int plan_one(exporter *e, eng_gguf_writer *w, const char *name, const planned *pl, const uint64_t *dims, int nd)
{
	if (e->n_plan == e->cap_plan) {
		size_t nc = e->cap_plan ? 2 * e->cap_plan : 64;
		planned *np = realloc(e->plan, nc * sizeof *np);
		if (!np)
			return ev_error_set(EV_E_NOMEM, "out of memory");
		e->plan = np, e->cap_plan = nc;
	}
	planned *p = &e->plan[e->n_plan++];
	*p = *pl;
	p->to = type_for(e, name, pl->from, dims, nd);
	size_t in_bytes = eng_dtype_bytes(pl->from, pl->n);
	size_t out_bytes = eng_ggml_bytes(p->to, pl->n);
	bool kept = p->to == eng_dtype_ggml(pl->from);
	e->st->tensors++;
	e->st->bytes_in += in_bytes;
	e->st->bytes_out += out_bytes;
	if (!kept) {
		e->st->quantized++;
		if (e->typed && nd > 1 && p->to != e->target && !(e->mix && p->to == ENG_GGML_Q6_K))
			e->st->fallbacks++;
	}
	return eng_gguf_put_tensor_later(w, name, p->to, dims, nd, out_bytes);
}

/* scratch of at least nf values and np bytes */
static int room(exporter *e, size_t nf, size_t np)
{
	if (nf > e->cap_f) {
		free(e->f);
		if (!(e->f = malloc(nf * sizeof *e->f))) {
			e->cap_f = 0;
			return ev_error_set(EV_E_NOMEM, "out of memory for a tensor of %zu values", nf);
		}
		e->cap_f = nf;
	}
	if (np > e->cap_p) {
		free(e->p);
		if (!(e->p = malloc(np))) {
			e->cap_p = 0;
			return ev_error_set(EV_E_NOMEM, "out of memory for a tensor of %zu bytes", np);
		}
		e->cap_p = np;
	}
	return 0;
}

/* The model's MoE names, and an expert's matrix `leaf` (0 gate, 1 up, 2 down) by them */
static const moe_names *moe_of(const eng_config *c)
{
	return c->arch == ENG_ARCH_MIXTRAL ? &eng_gguf_mixtral_names : &eng_gguf_qwen_moe_names;
}

static const char *leaf_name(const moe_names *mn, int leaf)
{
	return leaf == 0 ? mn->gate : leaf == 1 ? mn->up : mn->down;
}

/* The expert x's matrix `leaf` of a layer, or NULL */
static const eng_tensor *expert_tensor(exporter *e, int layer, int leaf, int x)
{
	const moe_names *mn = moe_of(e->c);
	char hn[160];
	snprintf(hn, sizeof hn, "%slayers.%d.%s.experts.%d.%s.weight", e->c->prefix, layer, mn->block, x,
	         leaf_name(mn, leaf));
	return eng_st_find(e->ts, hn);
}

/* The bytes of planned tensor i (eng_gguf_fill_fn) */
static int fill_one(void *ctx, size_t i, void *buf, size_t bytes)
{
	exporter *e = ctx;
	const planned *p = &e->plan[i];
	const void *src = p->t ? p->t->data : NULL;
	int rc = room(e, p->to == eng_dtype_ggml(p->from) ? 0 : p->n, p->heads ? eng_dtype_bytes(p->from, p->n) : 0);
	if (rc)
		return rc;
	if (p->heads) { /* on the stored rows: blocks never span a row */
		size_t rb = eng_dtype_bytes(p->from, (size_t)p->t->shape[1]);
		permute_rows(e->p, src, p->t->shape[0], rb, p->heads);
		src = e->p;
	}
	if (p->to == eng_dtype_ggml(p->from)) { /* as stored: copied (experts one after another) */
		if (p->t) {
			memcpy(buf, src, bytes);
			return 0;
		}
		size_t per = bytes / (size_t)e->c->experts;
		for (int x = 0; x < e->c->experts; x++)
			memcpy((char *)buf + per * (size_t)x, expert_tensor(e, p->layer, p->leaf, x)->data, per);
		return 0;
	}
	if (p->t) {
		eng_to_f32(e->f, src, p->from, p->n);
	} else { /* a layer's experts, one after another */
		size_t per = p->n / (size_t)e->c->experts;
		for (int x = 0; x < e->c->experts; x++) {
			const eng_tensor *t = expert_tensor(e, p->layer, p->leaf, x);
			eng_to_f32(e->f + per * (size_t)x, t->data, t->dtype, per);
		}
	}
	eng_ggml_quantize(buf, e->f, p->to, p->n);
	return 0;
}

/* Whether a name after "model.layers.N." is one of the model's expert
 * matrices (plan_experts writes them, by layer) */
static bool is_expert(const eng_config *c, const char *rest)
{
	const moe_names *mn = moe_of(c);
	size_t nb = strlen(mn->block);
	int x = -1, used = 0;
	if (!c->experts || strncmp(rest, mn->block, nb) || sscanf(rest + nb, ".experts.%d.%n", &x, &used) != 1 ||
	    used <= 0 || x < 0)
		return false;
	for (int leaf = 0; leaf < 3; leaf++) {
		const char *ln = leaf_name(mn, leaf), *tail = rest + nb + used;
		if (!strncmp(tail, ln, strlen(ln)) && !strcmp(tail + strlen(ln), ".weight"))
			return true;
	}
	return false;
}

/* A layer's experts' gate, up or down matrices as one 3-D tensor
 * [experts, rows, cols] (ggml's dims innermost first), or one tensor each */
static int plan_experts(exporter *e, eng_gguf_writer *w, int layer, int leaf, bool apart)
{
	static const char *const gg[3] = {"gate", "up", "down"};
	const eng_config *c = e->c;
	const eng_tensor *t0 = expert_tensor(e, layer, leaf, 0);
	if (!t0)
		return 0; /* a dense layer */
	uint64_t dims[3] = {(uint64_t)t0->shape[1], (uint64_t)t0->shape[0], (uint64_t)c->experts};
	int rc = 0;
	for (int x = 0; x < c->experts && !rc; x++) {
		const eng_tensor *t = expert_tensor(e, layer, leaf, x);
		if (!t)
			return ev_error_set(EV_E_INVALID, "%s: layer %d has expert 0's %s matrix and not expert %d's", e->dir,
			                    layer, gg[leaf], x);
		if (t->ndim != 2 || (uint64_t)t->shape[1] != dims[0] || (uint64_t)t->shape[0] != dims[1] ||
		    (!apart && t->dtype != t0->dtype))
			return ev_error_set(EV_E_INVALID, "%s: tensor '%s' is not a matrix like expert 0's", e->dir, t->name);
		if (apart) {
			char gn[96];
			snprintf(gn, sizeof gn, "blk.%d.ffn_%s.%d.weight", layer, gg[leaf], x);
			planned pl = {t, layer, leaf, 0, t->dtype, 0, elements(t)};
			rc = plan_one(e, w, gn, &pl, dims, 2);
		}
	}
	if (apart || rc)
		return rc;
	char gn[96];
	snprintf(gn, sizeof gn, "blk.%d.ffn_%s_exps.weight", layer, gg[leaf]);
	planned pl = {NULL, layer, leaf, 0, t0->dtype, 0, elements(t0) * (size_t)c->experts};
	return plan_one(e, w, gn, &pl, dims, 3);
}

/* The GGUF name of a folder tensor (HF name after the decoder's prefix,
 * or lm_head), NULL for those written elsewhere or not at all (*skip),
 * else refused */
static char *gguf_name(const eng_config *c, const char *hf, bool *skip, int *heads)
{
	*skip = false, *heads = 0;
	for (size_t i = 0; eng_gguf_top_names[i][0]; i++)
		if (!strcmp(hf, eng_gguf_top_names[i][1])) {
			*skip = c->tie && !strcmp(hf, "lm_head.weight"); /* tied: the embedding is the head */
			return *skip ? NULL : ev_strdup(eng_gguf_top_names[i][0]);
		}
	int layer = -1, used = 0;
	if (sscanf(hf, "model.layers.%d.%n", &layer, &used) != 1 || used <= 0 || layer < 0 || layer >= c->layers)
		return NULL;
	const char *rest = hf + used;
	if (!strcmp(rest, "self_attn.rotary_emb.inv_freq") || is_expert(c, rest)) {
		*skip = true; /* (computed from the config; experts by layer, plan_experts) */
		return NULL;
	}
	for (size_t i = 0; eng_gguf_layer_names[i][0]; i++)
		if (!strcmp(rest, eng_gguf_layer_names[i][1])) {
			bool llama = c->arch == ENG_ARCH_LLAMA || c->arch == ENG_ARCH_MISTRAL || c->arch == ENG_ARCH_MIXTRAL;
			if (llama && !strcmp(rest, "self_attn.q_proj.weight"))
				*heads = c->heads;
			if (llama && !strcmp(rest, "self_attn.k_proj.weight"))
				*heads = c->kv_heads;
			return ev_asprintf("blk.%d.%s", layer, eng_gguf_layer_names[i][0]);
		}
	const moe_names *mn = moe_of(c);
	if (c->experts && !strncmp(rest, mn->block, strlen(mn->block)) && !strcmp(rest + strlen(mn->block), ".gate.weight"))
		return ev_asprintf("blk.%d.ffn_gate_inp.weight", layer);
	for (size_t i = 0; c->arch == ENG_ARCH_QWEN2_MOE && eng_gguf_shexp_names[i][0]; i++)
		if (!strcmp(rest, eng_gguf_shexp_names[i][1]))
			return ev_asprintf("blk.%d.%s", layer, eng_gguf_shexp_names[i][0]);
	return NULL;
}

static int plan_tensors(exporter *e, eng_gguf_writer *w, bool apart)
{
	const eng_config *c = e->c;
	eng_tensor_set *ts = e->ts;
	int rc = 0;
	for (int i = 0; i < ts->nt && !rc; i++) {
		const eng_tensor *t = &ts->t[i];
		bool skip;
		int heads;
		char *gn = gguf_name(c, t->name, &skip, &heads);
		if (!gn) {
			if (!skip)
				rc = ev_error_set(EV_E_UNSUPPORTED, "%s: tensor '%s' has no GGUF name for %s", e->dir, t->name,
				                  c->architecture);
			continue;
		}
		uint64_t dims[4];
		int nd = t->ndim;
		for (int d = 0; d < nd; d++)
			dims[d] = (uint64_t)t->shape[nd - 1 - d];
		if (strstr(gn, ".ffn_gate_inp_shexp.")) /* llama.cpp writes the shared expert's gate as a vector */
			nd = 1;
		/* (the tokenizer's vocab_size tokens name the embedding's rows) */
		bool table = !strcmp(gn, "token_embd.weight") || !strcmp(gn, "output.weight");
		if (table && (nd != 2 || dims[1] != (uint64_t)c->vocab || dims[0] != (uint64_t)c->hidden))
			rc = ev_error_set(EV_E_INVALID, "%s: tensor '%s' is not %d rows of %d (vocab_size by hidden_size)", e->dir,
			                  t->name, c->vocab, c->hidden);
		if (!rc && heads && (nd != 2 || dims[1] % (uint64_t)(2 * heads)))
			rc = ev_error_set(EV_E_INVALID, "%s: tensor '%s': %llu rows for %d heads", e->dir, t->name,
			                  (unsigned long long)(nd == 2 ? dims[1] : 0), heads);
		planned pl = {t, 0, 0, heads, t->dtype, 0, elements(t)};
		if (!rc)
			rc = plan_one(e, w, gn, &pl, dims, nd);
		free(gn);
	}
	for (int l = 0; l < c->layers && c->experts && !rc; l++)
		for (int leaf = 0; leaf < 3 && !rc; leaf++)
			rc = plan_experts(e, w, l, leaf, apart && c->arch == ENG_ARCH_MIXTRAL);
	if (!rc && (c->rope_kind == 1 || c->rope_kind == 3)) { /* Llama 3.1's scaling, as llama.cpp writes it */
		int nf = 0;
		float *ff = rope_factors(c, &nf);
		uint64_t d1 = (uint64_t)nf;
		rc = ff ? eng_gguf_put_tensor(w, "rope_freqs.weight", ENG_GGML_F32, &d1, 1, ff, (size_t)nf * sizeof *ff)
		        : ev_error_set(EV_E_NOMEM, "out of memory");
		e->st->tensors++;
		e->st->bytes_out += (uint64_t)nf * sizeof *ff;
		free(ff);
	}
	return rc;
}

int eng_gguf_export(const char *dir, const char *out, const eng_gguf_export_opts *o, eng_gguf_export_stats *st)
{
	memset(st, 0, sizeof *st);
	uint32_t target = 0;
	int mix = 0, rc = 0;
	if (o->type && (rc = eng_gguf_quant_target(o->type, &target, &mix)))
		return rc;
	eng_config c;
	memset(&c, 0, sizeof c);
	if ((rc = eng_config_load(&c, dir)))
		return rc;
	const char *arch = arch_of(&c, dir);
	if (!arch || strcmp(c.prefix, "model.")) {
		eng_config_clear(&c);
		return arch ? ev_error_set(EV_E_UNSUPPORTED, "%s: the decoder's tensors under '%s', not 'model.'", dir, c.prefix)
		            : ev_error_code();
	}
	snprintf(st->arch, sizeof st->arch, "%s", arch);
	/* general.name: the folder's own name ("a/b/" names b) */
	char path[4096], name[256];
	snprintf(path, sizeof path, "%s", dir);
	for (size_t k = strlen(path); k > 1 && path[k - 1] == '/'; k--)
		path[k - 1] = 0;
	const char *slash = strrchr(path, '/');
	snprintf(name, sizeof name, "%s", slash && slash[1] ? slash + 1 : path);
	eng_gguf_writer *w = NULL;
	eng_tensor_set ts;
	memset(&ts, 0, sizeof ts);
	exporter e = {.c = &c, .ts = &ts, .dir = dir, .target = target, .typed = o->type != NULL, .mix = mix, .st = st};
	if (!(rc = eng_gguf_writer_new(&w)))
		rc = put_config(w, arch, &c, name, o->type ? (int)eng_gguf_file_type(target, mix) : -1);
	if (!rc)
		rc = o->tokenizer ? o->tokenizer(w, o->tokenizer_ctx) : put_tokenizer(w, dir, &c, st->pre);
	if (!rc)
		rc = eng_st_open(&ts, dir);
	/* every tensor's entry first, then the file with each made in turn: one tensor in memory */
	if (!rc)
		rc = plan_tensors(&e, w, o->experts_apart);
	if (!rc)
		rc = eng_gguf_write_with(w, out, fill_one, &e);
	free(e.f), free(e.p), free(e.plan);
	eng_st_close(&ts);
	eng_gguf_writer_free(w);
	eng_config_clear(&c);
	return rc;
}
