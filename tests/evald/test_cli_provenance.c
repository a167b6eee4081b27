/* Provenance end to end with the bundled engine: three runs of a tiny
 * random checkpoint on the same suite, chat templates chatml, llama3,
 * chatml. Each result stores the hash of the prompt the model got; the
 * first and third runs' are equal, the second's differ. `evald compare`
 * says the second run's settings differ (chat_template) and that every
 * paired sample's rendered prompt changed; between the first and the
 * third nothing differs (the runs' drawn seeds are not counted). */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static char *evald_ok(const char *const *argv)
{
	char *out = NULL, *err = NULL;
	int rc = tu_run(&out, &err, NULL, argv);
	if (rc)
		fail_msg("%s %s: %d\n%s", argv[3], argv[4], rc, err ? err : "");
	free(err);
	return out;
}

static void chat_template_change_is_labelled(void **state)
{
	(void)state;
	char *dir = tu_tmpdir("prov"), *db = tu_path(dir, "evald.db"), *ckpt = tu_path(dir, "tiny");
	char *suite = tu_write(dir, "s.jsonl",
	                       "{\"id\":\"a\",\"input\":\"hello there\",\"target\":\"x\"}\n"
	                       "{\"id\":\"b\",\"input\":\"what now\",\"target\":\"y\"}\n"
	                       "{\"id\":\"c\",\"input\":\"fine\",\"target\":\"z\"}\n");
	const char *mk[] = {tu_evald(), "-q", "engine", "mkmodel", "--arch", "llama", "--out", ckpt, NULL};
	free(evald_ok(mk));
	const char *tpl[3] = {"chatml", "llama3", "chatml"};
	for (int k = 0; k < 3; k++) {
		const char *run[] = {tu_evald(), "-q", "--db", db, "run", "--model", ckpt, "--suite", suite,
		                     "--chat-template", tpl[k], "--max-tokens", "4", "--no-cache", NULL};
		free(evald_ok(run));
	}
	char *o = NULL, *e = NULL;
	assert_int_equal(tu_sh(&o, &e, "sqlite3 %s \"SELECT count(DISTINCT prompt_hash) FROM results WHERE prompt_hash "
	                                "IS NOT NULL\"",
	                       db),
	                 0);
	assert_int_equal(atoi(o), 6); /* 3 samples x 2 renderings */
	free(o), free(e);
	const char *c12[] = {tu_evald(), "-q", "--db", db, "compare", "1", "2", "--json", NULL};
	const char *c13[] = {tu_evald(), "-q", "--db", db, "compare", "1", "3", "--json", NULL};
	char *out = evald_ok(c12);
	cJSON *j = cJSON_Parse(out);
	const cJSON *cd = cJSON_GetObjectItem(j, "config_differs");
	assert_int_equal(cJSON_GetArraySize(cd), 1);
	assert_string_equal(ev_json_str(cJSON_GetArrayItem(cd, 0), "key", ""), "chat_template");
	const cJSON *pv = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "suites"), 0), "provenance");
	assert_true(ev_json_num(pv, "samples_changed", 0) == 3);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItem(pv, "settings_changed")));
	cJSON_Delete(j), free(out);
	out = evald_ok(c13);
	j = cJSON_Parse(out);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "config_differs")), 0);
	pv = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "suites"), 0), "provenance");
	assert_true(ev_json_num(pv, "samples_changed", -1) == 0);
	assert_false(cJSON_IsTrue(cJSON_GetObjectItem(pv, "settings_changed")));
	cJSON_Delete(j), free(out);
	free(dir), free(db), free(ckpt), free(suite);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(chat_template_change_is_labelled),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
