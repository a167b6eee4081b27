/* Long-context reports: results carrying length and depth in their sample
 * metadata are shown as a length x depth grid per task (errors left out). */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "feedback/feedback.h"
#include "reports/reports.h"

static void put(ev_tracker *t, int64_t run, const char *id, double score, const char *reason, const char *meta)
{
	ev_result r = {.suite = "longctx", .sample_id = id, .epoch = 0,
	               .request_hash = "0000000000000000000000000000000000000000000000000000000000000000",
	               .response = "x", .score = score, .reason = reason, .finish_reason = "stop",
	               .attempts = 1, .metadata_json = meta};
	assert_int_equal(ev_tracker_result_put(t, run, &r), 0);
}

static char *report(ev_tracker *t, int64_t run, ev_report_format f)
{
	char *text = NULL;
	size_t n = 0;
	FILE *m = open_memstream(&text, &n);
	ev_report_options o = EV_REPORT_OPTIONS_INIT;
	o.format = f;
	assert_int_equal(ev_report_write(t, run, &o, m), 0);
	fclose(m);
	return text;
}

static void report_shows_length_by_depth_grid_per_task(void **st)
{
	(void)st;
	char *dir = tu_tmpdir("grid");
	char *db = tu_path(dir, "t.db");
	ev_tracker *t;
	assert_int_equal(ev_tracker_open(&t, db), 0);
	ev_run_info info = {"m", "x", "[{\"name\":\"longctx\"}]", "{}", 1, 6, 0, NULL};
	int64_t run;
	assert_int_equal(ev_tracker_run_create(t, &info, &run), 0);
	put(t, run, "a", 1, "", "{\"task\":\"niah\",\"length\":4096,\"depth\":0}");
	put(t, run, "b", 0, "wrong_answer", "{\"task\":\"niah\",\"length\":4096,\"depth\":0}");
	put(t, run, "c", 1, "", "{\"task\":\"niah\",\"length\":32768,\"depth\":50}");
	put(t, run, "d", 0, "backend_error", "{\"task\":\"niah\",\"length\":32768,\"depth\":50}");
	put(t, run, "e", 1, "", "{\"task\":\"vt\",\"length\":1048576,\"depth\":100}");
	put(t, run, "f", 1, "", "{\"note\":\"no grid keys\"}");

	char *json = report(t, run, EV_REPORT_JSON);
	cJSON *j = cJSON_Parse(json);
	assert_non_null(j);
	cJSON *grid = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "suites"), 0), "grid");
	assert_int_equal(cJSON_GetArraySize(grid), 3);
	int seen = 0;
	const cJSON *c;
	cJSON_ArrayForEach(c, grid)
	{
		double len = ev_json_num(c, "length", 0), dep = ev_json_num(c, "depth", -1);
		if (len == 4096 && dep == 0) {
			assert_true(ev_json_num(c, "score", -1) == 0.5);
			assert_int_equal((int)ev_json_num(c, "n", 0), 2);
			seen++;
		} else if (len == 32768 && dep == 50) {
			/* the backend error is not a score */
			assert_true(ev_json_num(c, "score", -1) == 1.0);
			assert_int_equal((int)ev_json_num(c, "n", 0), 1);
			seen++;
		} else if (len == 1048576) {
			assert_string_equal(ev_json_str(c, "task", ""), "vt");
			seen++;
		}
	}
	assert_int_equal(seen, 3);
	cJSON_Delete(j);

	char *md = report(t, run, EV_REPORT_MD);
	assert_non_null(strstr(md, "## Length x depth"));
	assert_non_null(strstr(md, "### longctx: niah"));
	assert_non_null(strstr(md, "| 4K | 0.50 | - |"));
	assert_non_null(strstr(md, "| 32K | - | 1.00 |"));
	assert_non_null(strstr(md, "| 1M | 1.00 |"));
	free(md);
	free(json);
	ev_tracker_close(t);
	free(db);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(report_shows_length_by_depth_grid_per_task),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
