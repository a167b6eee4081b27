/* Every sandboxed process dies with evald: kill -9 or SIGTERM on `evald
 * score` while a program runs leaves nothing running behind it (the
 * parent-death signal must survive the sandbox's change of user), nor the
 * folder its imported problems were read from. */
#include "tests/common/testutil.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The pid of a process whose command line holds `mark`, or 0. */
static pid_t find(const char *mark)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t found = 0;
	while (d && !found && (e = readdir(d))) {
		char path[64], buf[4096];
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
		FILE *f = fopen(path, "r");
		size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
		if (f)
			fclose(f);
		for (size_t i = 0; i < n; i++)
			if (!buf[i])
				buf[i] = ' ';
		buf[n] = 0;
		if (strstr(buf, mark) && !strstr(buf, "evald"))
			found = (pid_t)atoi(e->d_name);
	}
	if (d)
		closedir(d);
	return found;
}

static void dies_with_evald(int sig)
{
	char *dir = tu_tmpdir(sig == SIGKILL ? "orphans-kill" : "orphans-term");
	char mark[64];
	snprintf(mark, sizeof mark, "sandbox-orphan-%d-%d", (int)getpid(), sig);
	char *problems = tu_write(dir, "p.jsonl",
	                          "{\"task_id\":\"T/0\",\"prompt\":\"def f(a):\\n\",\"entry_point\":\"f\","
	                          "\"canonical_solution\":\"    return a\\n\",\"test\":\"def check(c):\\n    assert c(1) == 1\\n\"}\n");
	char *line = ev_asprintf("{\"task_id\":\"T/0\",\"completion\":\"    import os; os.execv('/bin/sh', "
	                         "['sh', '-c', 'sleep 300; echo %s'])\\n\"}\n", mark);
	char *samples = tu_write(dir, "s.jsonl", line);
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1), dup2(null, 2);
		setenv("TMPDIR", dir, 1); /* its temporary folders, looked for below */
		execl(tu_evald(), "evald", "-q", "score", "--problems", problems, "--samples", samples, "--timeout", "600",
		      (char *)NULL);
		_exit(127);
	}
	pid_t child = 0;
	for (int i = 0; i < 400 && !(child = find(mark)); i++)
		usleep(50000);
	if (!child) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		fail_msg("the sandboxed program (%s) never showed up", mark);
	}
	kill(pid, sig);
	waitpid(pid, NULL, 0);
	pid_t left = child;
	for (int i = 0; i < 100 && (left = find(mark)); i++)
		usleep(50000);
	if (left) {
		kill(left, SIGKILL);
		fail_msg("after %s to evald, sandboxed pid %d (%s) was still running 5 s later",
		         sig == SIGKILL ? "SIGKILL" : "SIGTERM", (int)left, mark);
	}
	/* the imported problems' folder was removed as soon as they were read */
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (!strncmp(e->d_name, "evald-score-", 12))
			fail_msg("after %s, evald score left its folder %s behind", sig == SIGKILL ? "SIGKILL" : "SIGTERM",
			         e->d_name);
	}
	if (d)
		closedir(d);
	free(line);
	free(samples);
	free(problems);
	free(dir);
}

static void sandboxed_programs_die_on_sigkill(void **st)
{
	(void)st;
	dies_with_evald(SIGKILL);
}

static void sandboxed_programs_die_on_sigterm(void **st)
{
	(void)st;
	dies_with_evald(SIGTERM);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sandboxed_programs_die_on_sigkill),
		cmocka_unit_test(sandboxed_programs_die_on_sigterm),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
