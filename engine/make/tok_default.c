/*
 * engine/tok_default.c: writes a small but real byte-level BPE tokenizer
 * (tokenizer.json + tokenizer_config.json) for random test checkpoints.
 *
 * Training is the textbook loop, deterministic: pre-tokenize a built-in
 * English text with the family's regex, count the distinct words, then
 * repeatedly merge the most frequent adjacent pair (ties: lowest left id,
 * then lowest right id) until the vocab is full or nothing is left to
 * merge. The text is a few kilobytes, so the naive recount per merge is
 * fast enough (well under a second for the 1,000-odd merges it allows);
 * fill() then tops the vocab up to the size asked.
 */
#include "engine/tokenizer/tokenizer_int.h"

#include <stdlib.h>
#include <string.h>

/* Written for this project; a mix of prose, numbers and a little code so
 * that the merges cover more than letters. */
static const char corpus[] =
	"The evaluation harness runs a model through many suites and keeps every result in one "
	"tracker. When a new checkpoint lands in the folder, the watcher notices it, loads the "
	"weights, and starts the suites that were chosen for it. Each sample becomes a chat request; "
	"the answer comes back, a checker scores it, and the score is written down at once, so that "
	"a run which is stopped halfway loses nothing it had already finished.\n\n"
	"People who look after a model release want to know three things: is the new checkpoint "
	"better than the old one, where did it get worse, and what should the next round of training "
	"fix. The harness answers the first question with means and confidence intervals, the second "
	"with regressions filed against the baseline, and the third with proposals that gather the "
	"confirmed weaknesses together.\n\n"
	"A long context is filled by agents more than by people. The user asks a question, the "
	"environment answers, a tool returns a page of output, and the model reads all of it before "
	"it writes a single word. After twenty rounds the prompt can hold hundreds of thousands of "
	"tokens. Reading every one of them for every new word would be slow, so the engine looks at "
	"summaries of blocks first and then attends only to the blocks that seem to matter.\n\n"
	"The weather this morning was cold and bright. We walked along the river to the old bridge, "
	"where the water was high after the rain of the last week. A heron stood in the shallows and "
	"did not move while we watched it. Later the clouds came in from the west, and by the "
	"afternoon it was raining again, softly at first and then harder, until the streets were "
	"running with water and everyone had gone indoors.\n\n"
	"She opened the letter slowly. It was short: three lines in a careful hand, asking whether "
	"she would come back to the village for the summer. She read it twice, folded it, and put it "
	"on the table beside the window. Outside, children were playing in the square, and somebody "
	"was singing a song she remembered from school. She thought about the house, the garden, the "
	"long evenings, and the friends she had not seen for years.\n\n"
	"Numbers appear everywhere: 1, 2, 3, 10, 42, 100, 256, 1024, 2048, 4096, 65536; the year "
	"2024 and the year 1999; prices like $3.50 and $12.99; times like 09:30 and 17:45; scores "
	"like 0.75, 0.5 and 98.6 percent. A test that passed 163 of 164 problems scored 99.4%.\n\n"
	"def add(a, b):\n    return a + b\n\n"
	"for i in range(10):\n    if i % 2 == 0:\n        print(i)\n\n"
	"int main(void) {\n    int total = 0;\n    for (int i = 0; i < 10; i++) {\n"
	"        total += i;\n    }\n    printf(\"%d\\n\", total);\n    return 0;\n}\n\n"
	"{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n\n"
	"Questions and answers. What is the capital of France? The capital of France is Paris. "
	"How many legs does a spider have? A spider has eight legs. Which planet is closest to the "
	"sun? Mercury is the closest planet to the sun. Why is the sky blue? Sunlight is scattered by "
	"the air, and blue light is scattered more than red light, so the sky looks blue during the "
	"day. Who wrote this text? It was written for the tests of this project, so that the "
	"tokenizer has something real to learn from.\n\n"
	"Good software is easy to read. Functions are short and do one thing; names say what they "
	"hold; errors say what went wrong and where. Every input is checked, every size is bounded, "
	"and nothing crashes on bad data. Tests pin the behaviour that matters, and each test can "
	"fail when the code is wrong. When something is slow, it is measured before it is changed.\n\n"
	"The market opened early on Saturday. Farmers brought apples, pears, potatoes, onions, "
	"carrots, cabbages, eggs, cheese, honey and bread. There were flowers too, and a man selling "
	"wooden spoons that he had carved himself during the winter. By noon most of the stalls were "
	"empty, and the square smelled of coffee, fresh bread and rain on warm stones.\n\n"
	"Learning a language takes patience. You listen, you repeat, you make mistakes, and slowly "
	"the sounds begin to make sense. One day you notice that you understood a whole conversation "
	"without translating it in your head, and you realise how far you have come. Reading helps, "
	"writing helps, but nothing helps as much as talking with people who are kind enough to "
	"wait while you search for the right word.\n";

typedef struct {
	const char *s;
	uint32_t len;
	uint32_t count;
} word;

typedef struct {
	word *v;
	size_t n, cap;
} wordvec;

static int collect(void *ctx, const char *s, size_t len)
{
	wordvec *wv = ctx;
	if (EV_GROW(wv->v, wv->cap, wv->n + 1))
		return ev_error_set(EV_E_NOMEM, "out of memory");
	wv->v[wv->n++] = (word){s, (uint32_t)len, 1};
	return 0;
}

static int cmp_word(const void *a, const void *b)
{
	const word *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(x->s, y->s, n);
	return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* One distinct word during training: its current symbols and count. */
typedef struct {
	int32_t *sym;
	size_t n;
	uint32_t count;
} tword;

typedef struct {
	char *bytes; /* the token's bytes */
	size_t len;
} ttoken;

typedef struct {
	uint64_t key;
	uint64_t count;
} pcount;

static int train(ttoken **toks_out, size_t *n_toks, int32_t (**merges_out)[2], size_t *n_merges, tword *w,
		 size_t nw, size_t target)
{
	int rc = 0;
	ttoken *toks = calloc(target, sizeof *toks);
	/* learned merges (< target, some may reuse an id) + fill's (< target) */
	int32_t(*merges)[2] = calloc(2 * target, sizeof *merges);
	size_t nt = 256, nm = 0, cap = 1024;
	pcount *tab = NULL;
	if (!toks || !merges) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	for (size_t b = 0; b < 256; b++) {
		toks[b].bytes = malloc(1);
		if (!toks[b].bytes) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		toks[b].bytes[0] = (char)b;
		toks[b].len = 1;
	}
	size_t total = 0;
	for (size_t i = 0; i < nw; i++)
		total += w[i].n;
	while (cap < 4 * total)
		cap *= 2;
	tab = malloc(cap * sizeof *tab);
	if (!tab) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	while (nt < target && nm < target) {
		for (size_t i = 0; i < cap; i++)
			tab[i] = (pcount){UINT64_MAX, 0};
		uint64_t best = UINT64_MAX, best_n = 0;
		for (size_t i = 0; i < nw; i++) {
			for (size_t k = 0; k + 1 < w[i].n; k++) {
				uint64_t key = (uint64_t)(uint32_t)w[i].sym[k] << 32 | (uint32_t)w[i].sym[k + 1];
				size_t h = eng_tok_hash(&key, sizeof key) & (cap - 1);
				while (tab[h].key != UINT64_MAX && tab[h].key != key)
					h = (h + 1) & (cap - 1);
				tab[h].key = key;
				tab[h].count += w[i].count;
				if (tab[h].count > best_n || (tab[h].count == best_n && key < best))
					best = key, best_n = tab[h].count;
			}
		}
		if (!best_n)
			break; /* every word is one token */
		int32_t a = (int32_t)(best >> 32), b = (int32_t)(best & 0xffffffffu);
		size_t len = toks[a].len + toks[b].len;
		char *bytes = malloc(len);
		if (!bytes) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		memcpy(bytes, toks[a].bytes, toks[a].len);
		memcpy(bytes + toks[a].len, toks[b].bytes, toks[b].len);
		/* Two merge paths can spell the same token ("ab"+"c", "a"+"bc"):
		 * the second merge then reuses the first one's id. */
		int32_t id = -1;
		for (size_t t = 256; t < nt && id < 0; t++)
			if (toks[t].len == len && memcmp(toks[t].bytes, bytes, len) == 0)
				id = (int32_t)t;
		if (id < 0) {
			id = (int32_t)nt;
			toks[nt++] = (ttoken){bytes, len};
		} else {
			free(bytes);
		}
		merges[nm][0] = a;
		merges[nm][1] = b;
		nm++;
		for (size_t i = 0; i < nw; i++) {
			size_t o = 0;
			for (size_t k = 0; k < w[i].n; k++) {
				if (k + 1 < w[i].n && w[i].sym[k] == a && w[i].sym[k + 1] == b) {
					w[i].sym[o++] = id;
					k++;
				} else {
					w[i].sym[o++] = w[i].sym[k];
				}
			}
			w[i].n = o;
		}
	}
done:
	free(tab);
	if (rc) {
		for (size_t t = 0; toks && t < nt; t++)
			free(toks[t].bytes);
		free(toks);
		free(merges);
		return rc;
	}
	*toks_out = toks;
	*n_toks = nt;
	*merges_out = merges;
	*n_merges = nm;
	return 0;
}

/* The text allows some 1,000 merges. Past that, the vocab is filled with
 * tokens that are a known token plus one letter (in letter-frequency
 * order), each with its merge, so that every id of a model of any vocab
 * size decodes to text. They rank after every learned merge. */
static int fill(ttoken *toks, size_t *nt, int32_t (*merges)[2], size_t *nm, size_t target)
{
	static const char letters[] = "etaoinshrdlcumwfgypbvkjxqz";
	size_t cap = 1024;
	while (cap < 2 * target)
		cap *= 2;
	uint32_t *set = calloc(cap, sizeof *set); /* token id + 1 by its bytes */
	if (!set)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	for (size_t t = 0; t < *nt; t++) {
		size_t h = eng_tok_hash(toks[t].bytes, toks[t].len) & (cap - 1);
		while (set[h])
			h = (h + 1) & (cap - 1);
		set[h] = (uint32_t)t + 1;
	}
	int rc = 0;
	for (size_t base = 0; *nt < target && base < *nt && !rc; base++) {
		for (const char *c = letters; *c && *nt < target; c++) {
			size_t len = toks[base].len + 1;
			char *bytes = malloc(len);
			if (!bytes) {
				rc = ev_error_set(EV_E_NOMEM, "out of memory");
				break;
			}
			memcpy(bytes, toks[base].bytes, len - 1);
			bytes[len - 1] = *c;
			size_t h = eng_tok_hash(bytes, len) & (cap - 1);
			bool seen = false;
			for (; set[h]; h = (h + 1) & (cap - 1)) {
				const ttoken *o = &toks[set[h] - 1];
				if (o->len == len && memcmp(o->bytes, bytes, len) == 0) {
					seen = true;
					break;
				}
			}
			if (seen) {
				free(bytes);
				continue;
			}
			set[h] = (uint32_t)*nt + 1;
			toks[*nt] = (ttoken){bytes, len};
			merges[*nm][0] = (int32_t)base;
			merges[*nm][1] = (unsigned char)*c;
			(*nm)++;
			(*nt)++;
		}
	}
	free(set);
	return rc;
}

static int put_token_str(ev_buf *b, const char *bytes, size_t len)
{
	ev_buf m = EV_BUF_INIT(4 * len + 16);
	int rc = eng_tok_map(&m, bytes, len);
	if (!rc)
		rc = ev_json_buf_str(b, m.data ? m.data : "");
	ev_buf_free(&m);
	return rc;
}

static const char chatml_template[] =
	"{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
	"'<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

static const char llama3_template[] =
	"{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + "
	"'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{%- endfor %}"
	"{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}";

/* With <think> and </think> among the special tokens: the template opens a
 * think block at the generation prompt, as DeepSeek-R1's does, and closes
 * it at once when enable_thinking is false, as Qwen3's does. */
static const char chatml_think_template[] =
	"{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
	"'<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}"
	"{%- if enable_thinking is defined and enable_thinking is false %}{{- '</think>\\n\\n' }}{%- endif %}{%- endif %}";

static const char llama3_think_template[] =
	"{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + "
	"'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{%- endfor %}"
	"{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n<think>\\n' }}"
	"{%- if enable_thinking is defined and enable_thinking is false %}{{- '</think>\\n\\n' }}{%- endif %}{%- endif %}";

int eng_tokenizer_write_default(const char *dir, int vocab_size, const char *family)
{
	return eng_tokenizer_write_default_ex(dir, vocab_size, family, NULL, 0);
}

int eng_tokenizer_write_default_ex(const char *dir, int vocab_size, const char *family, const char *const *extra,
				   size_t nextra)
{
	static const char *const chatml_sp[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
	static const char *const llama3_sp[] = {"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
						"<|end_header_id|>", "<|eot_id|>"};
	eng_chat_family fam = eng_chat_family_from_name(family);
	if (!fam)
		return ev_error_set(EV_E_INVALID, "default tokenizer: family \"%.32s\" is not chatml or llama3",
				    family ? family : "(null)");
	const char *sp[16];
	size_t nsp = fam == ENG_CHAT_CHATML ? 3 : 5;
	if (nextra > 8)
		return ev_error_set(EV_E_INVALID, "default tokenizer: %zu extra special tokens (at most 8)", nextra);
	for (size_t k = 0; k < nsp; k++)
		sp[k] = fam == ENG_CHAT_CHATML ? chatml_sp[k] : llama3_sp[k];
	for (size_t k = 0; k < nextra; k++)
		sp[nsp + k] = extra[k];
	nsp += nextra;
	if (vocab_size < (int)(256 + nsp) || vocab_size > 65536)
		return ev_error_set(EV_E_INVALID, "default tokenizer: vocab size %d is not within [%zu, 65536]",
				    vocab_size, 256 + nsp);
	const char *pattern = fam == ENG_CHAT_CHATML ? eng_tok_gpt2_pattern : eng_tok_llama3_pattern;

	eng_tok_step step = {0};
	pcre2_match_data *md = NULL;
	wordvec wv = {0};
	tword *tw = NULL;
	size_t nw = 0, nt = 0, nm = 0;
	ttoken *toks = NULL;
	int32_t(*merges)[2] = NULL;
	ev_buf j = EV_BUF_INIT((size_t)64 << 20), c = EV_BUF_INIT((size_t)1 << 20);
	char *path = NULL;
	int rc;

	if ((rc = eng_tok_regex(&step.re, pattern, false, "default tokenizer")))
		goto done;
	step.behavior = SPLIT_ISOLATED;
	md = pcre2_match_data_create_from_pattern(step.re, NULL);
	if (!md) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	if ((rc = eng_tok_split(&step, md, NULL, corpus, sizeof corpus - 1, collect, &wv)))
		goto done;
	qsort(wv.v, wv.n, sizeof *wv.v, cmp_word);
	tw = calloc(wv.n ? wv.n : 1, sizeof *tw);
	if (!tw) {
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
		goto done;
	}
	for (size_t i = 0; i < wv.n; i++) {
		if (nw && cmp_word(&wv.v[i], &wv.v[i - 1]) == 0) {
			tw[nw - 1].count++;
			continue;
		}
		tw[nw].sym = malloc(wv.v[i].len * sizeof(int32_t));
		if (!tw[nw].sym) {
			rc = ev_error_set(EV_E_NOMEM, "out of memory");
			goto done;
		}
		for (size_t k = 0; k < wv.v[i].len; k++)
			tw[nw].sym[k] = (unsigned char)wv.v[i].s[k];
		tw[nw].n = wv.v[i].len;
		tw[nw].count = 1;
		nw++;
	}
	if ((rc = train(&toks, &nt, &merges, &nm, tw, nw, (size_t)vocab_size - nsp)) ||
	    (rc = fill(toks, &nt, merges, &nm, (size_t)vocab_size - nsp)))
		goto done;

	/* tokenizer.json */
	rc = ev_buf_puts(&j, "{\n\"version\": \"1.0\",\n\"truncation\": null,\n\"padding\": null,\n\"added_tokens\": [");
	for (size_t k = 0; k < nsp && !rc; k++) {
		rc = ev_buf_printf(&j, "%s\n{\"id\": %zu, \"content\": ", k ? "," : "", nt + k);
		/* think tags are added but not special, as in Qwen3's tokenizer:
		 * decoding keeps them, so the answer shows where thinking ends */
		bool tag = !strcmp(sp[k], "<think>") || !strcmp(sp[k], "</think>");
		if (!rc && !(rc = ev_json_buf_str(&j, sp[k])))
			rc = ev_buf_printf(&j, ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, "
					       "\"normalized\": false, \"special\": %s}", tag ? "false" : "true");
	}
	/* As the real ones: Qwen's normalizer is NFC and its post-processor
	 * adds nothing; Llama-3's puts <|begin_of_text|> (the first special)
	 * before every sequence. */
	if (!rc)
		rc = ev_buf_printf(&j, "\n],\n\"normalizer\": %s,\n\"pre_tokenizer\": {\"type\": \"Sequence\", "
				       "\"pretokenizers\": [{\"type\": \"Split\", \"pattern\": {\"Regex\": ",
				   fam == ENG_CHAT_LLAMA3 ? "null" : "{\"type\": \"NFC\"}");
	if (!rc && !(rc = ev_json_buf_str(&j, pattern)))
		rc = ev_buf_puts(&j, "}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", "
				     "\"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": false}]},\n");
	if (!rc && fam == ENG_CHAT_LLAMA3)
		rc = ev_buf_printf(&j, "\"post_processor\": {\"type\": \"Sequence\", \"processors\": [{\"type\": \"ByteLevel\", "
				       "\"add_prefix_space\": true, \"trim_offsets\": false, \"use_regex\": true}, "
				       "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": "
				       "\"<|begin_of_text|>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], "
				       "\"pair\": [], \"special_tokens\": {\"<|begin_of_text|>\": {\"id\": \"<|begin_of_text|>\", "
				       "\"ids\": [%zu], \"tokens\": [\"<|begin_of_text|>\"]}}}]},\n",
				   nt);
	else if (!rc)
		rc = ev_buf_puts(&j, "\"post_processor\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
				     "\"trim_offsets\": false, \"use_regex\": false},\n");
	if (!rc)
		rc = ev_buf_printf(&j, ""
				       "\"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
				       "\"trim_offsets\": true, \"use_regex\": false},\n"
				       "\"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, "
				       "\"continuing_subword_prefix\": null, \"end_of_word_suffix\": null, "
				       "\"fuse_unk\": false, \"byte_fallback\": false, \"ignore_merges\": %s,\n\"vocab\": {",
				       fam == ENG_CHAT_LLAMA3 ? "true" : "false");
	for (size_t t = 0; t < nt && !rc; t++) {
		if (!(rc = ev_buf_puts(&j, t ? ",\n" : "\n")) && !(rc = put_token_str(&j, toks[t].bytes, toks[t].len)))
			rc = ev_buf_printf(&j, ": %zu", t);
	}
	if (!rc)
		rc = ev_buf_puts(&j, "\n},\n\"merges\": [");
	for (size_t m = 0; m < nm && !rc; m++) {
		const ttoken *a = &toks[merges[m][0]], *b = &toks[merges[m][1]];
		if (!(rc = ev_buf_puts(&j, m ? ",\n[" : "\n[")) && !(rc = put_token_str(&j, a->bytes, a->len)) &&
		    !(rc = ev_buf_puts(&j, ", ")) && !(rc = put_token_str(&j, b->bytes, b->len)))
			rc = ev_buf_putc(&j, ']');
	}
	if (!rc)
		rc = ev_buf_puts(&j, "\n]\n}\n}\n");
	if (!rc && !(path = ev_asprintf("%s/tokenizer.json", dir)))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	if (rc || (rc = ev_file_write(path, j.data, j.len)))
		goto done;

	/* tokenizer_config.json */
	rc = ev_buf_puts(&c, "{\n\"added_tokens_decoder\": {");
	for (size_t k = 0; k < nsp && !rc; k++) {
		rc = ev_buf_printf(&c, "%s\n\"%zu\": {\"content\": ", k ? "," : "", nt + k);
		bool tag = !strcmp(sp[k], "<think>") || !strcmp(sp[k], "</think>");
		if (!rc && !(rc = ev_json_buf_str(&c, sp[k])))
			rc = ev_buf_printf(&c, ", \"lstrip\": false, \"normalized\": false, \"rstrip\": false, "
					       "\"single_word\": false, \"special\": %s}", tag ? "false" : "true");
	}
	if (!rc && fam == ENG_CHAT_CHATML)
		rc = ev_buf_puts(&c, "\n},\n\"bos_token\": null,\n\"eos_token\": \"<|im_end|>\",\n"
				     "\"pad_token\": \"<|endoftext|>\",\n\"chat_template\": ");
	else if (!rc)
		rc = ev_buf_puts(&c, "\n},\n\"bos_token\": \"<|begin_of_text|>\",\n\"eos_token\": \"<|eot_id|>\",\n"
				     "\"pad_token\": \"<|end_of_text|>\",\n\"chat_template\": ");
	bool thinks = false;
	for (size_t k = 0; k < nextra; k++)
		thinks |= !strcmp(extra[k], "</think>");
	if (!rc)
		rc = ev_json_buf_str(&c, fam == ENG_CHAT_CHATML ? (thinks ? chatml_think_template : chatml_template)
							: (thinks ? llama3_think_template : llama3_template));
	if (!rc)
		rc = ev_buf_puts(&c, ",\n\"clean_up_tokenization_spaces\": false,\n\"model_max_length\": 131072,\n"
				     "\"tokenizer_class\": \"PreTrainedTokenizerFast\"\n}\n");
	free(path);
	if (!rc && !(path = ev_asprintf("%s/tokenizer_config.json", dir)))
		rc = ev_error_set(EV_E_NOMEM, "out of memory");
	if (!rc)
		rc = ev_file_write(path, c.data, c.len);
done:
	free(path);
	ev_buf_free(&c);
	ev_buf_free(&j);
	for (size_t t = 0; toks && t < nt; t++)
		free(toks[t].bytes);
	free(toks);
	free(merges);
	for (size_t i = 0; tw && i < nw; i++)
		free(tw[i].sym);
	free(tw);
	free(wv.v);
	pcre2_match_data_free(md);
	pcre2_code_free(step.re);
	return rc;
}
