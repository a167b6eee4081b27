/* Builds small byte-level tokenizer.json files for the tokenizer tests. */
#include "tests/common/testutil.h"
#include "engine/tokenizer/tokenizer_int.h"
#include "test_tokenizer_fixture.h"

#include <stdlib.h>
#include <string.h>

static void key(ev_buf *b, const char *raw)
{
	ev_buf m = EV_BUF_INIT(1 << 16);
	assert_int_equal(eng_tok_map(&m, raw, strlen(raw)), 0);
	ev_json_buf_str(b, m.data ? m.data : "");
	ev_buf_free(&m);
}

char *tt_build(const tt_spec *s)
{
	ev_buf b = EV_BUF_INIT(1 << 24);
	ev_buf_printf(&b, "{\"added_tokens\": %s, \"normalizer\": %s, \"post_processor\": %s, \"pre_tokenizer\": %s, ",
		      s->added ? s->added : "[]", s->normalizer ? s->normalizer : "null", s->post ? s->post : "null",
		      s->pre ? s->pre : "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true}");
	ev_buf_printf(&b, "\"model\": {\"type\": \"BPE\", \"ignore_merges\": %s, \"vocab\": {",
		      s->ignore_merges ? "true" : "false");
	int id = 0;
	for (int c = 0; c < 256; c++) {
		char raw[2] = {(char)c, 0};
		ev_buf m = EV_BUF_INIT(16);
		eng_tok_map(&m, raw, 1);
		ev_buf_puts(&b, id ? ", " : "");
		ev_json_buf_str(&b, m.data);
		ev_buf_printf(&b, ": %d", id++);
		ev_buf_free(&m);
	}
	for (size_t i = 0; i < s->n_merges; i++) {
		char *w = ev_asprintf("%s%s", s->merges[2 * i], s->merges[2 * i + 1]);
		ev_buf_puts(&b, ", ");
		key(&b, w);
		ev_buf_printf(&b, ": %d", id++);
		free(w);
	}
	for (size_t i = 0; i < s->n_extra; i++) {
		ev_buf_puts(&b, ", ");
		key(&b, s->extra_vocab[i]);
		ev_buf_printf(&b, ": %d", id++);
	}
	ev_buf_puts(&b, "}, \"merges\": ");
	if (s->merges_override) {
		ev_buf_puts(&b, s->merges_override);
	} else {
		ev_buf_putc(&b, '[');
		for (size_t i = 0; i < s->n_merges; i++) {
			ev_buf_puts(&b, i ? ", " : "");
			if (s->pairs) {
				ev_buf_putc(&b, '[');
				key(&b, s->merges[2 * i]);
				ev_buf_puts(&b, ", ");
				key(&b, s->merges[2 * i + 1]);
				ev_buf_putc(&b, ']');
			} else {
				ev_buf m = EV_BUF_INIT(1 << 16);
				eng_tok_map(&m, s->merges[2 * i], strlen(s->merges[2 * i]));
				ev_buf_putc(&m, ' ');
				eng_tok_map(&m, s->merges[2 * i + 1], strlen(s->merges[2 * i + 1]));
				ev_json_buf_str(&b, m.data);
				ev_buf_free(&m);
			}
		}
		ev_buf_putc(&b, ']');
	}
	ev_buf_puts(&b, "}}");
	return ev_buf_detach(&b, NULL);
}

eng_tokenizer *tt_load(const tt_spec *s)
{
	char *j = tt_build(s);
	eng_tokenizer *tok = NULL;
	if (eng_tokenizer_load_json(&tok, j, strlen(j), "test.json") != 0)
		fail_msg("load: %s", ev_error_msg());
	free(j);
	return tok;
}

