/*
 * Real chat templates (tests/engine/chat_templates/templates: the Jinja
 * files of Qwen2.5, Qwen3, Llama-3.1/3.2, SmolLM3, MiniMax-M3, Mistral Nemo,
 * Phi-3.5, Gemma 2, DeepSeek-R1, Hermes 3, Granite 3.3, gpt-oss, as the
 * checkpoints ship them) over 16 conversations (system turns, multi-turn,
 * whitespace, Unicode, tools, tool round trips, arguments as JSON strings,
 * parallel calls, typed arguments, JSON tool results, thinking switches)
 * render byte for byte as Jinja2 renders them under transformers'
 * settings (expected/, made by reference.py); where Jinja2 refuses a
 * conversation (the template raises, or the data does not fit it), evald
 * refuses it too. Each template goes through eng_chat_template_load from a
 * tokenizer_config.json holding it and its special tokens.
 */
#include "tests/common/testutil.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/jinja.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cJSON *load_json(const char *dir, const char *name)
{
	char *p = tu_path(dir, name), *text = NULL;
	size_t len = 0;
	if (ev_file_read(&text, &len, p, 64 << 20))
		fail_msg("%s: %s", p, ev_error_msg());
	cJSON *j = NULL;
	if (ev_json_parse(&j, text, len, p))
		fail_msg("%s", ev_error_msg());
	free(text);
	free(p);
	return j;
}

static void real_templates_render_as_jinja2_does(void **state)
{
	(void)state;
	char *dir = ev_asprintf("%s/tests/engine/chat_templates", getenv("EV_SOURCE_DIR") ? getenv("EV_SOURCE_DIR") : ".");
	char *tmp = tu_tmpdir("chat-templates");
	/* strftime_now at the instant the expected outputs were rendered at
	 * (reference.py's NOW), so templates printing today's date match any day */
	setenv("EVALD_TEMPLATE_NOW", "1796299200", 1);
	cJSON *templates = load_json(dir, "templates.json"), *convs = load_json(dir, "conversations.json");
	cJSON *weather = load_json(dir, "tools_weather.json");
	int total = 0, same = 0, refused_both = 0;
	ev_buf report = EV_BUF_INIT(1 << 20);
	for (const cJSON *t = templates->child; t; t = t->next) {
		char *rel = ev_asprintf("templates/%s.jinja", t->string), *tpath = tu_path(dir, rel), *src = NULL;
		size_t slen = 0;
		assert_int_equal(ev_file_read(&src, &slen, tpath, 1 << 20), 0);
		/* a checkpoint folder with the template and its special tokens */
		cJSON *cfg = cJSON_Duplicate(t, true);
		cJSON_AddStringToObject(cfg, "chat_template", src);
		char *cdir = tu_path(tmp, t->string);
		assert_int_equal(tu_sh(NULL, NULL, "mkdir -p '%s'", cdir), 0);
		char *cfgtext = ev_json_print(cfg);
		free(tu_write(cdir, "tokenizer_config.json", cfgtext));
		eng_chat_template *ct = NULL;
		if (eng_chat_template_load(&ct, cdir, NULL))
			fail_msg("%s: %s", t->string, ev_error_msg());
		char *ename = ev_asprintf("expected/%s.json", t->string);
		cJSON *expected = load_json(dir, ename);
		int t_total = 0, t_same = 0;
		for (const cJSON *c = convs->child; c; c = c->next) {
			const char *name = ev_json_str(c, "name", "?");
			const cJSON *want = cJSON_GetObjectItemCaseSensitive(expected, name);
			cJSON *extra = cJSON_CreateObject();
			cJSON_AddStringToObject(extra, "date_string", "26 Jul 2024");
			for (const cJSON *v = cJSON_GetObjectItem(c, "vars") ? cJSON_GetObjectItem(c, "vars")->child : NULL; v;
			     v = v->next)
				cJSON_AddItemToObject(extra, v->string, cJSON_Duplicate(v, true));
			const cJSON *tools = cJSON_GetObjectItem(c, "tools") ? weather : NULL;
			bool agp = ev_json_bool(c, "add_generation_prompt", true);
			char *got = NULL;
			size_t glen = 0;
			int rc = eng_chat_template_render(ct, cJSON_GetObjectItem(c, "messages"), tools, agp, extra, &got, &glen);
			const char *wp = ev_json_str(want, "prompt", NULL);
			t_total++;
			if (wp && !rc && glen == strlen(wp) && !memcmp(got, wp, glen)) {
				t_same++;
			} else if (!wp && rc) {
				t_same++;
				refused_both++;
			} else {
				ev_buf_printf(&report, "%s / %s: %s\n", t->string, name,
				              rc ? ev_error_msg() : wp ? "differs" : "jinja2 refused it, evald rendered it");
				if (wp && !rc && getenv("EV_SHOW_DIFF")) { /* a folder to write both into */
					char *w = ev_asprintf("%s/%s__%s.want", getenv("EV_SHOW_DIFF"), t->string, name);
					char *g = ev_asprintf("%s/%s__%s.got", getenv("EV_SHOW_DIFF"), t->string, name);
					ev_file_write(w, wp, strlen(wp));
					ev_file_write(g, got, glen);
					free(w), free(g);
				}
			}
			free(got);
			cJSON_Delete(extra);
		}
		ev_buf_printf(&report, "%-48s %2d/%d byte-identical (or refused by both)\n", t->string, t_same, t_total);
		total += t_total;
		same += t_same;
		cJSON_Delete(expected);
		eng_chat_template_free(ct);
		free(ename), free(cfgtext), free(cdir), free(src), free(tpath), free(rel);
		cJSON_Delete(cfg);
	}
	for (char *line = report.data, *nl; line && *line; line = nl + 1) { /* print_message cuts long text */
		nl = strchr(line, '\n');
		print_message("%.*s\n", (int)(nl - line), line);
	}
	print_message("chat templates: %d/%d template x conversation pairs byte-identical to jinja2 (%d refused by both)\n",
	              same, total, refused_both);
	ev_buf_free(&report);
	assert_int_equal(same, total);
	cJSON_Delete(templates), cJSON_Delete(convs), cJSON_Delete(weather);
	free(dir), free(tmp);
}

/* Constructs outside the subset and template errors name the line. */
static void unsupported_constructs_are_named(void **state)
{
	(void)state;
	static const struct {
		const char *src, *needle;
	} cases[] = {
		{"{% include 'x' %}", "line 1: the statement 'include'"},
		{"a\n{{ x | frobnicate }}", "line 2: the filter 'frobnicate'"},
		{"{% if x %}never closed", "never closed"},
		{"{{ raise_exception('no system role') }}", "no system role"},
		{"{% for x in 5 %}{% endfor %}", "not iterable"},
		{"{{ 'abc'.nosuch() }}", "'nosuch' is undefined"},
		{"{% endif %}", "without its opening"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		eng_jinja *j = NULL;
		char *out = NULL;
		int rc = eng_jinja_compile(&j, cases[i].src, strlen(cases[i].src), "t.jinja");
		if (!rc) {
			cJSON *vars = cJSON_CreateObject();
			rc = eng_jinja_render(j, vars, &out, NULL);
			cJSON_Delete(vars);
		}
		if (!rc)
			fail_msg("\"%s\" rendered (\"%s\")", cases[i].src, out);
		if (!strstr(ev_error_msg(), cases[i].needle))
			fail_msg("\"%s\": message \"%s\" does not say \"%s\"", cases[i].src, ev_error_msg(), cases[i].needle);
		eng_jinja_free(j);
		free(out);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(real_templates_render_as_jinja2_does),
		cmocka_unit_test(unsupported_constructs_are_named),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
