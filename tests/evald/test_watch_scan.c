/* When is a checkpoint folder complete (evald/watch_scan.c)? All its files,
 * no marker of a writer still copying, and an endpoint.json that is valid;
 * hostile names and malformed files leave it "not ready" with a reason,
 * never a crash. The fingerprint changes when any file changes size. A
 * GGUF file is a checkpoint of its own. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "evald/watch.h"

static char *folder(const char *tag)
{
	return tu_tmpdir(tag);
}

static void expect_not_ready(const char *dir, const char *why_part)
{
	ev_watch_folder f;
	assert_int_equal(ev_watch_folder_check(&f, dir), 0);
	if (f.ready || !strstr(f.why, why_part))
		fail_msg("%s: ready %d, why '%s', expected '%s'", dir, f.ready, f.why, why_part);
	assert_int_equal(strlen(f.fingerprint), 64);
	ev_watch_folder_clear(&f);
}

static void expect_ready(const char *dir)
{
	ev_watch_folder f;
	assert_int_equal(ev_watch_folder_check(&f, dir), 0);
	if (!f.ready)
		fail_msg("%s: not ready: %s", dir, f.why);
	ev_watch_folder_clear(&f);
}

static void weights_folder_needs_config_and_every_indexed_shard(void **st)
{
	(void)st;
	char *d = folder("scan-shards");
	expect_not_ready(d, "config.json: missing");
	free(tu_write(d, "config.json", "{}"));
	expect_not_ready(d, "no model.safetensors");
	free(tu_write(d, "model.safetensors.index.json",
	              "{\"weight_map\":{\"a\":\"s1.safetensors\",\"b\":\"s1.safetensors\",\"c\":\"s2.safetensors\"}}"));
	free(tu_write(d, "s1.safetensors", "1"));
	expect_not_ready(d, "shard s2.safetensors");
	free(tu_write(d, "s2.safetensors", "2"));
	expect_ready(d);
	free(d);

	d = folder("scan-single");
	free(tu_write(d, "config.json", "{}"));
	free(tu_write(d, "model.safetensors", "w"));
	expect_ready(d);
	free(d);
}

static void markers_of_unfinished_copies_hold_a_folder_back(void **st)
{
	(void)st;
	const char *markers[] = {"model.safetensors.tmp", "x.partial", ".incomplete", "blob.incomplete", NULL};
	for (int i = 0; markers[i]; i++) {
		char *d = folder("scan-marker");
		free(tu_write(d, "config.json", "{}"));
		free(tu_write(d, "model.safetensors", "w"));
		free(tu_write(d, markers[i], ""));
		expect_not_ready(d, markers[i]);
		free(d);
	}
	/* A marker in a subfolder counts too. */
	char *d = folder("scan-marker-sub");
	free(tu_write(d, "config.json", "{}"));
	free(tu_write(d, "model.safetensors", "w"));
	char *sub = tu_path(d, "extra");
	mkdir(sub, 0755);
	free(tu_write(sub, "a.partial", ""));
	expect_not_ready(d, "extra/a.partial");
	free(sub);
	free(d);
}

static void hostile_index_and_endpoint_files_are_refused_with_a_reason(void **st)
{
	(void)st;
	static const struct {
		const char *file, *text, *why;
	} cases[] = {
		{"model.safetensors.index.json", "{\"weight_map\":{\"a\":\"../../etc/passwd\"}}", "expected a relative shard"},
		{"model.safetensors.index.json", "{\"weight_map\":{\"a\":\"/etc/passwd\"}}", "expected a relative shard"},
		{"model.safetensors.index.json", "{\"weight_map\":{\"a\":7}}", "expected a relative shard"},
		{"model.safetensors.index.json", "{\"weight_map\":{}}", "non-empty object"},
		{"model.safetensors.index.json", "{\"weight_map\":{\"a\":\"s", "model.safetensors.index.json"},
		{"endpoint.json", "{\"url\":\"file:///etc/passwd\"}", "http(s) URL"},
		{"endpoint.json", "{\"url\":\"http://x/v1\",\"model\":\"\"}", "model"},
		{"endpoint.json", "{\"url\":\"http://x/ v1\"}", "control or space"},
		{"endpoint.json", "[1,2]", "not a JSON object"},
		{"endpoint.json", "{\"url\":\"http://127.0.0.1:1/v1\"", "endpoint.json"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *d = folder("scan-hostile");
		free(tu_write(d, "config.json", "{}"));
		free(tu_write(d, cases[i].file, cases[i].text));
		expect_not_ready(d, cases[i].why);
		free(d);
	}
	char *d = folder("scan-endpoint");
	free(tu_write(d, "endpoint.json", "{\"url\":\"http://127.0.0.1:9/v1\",\"model\":\"m-1\"}"));
	ev_watch_folder f;
	assert_int_equal(ev_watch_folder_check(&f, d), 0);
	assert_true(f.ready);
	assert_string_equal(f.endpoint_url, "http://127.0.0.1:9/v1");
	assert_string_equal(f.endpoint_model, "m-1");
	ev_watch_folder_clear(&f);
	free(d);
}

static void fingerprint_follows_file_sizes(void **st)
{
	(void)st;
	char *d = folder("scan-fp");
	free(tu_write(d, "config.json", "{}"));
	free(tu_write(d, "model.safetensors", "w"));
	ev_watch_folder a, b, c;
	assert_int_equal(ev_watch_folder_check(&a, d), 0);
	assert_int_equal(ev_watch_folder_check(&b, d), 0);
	assert_string_equal(a.fingerprint, b.fingerprint);
	free(tu_write(d, "model.safetensors", "ww"));
	assert_int_equal(ev_watch_folder_check(&c, d), 0);
	assert_string_not_equal(a.fingerprint, c.fingerprint);
	ev_watch_folder_clear(&a);
	ev_watch_folder_clear(&b);
	ev_watch_folder_clear(&c);
	free(d);
}

/* A GGUF file in the watched folder is a checkpoint of its own: ready when
 * it starts with GGUF's magic and version 2 or 3, with a reason otherwise;
 * its fingerprint follows its size; another kind of file is not one. */
static void a_gguf_file_is_a_checkpoint_judged_by_its_first_bytes(void **st)
{
	(void)st;
	char *d = folder("scan-gguf"), *g = tu_path(d, "m.gguf");
	const struct {
		const char *bytes;
		size_t len;
		const char *why; /* NULL: ready */
	} cases[] = {
	        {"", 0, "0 bytes: not a GGUF file yet"},
	        {"GGUF\3\0", 6, "6 bytes: not a GGUF file yet"},
	        {"GGML\3\0\0\0", 8, "GGUF's magic"},
	        {"GGUF\1\0\0\0", 8, "GGUF version 1"},
	        {"GGUF\3\0\0\1", 8, "GGUF version 16777219"},
	        {"GGUF\3\0\0\0", 8, NULL},
	        {"GGUF\2\0\0\0 and more", 17, NULL},
	};
	char last[EV_SHA256_HEX] = "";
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		assert_int_equal(ev_file_write(g, cases[i].bytes, cases[i].len), 0);
		if (cases[i].why)
			expect_not_ready(g, cases[i].why);
		else
			expect_ready(g);
		ev_watch_folder f;
		assert_int_equal(ev_watch_folder_check(&f, g), 0);
		if (i && cases[i].len != cases[i - 1].len) /* another size, another fingerprint */
			assert_string_not_equal(f.fingerprint, last);
		memcpy(last, f.fingerprint, sizeof last);
		ev_watch_folder_clear(&f);
	}
	char *other = tu_write(d, "weights.bin", "GGUF\3");
	expect_not_ready(other, "a file, not a checkpoint folder");
	free(other), free(g), free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(weights_folder_needs_config_and_every_indexed_shard),
		cmocka_unit_test(markers_of_unfinished_copies_hold_a_folder_back),
		cmocka_unit_test(hostile_index_and_endpoint_files_are_refused_with_a_reason),
		cmocka_unit_test(fingerprint_follows_file_sizes),
		cmocka_unit_test(a_gguf_file_is_a_checkpoint_judged_by_its_first_bytes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
