/* Loading suites from folders and bare .jsonl files: every suite.json and
 * samples.jsonl field lands where suites.h says, templates and system
 * prompts shape the messages, attachments become parts, the hash covers
 * both files. */
#include "testutil.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "suites/suites.h"

static const char *SUITE_JSON =
	"{\"name\":\"mini\",\"version\":2,\"kind\":\"qa\",\"description\":\"a test suite\",\n"
	" \"system_prompt\":\"Be brief.\",\n"
	" \"prompt_template\":\"Question: {input}\\nTopic: {topic}\",\n"
	" \"generation\":{\"max_tokens\":64,\"temperature\":0,\"top_p\":0.9,\"seed\":7,\"stop\":[\"\\n\\n\",\"END\"],"
	"\"epochs\":3},\n"
	" \"checker\":{\"type\":\"exact\",\"ignore_case\":true},\n"
	" \"future_key\":{\"x\":1}}\n";

static const char *SAMPLES =
	"{\"id\":\"a\",\"input\":\"2+2?\",\"topic\":\"math\",\"target\":4,\"metadata\":{\"k\":1}}\n"
	"{\"id\":7,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Describe\"},"
	"{\"type\":\"image\",\"path\":\"img/cat.png\"},"
	"{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/jpeg;base64,AAAA\"}}]}],"
	"\"target\":[\"cat\",\"kitten\"]}\n"
	"   \n"
	"{\"id\":\"c\",\"input\":\"see files\",\"metadata\":{\"topic\":\"files\"},"
	"\"attachments\":[\"img/cat.png\",\"docs/a.pdf\",\"./clip.MP4\"],"
	"\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],\"tests\":\"assert f()==1\","
	"\"checker\":\"includes\",\"target\":{\"name\":\"f\"}}\n"
	"{\"id\":\"d\",\"messages\":[{\"role\":\"system\",\"content\":\"own system\"},{\"role\":\"user\",\"content\":\"hi\"},"
	"{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
	"\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},"
	"{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"42\"}]}";

static char *make_folder(const char *tag, bool with_suite_json)
{
	char *dir = tu_tmpdir(tag);
	char *p;
	if (with_suite_json)
		free(tu_write(dir, "suite.json", SUITE_JSON));
	free(tu_write(dir, "samples.jsonl", SAMPLES));
	p = tu_path(dir, "img");
	mkdir(p, 0755);
	free(p);
	p = tu_path(dir, "docs");
	mkdir(p, 0755);
	free(p);
	free(tu_write(dir, "img/cat.png", "\x89PNG fake"));
	free(tu_write(dir, "docs/a.pdf", "%PDF-1.4 fake"));
	free(tu_write(dir, "clip.MP4", "fake video"));
	return dir;
}

static void hash_of(char out[EV_SHA256_HEX], const char *a, const char *b)
{
	char *both = ev_asprintf("%s%s", a, b);
	ev_sha256_hex(out, both, strlen(both));
	free(both);
}

static void folder_suite_loads_every_field(void **state)
{
	(void)state;
	char *dir = make_folder("suite-folder", true);
	ev_suite *s = NULL;
	ev_suite_options opt = EV_SUITE_OPTIONS_INIT;
	if (ev_suite_load(&s, dir, &opt))
		fail_msg("%s", ev_error_msg());
	assert_string_equal(s->name, "mini");
	assert_string_equal(s->version, "2");
	assert_string_equal(s->kind, "qa");
	assert_string_equal(s->system_prompt, "Be brief.");
	assert_int_equal(s->gen.max_tokens, 64);
	assert_true(s->gen.temperature == 0.0);
	assert_true(s->gen.top_p == 0.9);
	assert_true(s->gen.has_seed);
	assert_int_equal(s->gen.seed, 7);
	assert_int_equal(s->gen.n_stop, 2);
	assert_string_equal(s->gen.stop[0], "\n\n");
	assert_string_equal(s->gen.stop[1], "END");
	assert_int_equal(s->gen.epochs, 3);
	cJSON *ck = cJSON_Parse(s->checker_json);
	assert_string_equal(ev_json_str(ck, "type", ""), "exact");
	assert_true(ev_json_bool(ck, "ignore_case", false));
	cJSON_Delete(ck);
	assert_null(s->extracted_dir);

	char *real = realpath(dir, NULL);
	assert_string_equal(s->root, real);
	char want[EV_SHA256_HEX];
	hash_of(want, SUITE_JSON, SAMPLES);
	assert_string_equal(s->content_hash, want);

	assert_int_equal(s->n_samples, 4);
	/* a: template + system prompt, number target */
	ev_sample *x = &s->samples[0];
	assert_string_equal(x->id, "a");
	assert_int_equal(x->line, 1);
	assert_int_equal(x->n_messages, 2);
	assert_string_equal(x->messages[0].role, "system");
	assert_string_equal(x->messages[0].parts[0].text, "Be brief.");
	assert_string_equal(x->messages[1].role, "user");
	assert_string_equal(x->messages[1].parts[0].text, "Question: 2+2?\nTopic: math");
	assert_int_equal(x->n_targets, 1);
	assert_string_equal(x->targets[0], "4");
	assert_string_equal(x->target_json, "4");
	assert_string_equal(x->metadata_json, "{\"k\":1}");
	assert_null(x->checker_json);

	/* 7: numeric id, messages kept, image parts */
	x = &s->samples[1];
	assert_string_equal(x->id, "7");
	assert_int_equal(x->line, 2);
	assert_int_equal(x->n_messages, 2);
	ev_message *m = &x->messages[1];
	assert_int_equal(m->n_parts, 3);
	assert_int_equal(m->parts[0].kind, EV_PART_TEXT);
	assert_int_equal(m->parts[1].kind, EV_PART_IMAGE);
	char *cat = ev_asprintf("%s/img/cat.png", real);
	assert_string_equal(m->parts[1].path, cat);
	assert_string_equal(m->parts[1].mime, "image/png");
	assert_int_equal(m->parts[2].kind, EV_PART_IMAGE);
	assert_string_equal(m->parts[2].url, "data:image/jpeg;base64,AAAA");
	assert_string_equal(m->parts[2].mime, "image/jpeg");
	assert_int_equal(x->n_targets, 2);
	assert_string_equal(x->targets[1], "kitten");

	/* c: attachments on the user message, tools, tests, checker name */
	x = &s->samples[2];
	assert_int_equal(x->line, 4);
	m = &x->messages[x->n_messages - 1];
	assert_string_equal(m->role, "user");
	assert_string_equal(m->parts[0].text, "Question: see files\nTopic: files");
	assert_int_equal(m->n_parts, 4);
	assert_int_equal(m->parts[1].kind, EV_PART_IMAGE);
	assert_string_equal(m->parts[1].path, cat);
	assert_int_equal(m->parts[2].kind, EV_PART_DOCUMENT);
	assert_string_equal(m->parts[2].mime, "application/pdf");
	assert_int_equal(m->parts[3].kind, EV_PART_VIDEO);
	assert_string_equal(m->parts[3].mime, "video/mp4");
	assert_non_null(x->tools_json);
	assert_int_equal(x->tools_json[0], '[');
	assert_string_equal(x->tests_json, "\"assert f()==1\"");
	assert_string_equal(x->checker_json, "{\"type\":\"includes\"}");
	assert_int_equal(x->n_targets, 0);
	assert_string_equal(x->target_json, "{\"name\":\"f\"}");

	/* d: its own system message wins; tool calls and tool answers kept */
	x = &s->samples[3];
	assert_int_equal(x->line, 5);
	assert_int_equal(x->n_messages, 4);
	assert_string_equal(x->messages[0].parts[0].text, "own system");
	assert_non_null(x->messages[2].tool_calls_json);
	assert_int_equal(x->messages[2].n_parts, 0);
	assert_string_equal(x->messages[3].role, "tool");
	assert_string_equal(x->messages[3].tool_call_id, "c1");
	char *t = ev_message_text(&x->messages[3]);
	assert_string_equal(t, "42");
	free(t);

	free(cat);
	free(real);
	ev_suite_free(s);
	free(dir);
}

static void folder_without_suite_json_is_named_after_the_folder(void **state)
{
	(void)state;
	char *dir = make_folder("plainfolder", false);
	/* No template here, so sample "a" is sent as its input. */
	ev_suite *s = NULL;
	if (ev_suite_load(&s, dir, NULL))
		fail_msg("%s", ev_error_msg());
	const char *base = strrchr(dir, '/') + 1;
	assert_string_equal(s->name, base);
	assert_null(s->checker_json);
	assert_null(s->system_prompt);
	assert_int_equal(s->gen.epochs, 1);
	assert_int_equal(s->gen.max_tokens, 0);
	assert_false(s->gen.has_seed);
	assert_int_equal(s->samples[0].n_messages, 1);
	assert_string_equal(s->samples[0].messages[0].parts[0].text, "2+2?");
	char want[EV_SHA256_HEX];
	hash_of(want, "", SAMPLES);
	assert_string_equal(s->content_hash, want);
	ev_suite_free(s);
	free(dir);
}

static void bare_jsonl_loads_with_file_name_and_no_checker(void **state)
{
	(void)state;
	char *dir = tu_tmpdir("bare");
	const char *text = "{\"id\":\"q1\",\"input\":\"Capital of France?\",\"target\":\"Paris\"}\r\n"
	                   "\n"
	                   "{\"id\":2,\"input\":\"1+1\",\"target\":[2,\"two\"]}";
	char *path = tu_write(dir, "qa-mini.jsonl", text);
	ev_suite_options opt;
	memset(&opt, 0, sizeof opt); /* zeroed options mean the defaults */
	ev_suite *s = NULL;
	if (ev_suite_load(&s, path, &opt))
		fail_msg("%s", ev_error_msg());
	assert_string_equal(s->name, "qa-mini");
	assert_null(s->checker_json);
	assert_null(s->prompt_template);
	char *real = realpath(dir, NULL);
	assert_string_equal(s->root, real);
	assert_int_equal(s->n_samples, 2);
	assert_string_equal(s->samples[0].messages[0].parts[0].text, "Capital of France?");
	assert_string_equal(s->samples[0].targets[0], "Paris");
	assert_string_equal(s->samples[1].id, "2");
	assert_int_equal(s->samples[1].line, 3);
	assert_int_equal(s->samples[1].n_targets, 2);
	assert_string_equal(s->samples[1].targets[0], "2");
	assert_string_equal(s->samples[1].targets[1], "two");
	char want[EV_SHA256_HEX];
	ev_sha256_hex(want, text, strlen(text));
	assert_string_equal(s->content_hash, want);
	ev_suite_free(s);

	/* The hash follows the content. */
	free(tu_write(dir, "qa-mini.jsonl", "{\"id\":\"q1\",\"input\":\"Capital of Spain?\",\"target\":\"Madrid\"}\n"));
	assert_int_equal(ev_suite_load(&s, path, NULL), 0);
	assert_string_not_equal(s->content_hash, want);
	ev_suite_free(s);
	ev_suite_free(NULL);
	free(real);
	free(path);
	free(dir);
}

static void unknown_paths_and_types_are_refused(void **state)
{
	(void)state;
	char *dir = tu_tmpdir("kinds");
	ev_suite *s = (ev_suite *)1;
	char *missing = tu_path(dir, "nope");
	assert_int_equal(ev_suite_load(&s, missing, NULL), EV_E_NOTFOUND);
	assert_null(s);
	char *odd = tu_write(dir, "suite.txt", "hello");
	assert_int_equal(ev_suite_load(&s, odd, NULL), EV_E_UNSUPPORTED);
	assert_non_null(strstr(ev_error_msg(), "suite.txt"));
	/* A folder without samples.jsonl. */
	char *empty = tu_tmpdir("nosamples");
	assert_int_equal(ev_suite_load(&s, empty, NULL), EV_E_NOTFOUND);
	assert_non_null(strstr(ev_error_msg(), "samples.jsonl"));
	free(missing);
	free(odd);
	free(empty);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(folder_suite_loads_every_field),
		cmocka_unit_test(folder_without_suite_json_is_named_after_the_folder),
		cmocka_unit_test(bare_jsonl_loads_with_file_name_and_no_checker),
		cmocka_unit_test(unknown_paths_and_types_are_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
