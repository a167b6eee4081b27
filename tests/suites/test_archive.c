/* Suite archives: tar, tar.gz, tar.zst and zip load (at the top or in one
 * folder) and clean up after themselves; hostile entries (.., absolute
 * paths, links, devices, fifos, too many entries, decompression bombs) are
 * refused with the right status, a message naming the entry, and nothing
 * left behind. The archives are written here with libarchive. */
#include "testutil.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "suites/suites.h"

enum { FMT_TAR, FMT_ZIP };
enum { FLT_NONE, FLT_GZIP, FLT_ZSTD };

typedef struct {
	const char *name;
	const char *data;  /* a regular file's bytes */
	mode_t type;       /* 0: regular file */
	const char *link;  /* symlink or hard link target */
	size_t zeros;      /* a regular file of this many zero bytes instead */
	bool unsized;      /* leave the size unset (zip streams it) */
} tentry;

static const char *SUITE_JSON = "{\"name\":\"packed\",\"version\":\"1.0\",\"checker\":{\"type\":\"includes\"}}\n";
static const char *SAMPLES = "{\"id\":\"a\",\"input\":\"Capital of France?\",\"target\":\"Paris\"}\n"
                             "{\"id\":\"b\",\"input\":\"What is this?\",\"attachments\":[\"img/cat.png\"],\"target\":\"cat\"}\n";

static int write_entries(struct archive *a, const tentry *t, size_t n)
{
	static char zero[1 << 20];
	for (size_t i = 0; i < n; i++) {
		struct archive_entry *e = archive_entry_new();
		archive_entry_set_pathname(e, t[i].name);
		archive_entry_set_perm(e, 0644);
		mode_t type = t[i].type ? t[i].type : AE_IFREG;
		if (type == AE_IFREG && t[i].link) {
			archive_entry_set_filetype(e, AE_IFREG);
			archive_entry_set_hardlink(e, t[i].link);
			archive_entry_set_size(e, 0);
		} else {
			archive_entry_set_filetype(e, type);
			if (type == AE_IFLNK)
				archive_entry_set_symlink(e, t[i].link);
			if (type == AE_IFCHR)
				archive_entry_set_rdev(e, makedev(1, 3));
			if (type == AE_IFDIR)
				archive_entry_set_perm(e, 0755);
			size_t size = type != AE_IFREG ? 0 : t[i].zeros ? t[i].zeros : t[i].data ? strlen(t[i].data) : 0;
			if (type == AE_IFREG && !t[i].unsized)
				archive_entry_set_size(e, (la_int64_t)size);
		}
		if (archive_write_header(a, e) != ARCHIVE_OK) {
			print_error("write_header %s: %s\n", t[i].name, archive_error_string(a));
			archive_entry_free(e);
			return -1;
		}
		if (type == AE_IFREG && !t[i].link) {
			if (t[i].zeros)
				for (size_t left = t[i].zeros; left;) {
					size_t k = left < sizeof zero ? left : sizeof zero;
					if (archive_write_data(a, zero, k) != (la_ssize_t)k)
						return -1;
					left -= k;
				}
			else if (t[i].data)
				archive_write_data(a, t[i].data, strlen(t[i].data));
		}
		archive_entry_free(e);
	}
	return 0;
}

static struct archive *writer(int fmt, int filter)
{
	struct archive *a = archive_write_new();
	if (fmt == FMT_ZIP)
		archive_write_set_format_zip(a);
	else
		archive_write_set_format_pax_restricted(a);
	if (filter == FLT_GZIP)
		assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
	else if (filter == FLT_ZSTD)
		assert_int_equal(archive_write_add_filter_zstd(a), ARCHIVE_OK);
	return a;
}

/* Writes dir/file as an archive of the entries; returns the path. */
static char *make_archive(const char *dir, const char *file, int fmt, int filter, const tentry *t, size_t n)
{
	char *path = tu_path(dir, file);
	struct archive *a = writer(fmt, filter);
	assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
	assert_int_equal(write_entries(a, t, n), 0);
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	return path;
}

/* The same, built in memory first (for the bombs); returns the bytes. */
static char *make_archive_mem(size_t *len, int fmt, int filter, const tentry *t, size_t n)
{
	size_t cap = 8 << 20;
	char *buf = malloc(cap);
	assert_non_null(buf);
	struct archive *a = writer(fmt, filter);
	assert_int_equal(archive_write_open_memory(a, buf, cap, len), ARCHIVE_OK);
	assert_int_equal(write_entries(a, t, n), 0);
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	return buf;
}

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static void check_loaded(ev_suite *s, const char *tmp)
{
	assert_int_equal(s->n_samples, 2);
	assert_non_null(s->extracted_dir);
	assert_non_null(strstr(s->extracted_dir, "evald-suite-"));
	assert_true(ev_str_starts(s->root, tmp));
	struct stat st;
	assert_int_equal(stat(s->extracted_dir, &st), 0);
	const ev_part *img = &s->samples[1].messages[0].parts[1];
	assert_int_equal(img->kind, EV_PART_IMAGE);
	assert_true(ev_str_starts(img->path, s->root));
	assert_int_equal(stat(img->path, &st), 0);
}

static void every_archive_format_loads_and_cleans_up(void **state)
{
	(void)state;
	char *dir = tu_tmpdir("arc-ok");
	char *tmp = tu_tmpdir("arc-ok-extract");
	char *real_tmp = realpath(tmp, NULL);
	const tentry top[] = {
		{"suite.json", SUITE_JSON, 0, NULL, 0, false},
		{"samples.jsonl", SAMPLES, 0, NULL, 0, false},
		{"img/", NULL, AE_IFDIR, NULL, 0, false},
		{"img/cat.png", "fake png", 0, NULL, 0, false},
	};
	const tentry nested[] = {
		{"bundle/", NULL, AE_IFDIR, NULL, 0, false},
		{"bundle/suite.json", SUITE_JSON, 0, NULL, 0, false},
		{"bundle/samples.jsonl", SAMPLES, 0, NULL, 0, false},
		{"./bundle/img/cat.png", "fake png", 0, NULL, 0, false}, /* parent made on the way */
	};
	const struct {
		const char *file;
		int fmt, filter;
		const tentry *t;
	} cases[] = {
		{"s.tar", FMT_TAR, FLT_NONE, top},
		{"s.tar.gz", FMT_TAR, FLT_GZIP, nested},
		{"s.tgz", FMT_TAR, FLT_GZIP, top},
		{"s.tar.zst", FMT_TAR, FLT_ZSTD, nested},
		{"s.zip", FMT_ZIP, FLT_NONE, nested},
	};
	char want[EV_SHA256_HEX];
	char *both = ev_asprintf("%s%s", SUITE_JSON, SAMPLES);
	ev_sha256_hex(want, both, strlen(both));
	free(both);
	ev_suite_options opt = EV_SUITE_OPTIONS_INIT;
	opt.tmp_dir = tmp;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *path = make_archive(dir, cases[i].file, cases[i].fmt, cases[i].filter, cases[i].t, 4);
		ev_suite *s = NULL;
		if (ev_suite_load(&s, path, &opt))
			fail_msg("%s: %s", cases[i].file, ev_error_msg());
		assert_string_equal(s->name, "packed");
		assert_string_equal(s->content_hash, want); /* the same bytes wherever they come from */
		check_loaded(s, real_tmp);
		assert_true(ev_str_starts(s->extracted_dir, tmp));
		assert_int_equal(count_entries(tmp), 1);
		ev_suite_free(s);
		assert_int_equal(count_entries(tmp), 0);
		free(path);
	}

	/* Without suite.json the archive's name (less its extension) names it. */
	const tentry bare[] = {{"samples.jsonl", "{\"id\":1,\"input\":\"x\"}\n", 0, NULL, 0, false}};
	char *path = make_archive(dir, "my-evals.tar.gz", FMT_TAR, FLT_GZIP, bare, 1);
	ev_suite *s = NULL;
	assert_int_equal(ev_suite_load(&s, path, &opt), 0);
	assert_string_equal(s->name, "my-evals");
	assert_null(s->checker_json);
	ev_suite_free(s);
	free(path);

	/* Two top folders: where the suite is, is not clear. */
	const tentry two[] = {{"a/samples.jsonl", SAMPLES, 0, NULL, 0, false},
	                      {"b/samples.jsonl", SAMPLES, 0, NULL, 0, false}};
	path = make_archive(dir, "two.tar", FMT_TAR, FLT_NONE, two, 2);
	assert_int_equal(ev_suite_load(&s, path, &opt), EV_E_NOTFOUND);
	assert_non_null(strstr(ev_error_msg(), "single top folder"));
	assert_int_equal(count_entries(tmp), 0);
	free(path);

	/* Not an archive at all, though named like one. */
	path = tu_write(dir, "junk.tar.gz", "this is not gzip data at all, just text");
	assert_int_equal(ev_suite_load(&s, path, &opt), EV_E_PARSE);
	assert_non_null(strstr(ev_error_msg(), "junk.tar.gz"));
	assert_int_equal(count_entries(tmp), 0);
	free(path);

	free(real_tmp);
	free(tmp);
	free(dir);
}

/* Extracts into a fresh folder, expects `code` and the entry named in the
 * message, and checks the partial extraction was removed. */
static void expect_refused(const char *dir, const char *file, int fmt, int filter, const tentry *t, size_t n,
                           const ev_suite_options *opt, int code, const char *needle, const char *needle2)
{
	char *path = make_archive(dir, file, fmt, filter, t, n);
	char *dest = ev_asprintf("%s.out", path);
	int rc = ev_archive_extract(path, dest, opt);
	if (rc != code)
		fail_msg("%s: expected %s, got %s: %s", file, ev_status_name(code), ev_status_name(rc), ev_error_msg());
	if (!strstr(ev_error_msg(), needle) || (needle2 && !strstr(ev_error_msg(), needle2)))
		fail_msg("%s: message '%s' lacks '%s'", file, ev_error_msg(), needle);
	struct stat st;
	assert_int_not_equal(lstat(dest, &st), 0); /* nothing left behind */
	free(dest);
	free(path);
}

#define OK_ENTRY {"samples.jsonl", "{\"id\":1,\"input\":\"x\"}\n", 0, NULL, 0, false}

static void hostile_entries_are_refused_naming_the_entry(void **state)
{
	(void)state;
	char *dir = tu_tmpdir("arc-bad");
	const tentry dotdot[] = {OK_ENTRY, {"../evil", "x", 0, NULL, 0, false}};
	expect_refused(dir, "dotdot.tar", FMT_TAR, FLT_NONE, dotdot, 2, NULL, EV_E_UNSAFE, "'../evil'", "..");
	const tentry dotdot2[] = {OK_ENTRY, {"a/b/../../../evil", "x", 0, NULL, 0, false}};
	expect_refused(dir, "dotdot2.tar.gz", FMT_TAR, FLT_GZIP, dotdot2, 2, NULL, EV_E_UNSAFE, "a/b/../../../evil", NULL);
	expect_refused(dir, "dotdot.zip", FMT_ZIP, FLT_NONE, dotdot, 2, NULL, EV_E_UNSAFE, "'../evil'", NULL);
	const tentry abs[] = {OK_ENTRY, {"/abs/path", "x", 0, NULL, 0, false}};
	expect_refused(dir, "abs.tar", FMT_TAR, FLT_NONE, abs, 2, NULL, EV_E_UNSAFE, "'/abs/path'", "absolute");
	const tentry sym_abs[] = {OK_ENTRY, {"passwd", NULL, AE_IFLNK, "/etc/passwd", 0, false}};
	expect_refused(dir, "symabs.tar", FMT_TAR, FLT_NONE, sym_abs, 2, NULL, EV_E_UNSAFE, "'passwd'", "/etc/passwd");
	const tentry sym_up[] = {OK_ENTRY, {"img/x", NULL, AE_IFLNK, "../../x", 0, false}};
	expect_refused(dir, "symup.tar.zst", FMT_TAR, FLT_ZSTD, sym_up, 2, NULL, EV_E_UNSAFE, "'img/x'", "../../x");
	expect_refused(dir, "symup.zip", FMT_ZIP, FLT_NONE, sym_up, 2, NULL, EV_E_UNSAFE, "'img/x'", "symlink");
	const tentry hard[] = {OK_ENTRY, {"h", NULL, 0, "/etc/passwd", 0, false}};
	expect_refused(dir, "hard.tar", FMT_TAR, FLT_NONE, hard, 2, NULL, EV_E_UNSAFE, "'h'", "hard link");
	const tentry fifo[] = {OK_ENTRY, {"pipe", NULL, AE_IFIFO, NULL, 0, false}};
	expect_refused(dir, "fifo.tar", FMT_TAR, FLT_NONE, fifo, 2, NULL, EV_E_UNSAFE, "'pipe'", "fifo");
	const tentry dev[] = {OK_ENTRY, {"null", NULL, AE_IFCHR, NULL, 0, false}};
	expect_refused(dir, "dev.tar", FMT_TAR, FLT_NONE, dev, 2, NULL, EV_E_UNSAFE, "'null'", "device");

	ev_suite_options opt = EV_SUITE_OPTIONS_INIT;
	opt.max_entries = 3;
	const tentry many[] = {OK_ENTRY,
	                       {"1", "x", 0, NULL, 0, false},
	                       {"2", "x", 0, NULL, 0, false},
	                       {"3", "x", 0, NULL, 0, false},
	                       {"4", "x", 0, NULL, 0, false}};
	expect_refused(dir, "many.tar", FMT_TAR, FLT_NONE, many, 5, &opt, EV_E_LIMIT, "more than 3 entries", NULL);

	/* A hostile archive through ev_suite_load leaves no extraction behind. */
	char *tmp = tu_tmpdir("arc-bad-extract");
	opt = (ev_suite_options)EV_SUITE_OPTIONS_INIT;
	opt.tmp_dir = tmp;
	char *path = make_archive(dir, "load-evil.tar.gz", FMT_TAR, FLT_GZIP, sym_abs, 2);
	ev_suite *s = (ev_suite *)1;
	assert_int_equal(ev_suite_load(&s, path, &opt), EV_E_UNSAFE);
	assert_null(s);
	assert_non_null(strstr(ev_error_msg(), "load-evil.tar.gz"));
	assert_int_equal(count_entries(tmp), 0);
	free(path);
	free(tmp);
	free(dir);
}

static void decompression_bomb_stops_at_the_cap(void **state)
{
	(void)state;
	char *dir = tu_tmpdir("arc-bomb");
	char *tmp = tu_tmpdir("arc-bomb-extract");
	const tentry bomb[] = {OK_ENTRY, {"zeros.bin", NULL, 0, NULL, (size_t)200 << 20, false}};
	size_t len = 0;
	char *bytes = make_archive_mem(&len, FMT_TAR, FLT_GZIP, bomb, 2);
	assert_true(len < (2 << 20)); /* 200 MB of zeros squeeze into well under 2 MB */
	char *path = tu_path(dir, "bomb.tar.gz");
	assert_int_equal(ev_file_write(path, bytes, len), 0);
	free(bytes);

	ev_suite_options opt = EV_SUITE_OPTIONS_INIT;
	opt.max_archive_bytes = (size_t)10 << 20;
	opt.tmp_dir = tmp;
	ev_suite *s = NULL;
	double t0 = ev_now();
	assert_int_equal(ev_suite_load(&s, path, &opt), EV_E_LIMIT);
	assert_true(ev_now() - t0 < 10.0);
	assert_null(s);
	if (!strstr(ev_error_msg(), "'zeros.bin'") || !strstr(ev_error_msg(), "limit of 10485760 bytes"))
		fail_msg("message: %s", ev_error_msg());
	assert_int_equal(count_entries(tmp), 0);
	free(path);
	free(tmp);
	free(dir);
}

/* A zip read from a pipe cannot seek to its central directory, so a
 * streamed entry's size is unknown until its data ends: only the check
 * made while the bytes arrive can stop it. */
static void bomb_without_declared_size_stops_while_streaming(void **state)
{
	(void)state;
	char *dir = tu_tmpdir("arc-stream");
	const tentry bomb[] = {OK_ENTRY, {"zeros.bin", NULL, 0, NULL, (size_t)64 << 20, true}};
	size_t len = 0;
	char *bytes = make_archive_mem(&len, FMT_ZIP, FLT_NONE, bomb, 2);
	char *fifo = tu_path(dir, "bomb.zip");
	assert_int_equal(mkfifo(fifo, 0600), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		FILE *f = fopen(fifo, "wb");
		if (f)
			fwrite(bytes, 1, len, f);
		_exit(0);
	}
	char *dest = tu_path(dir, "out");
	ev_suite_options opt = EV_SUITE_OPTIONS_INIT;
	opt.max_archive_bytes = (size_t)10 << 20;
	int rc = ev_archive_extract(fifo, dest, &opt);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	if (rc != EV_E_LIMIT)
		fail_msg("expected limit, got %s: %s", ev_status_name(rc), ev_error_msg());
	assert_non_null(strstr(ev_error_msg(), "'zeros.bin'"));
	assert_null(strstr(ev_error_msg(), "declared")); /* the streaming check, not the header check */
	struct stat st;
	assert_int_not_equal(lstat(dest, &st), 0);
	free(bytes);
	free(dest);
	free(fifo);
	free(dir);
}

static void extraction_needs_an_empty_folder(void **state)
{
	(void)state;
	char *dir = tu_tmpdir("arc-dest");
	const tentry ok[] = {OK_ENTRY};
	char *path = make_archive(dir, "ok.tar", FMT_TAR, FLT_NONE, ok, 1);
	char *dest = tu_tmpdir("arc-dest-full");
	free(tu_write(dest, "mine.txt", "keep me"));
	assert_int_equal(ev_archive_extract(path, dest, NULL), EV_E_INVALID);
	char *mine = tu_path(dest, "mine.txt");
	struct stat st;
	assert_int_equal(stat(mine, &st), 0);
	char *empty = tu_tmpdir("arc-dest-empty");
	assert_int_equal(ev_archive_extract(path, empty, NULL), 0);
	char *got = tu_path(empty, "samples.jsonl");
	assert_int_equal(stat(got, &st), 0);
	assert_int_equal(st.st_mode & 07111, 0); /* no exec, setuid or sticky bits */
	free(got);
	free(empty);
	free(mine);
	free(dest);
	free(path);
	free(dir);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_archive_format_loads_and_cleans_up),
		cmocka_unit_test(hostile_entries_are_refused_naming_the_entry),
		cmocka_unit_test(decompression_bomb_stops_at_the_cap),
		cmocka_unit_test(bomb_without_declared_size_stops_while_streaming),
		cmocka_unit_test(extraction_needs_an_empty_folder),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
