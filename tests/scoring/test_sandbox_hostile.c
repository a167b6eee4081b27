/* Hostile programs are contained: each gets the right verdict, and the
 * host (this test process, its files, its other processes) is unharmed. */
#include "tests/common/testutil.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "scoring/scoring.h"

#define PY "/usr/bin/python3"

static char *g_tmp;
static char g_marker[64];

/* Runs code with a marker argument that every process it forks inherits. */
static ev_sandbox_result run_py(const ev_sandbox_options *o, const char *code)
{
	ev_sandbox_file f = {"prog.py", code, strlen(code)};
	const char *argv[] = {PY, "-I", "-S", "prog.py", g_marker, NULL};
	ev_sandbox_result r;
	assert_int_equal(ev_sandbox_run(o, argv, &f, 1, &r), 0);
	return r;
}

/* Processes whose command line holds the marker. */
static int marked_processes(void)
{
	DIR *d = opendir("/proc");
	int n = 0;
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		char path[64], buf[4096];
		snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
		int fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		ssize_t got = read(fd, buf, sizeof buf - 1);
		close(fd);
		for (ssize_t i = 0; i < got; i++)
			if (!buf[i])
				buf[i] = ' ';
		if (got > 0) {
			buf[got] = 0;
			n += strstr(buf, g_marker) != NULL;
		}
	}
	if (d)
		closedir(d);
	return n;
}

static int setup(void **state)
{
	(void)state;
	g_tmp = tu_tmpdir("sandbox-hostile");
	snprintf(g_marker, sizeof g_marker, "evald-hostile-marker-%ld", (long)getpid());
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(g_tmp);
	return 0;
}

static void fork_bomb_is_contained(void **state)
{
	(void)state;
	ev_sandbox_options o = EV_SANDBOX_OPTIONS_INIT;
	o.timeout_s = 2;
	o.max_procs = 32;
	double t0 = ev_now();
	ev_sandbox_result r = run_py(&o, "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n");
	assert_int_equal(r.verdict, EV_SANDBOX_TIMEOUT);
	assert_true(ev_now() - t0 < 10);
	assert_int_equal(marked_processes(), 0);
	ev_sandbox_result_clear(&r);
}

/* A run's memory is bounded as a whole: processes x address space. With
 * 256 MiB a process and 1 GiB a run, at most 4 processes (the program and
 * three children) exist at once, so forking ten children that each could
 * take their 256 MiB gets three: the run cannot reach 10 x 256 MiB. */
static void run_memory_is_bounded_by_processes_times_address_space(void **state)
{
	(void)state;
	ev_sandbox_options o = EV_SANDBOX_OPTIONS_INIT;
	o.mem_bytes = (size_t)256 << 20;
	o.run_mem_bytes = (size_t)1 << 30;
	assert_int_equal(ev_sandbox_max_procs(&o), 4);
	ev_sandbox_result r = run_py(&o, "import os, time\nn = 0\nfor i in range(10):\n"
	                                 "    try:\n        pid = os.fork()\n    except OSError:\n        continue\n"
	                                 "    if pid == 0:\n        time.sleep(1)\n        os._exit(0)\n    n += 1\n"
	                                 "print(n)\n");
	assert_int_equal(r.verdict, EV_SANDBOX_PASSED);
	assert_string_equal(r.out, "3\n");
	ev_sandbox_result_clear(&r);
	/* the default bound: 8 GiB with 1 GiB a process */
	ev_sandbox_options d = EV_SANDBOX_OPTIONS_INIT;
	assert_int_equal(ev_sandbox_max_procs(&d), 8);
}

static void memory_hog_is_out_of_memory(void **state)
{
	(void)state;
	ev_sandbox_options o = EV_SANDBOX_OPTIONS_INIT;
	o.mem_bytes = (size_t)256 << 20;
	ev_sandbox_result r = run_py(&o, "l = []\nwhile True:\n    l.append(b'x' * (1 << 20))\n");
	assert_int_equal(r.verdict, EV_SANDBOX_OOM);
	ev_sandbox_result_clear(&r);
}

static void infinite_loop_times_out(void **state)
{
	(void)state;
	ev_sandbox_options o = EV_SANDBOX_OPTIONS_INIT;
	o.timeout_s = 1;
	ev_sandbox_result r = run_py(&o, "while True:\n    pass\n");
	assert_int_equal(r.verdict, EV_SANDBOX_TIMEOUT);
	assert_true(r.wall_s < 5);
	ev_sandbox_result_clear(&r);
}

static void children_that_outlive_it_are_killed(void **state)
{
	(void)state;
	ev_sandbox_result r = run_py(NULL, "import os, time\n"
	                                   "for i in range(3):\n"
	                                   "    if os.fork() == 0:\n"
	                                   "        os.setsid()\n"
	                                   "        if os.fork() == 0:\n"
	                                   "            time.sleep(60)\n"
	                                   "        os._exit(0)\n"
	                                   "time.sleep(0.2)\n"
	                                   "print('parent exits')\n");
	assert_int_equal(r.verdict, EV_SANDBOX_PASSED);
	assert_string_equal(r.out, "parent exits\n");
	assert_true(r.wall_s < 10);
	assert_int_equal(marked_processes(), 0);
	ev_sandbox_result_clear(&r);
}

static void network_is_unreachable(void **state)
{
	(void)state;
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in a = {0};
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t al = sizeof a;
	assert_int_equal(bind(ls, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(listen(ls, 4), 0);
	assert_int_equal(getsockname(ls, (struct sockaddr *)&a, &al), 0);
	char *code = ev_asprintf("import socket\n"
	                         "s = socket.socket()\ns.settimeout(2)\n"
	                         "try:\n    s.connect(('127.0.0.1', %d))\n    print('connected')\n"
	                         "except OSError as e:\n    print('blocked', e.errno)\n",
	                         ntohs(a.sin_port));
	ev_sandbox_result r = run_py(NULL, code);
	assert_int_equal(r.verdict, EV_SANDBOX_PASSED);
	assert_true(ev_str_starts(r.out, "blocked"));
	assert_int_equal(accept(ls, NULL, NULL), -1); /* nothing reached the host */
	close(ls);
	free(code);
	ev_sandbox_result_clear(&r);
}

static void writes_outside_its_folder_fail(void **state)
{
	(void)state;
	char *target = tu_path(g_tmp, "pwned");
	char *real = ev_asprintf("for p in ['%s', '/etc/evald-pwned', '/usr/evald-pwned', '/evald-pwned']:\n"
	                         "    try:\n        open(p, 'w').write('x')\n        print('wrote', p)\n"
	                         "    except OSError as e:\n        print('refused', e.errno)\n"
	                         "open('mine.txt', 'w').write('ok')\nopen('/tmp/t.txt', 'w').write('ok')\n",
	                         target);
	ev_sandbox_result r = run_py(NULL, real);
	assert_int_equal(r.verdict, EV_SANDBOX_PASSED);
	assert_null(strstr(r.out, "wrote"));
	assert_int_equal(access(target, F_OK), -1);
	assert_int_equal(access("/etc/evald-pwned", F_OK), -1);
	assert_int_equal(access("/usr/evald-pwned", F_OK), -1);
	assert_int_equal(access("/evald-pwned", F_OK), -1);
	free(target);
	free(real);
	ev_sandbox_result_clear(&r);
}

static void tracker_and_root_are_not_readable(void **state)
{
	(void)state;
	char *db = tu_write(g_tmp, "evald.db", "tracker-secret-contents");
	chmod(db, 0600);
	char *code = ev_asprintf("import os\n"
	                         "for p in ['%s', '/root/.bashrc', '/etc/shadow']:\n"
	                         "    try:\n        print('read', p, open(p).read()[:40])\n"
	                         "    except OSError as e:\n        print('refused', p, e.errno)\n"
	                         "try:\n    print('root lists', os.listdir('/root'))\n"
	                         "except OSError as e:\n    print('root refused', e.errno)\n",
	                         db);
	ev_sandbox_result r = run_py(NULL, code);
	assert_int_equal(r.verdict, EV_SANDBOX_PASSED);
	assert_null(strstr(r.out, "tracker-secret"));
	assert_null(strstr(r.out, "read "));
	assert_null(strstr(r.out, "root lists ['"));
	free(db);
	free(code);
	ev_sandbox_result_clear(&r);
}

static void kill_attempts_leave_the_host_alive(void **state)
{
	(void)state;
	pid_t sleeper = fork();
	if (sleeper == 0) {
		execl("/bin/sleep", "sleep", "30", (char *)NULL);
		_exit(127);
	}
	char *code = ev_asprintf("import os, signal\n"
	                         "for pid in [os.getppid(), 1, -1, %d, %d, 0]:\n"
	                         "    try:\n        os.kill(pid, signal.SIGKILL)\n"
	                         "    except OSError as e:\n        pass\n"
	                         "print('done')\n",
	                         (int)getpid(), (int)sleeper);
	ev_sandbox_result r = run_py(NULL, code);
	/* alive to check: the test process; and the host sleeper too */
	assert_int_equal(kill(sleeper, 0), 0);
	int st;
	assert_int_equal(waitpid(sleeper, &st, WNOHANG), 0);
	kill(sleeper, SIGKILL);
	waitpid(sleeper, &st, 0);
	assert_true(r.verdict == EV_SANDBOX_PASSED || r.verdict == EV_SANDBOX_CRASHED);
	free(code);
	ev_sandbox_result_clear(&r);
}

static void gigabyte_of_output_is_capped_fast(void **state)
{
	(void)state;
	double t0 = ev_now();
	ev_sandbox_result r = run_py(NULL, "import sys\nb = b'x' * (1 << 20)\nfor i in range(1024):\n"
	                                   "    sys.stdout.buffer.write(b)\n");
	assert_int_equal(r.verdict, EV_SANDBOX_FAILED);
	assert_true(r.out_truncated);
	assert_int_equal(r.out_len, (size_t)1 << 20);
	assert_non_null(strstr(r.detail, "output exceeded"));
	assert_true(ev_now() - t0 < 10);
	ev_sandbox_result_clear(&r);
}

static void rm_rf_leaves_the_host_intact(void **state)
{
	(void)state;
	char *canary = tu_path(g_tmp, "canary");
	assert_int_equal(mkdir(canary, 0755), 0);
	char *inside = tu_write(canary, "keep.txt", "keep");
	bool ro_root = strstr(ev_sandbox_describe(), "private root (read-only)") != NULL;
	char *code;
	if (ro_root) {
		/* the whole root: only because it is private and read-only here */
		code = ev_strdup("import subprocess\n"
		                 "subprocess.run(['/bin/rm', '-rf', '--no-preserve-root', '/'], capture_output=True)\n"
		                 "print('ran')\n");
	} else {
		print_message("no private read-only root here: removing a canary folder outside instead\n");
		code = ev_asprintf("import shutil\nshutil.rmtree('%s', ignore_errors=True)\nprint('ran')\n", canary);
	}
	ev_sandbox_options o = EV_SANDBOX_OPTIONS_INIT;
	o.timeout_s = 4; /* rm walks all of /proc and /usr: it may not finish */
	ev_sandbox_result r = run_py(&o, code);
	assert_true(r.verdict == EV_SANDBOX_PASSED || r.verdict == EV_SANDBOX_TIMEOUT);
	assert_int_equal(access(inside, F_OK), 0);
	assert_int_equal(access(PY, X_OK), 0);
	assert_int_equal(access("/etc/passwd", F_OK), 0);
	/* and the sandbox still works afterwards */
	ev_sandbox_result_clear(&r);
	r = run_py(NULL, "print('still fine')\n");
	assert_string_equal(r.out, "still fine\n");
	ev_sandbox_result_clear(&r);
	free(code);
	free(inside);
	free(canary);
}

static void c_program_cannot_escape_either(void **state)
{
	(void)state;
	/* native code: setuid back to root, and ptrace of the parent */
	static const char src[] = "#include <stdio.h>\n#include <unistd.h>\n#include <sys/ptrace.h>\n"
	                          "int main(void){ int a = setuid(0); long b = ptrace(PTRACE_ATTACH, getppid(), 0, 0);\n"
	                          "printf(\"%d %ld %d\\n\", a, b, getuid() == 0); return 0; }\n";
	ev_testexec_options o = EV_TESTEXEC_OPTIONS_INIT;
	cJSON *t = cJSON_CreateObject();
	cJSON_AddStringToObject(t, "language", "c");
	cJSON_AddStringToObject(t, "script", "");
	char *tests = ev_json_print(t);
	ev_sandbox_result r;
	assert_int_equal(ev_testexec_run(&o, tests, src, &r), 0);
	assert_int_equal(r.verdict, EV_SANDBOX_PASSED);
	assert_string_equal(r.out, "-1 -1 0\n");
	ev_sandbox_result_clear(&r);
	free(tests);
	cJSON_Delete(t);
}

/* The system-call filter: a program cannot make namespaces of its own
 * (nested user namespaces would give it a root of its own and the kernel's
 * mount and net code to play with), nor mount, trace, load BPF or kernel
 * modules, or touch the keyrings; and ordinary programs (threads,
 * subprocesses, fork) still work under it. */
static void namespaces_mounts_tracing_bpf_and_keyrings_are_denied(void **state)
{
	(void)state;
#if !defined(__x86_64__)
	skip(); /* the program below names x86-64 system-call numbers */
#else
	if (!strstr(ev_sandbox_describe(), "system-call filter")) {
		print_message("sandbox runs without the system-call filter here (%s)\n", ev_sandbox_describe());
		fail();
	}
	static const char code[] =
	    "import ctypes, os, threading, subprocess\n"
	    "libc = ctypes.CDLL(None, use_errno=True)\n"
	    "libc.syscall.restype = ctypes.c_long\n"
	    "def call(nr, *a):\n"
	    "    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(x) for x in a])\n"
	    "    if r == 0 and nr == 56:\n"
	    "        os._exit(0)\n"
	    "    return 'ok' if r >= 0 else os.strerror(ctypes.get_errno())\n"
	    "NEWUSER, NEWNS, NEWNET = 0x10000000, 0x00020000, 0x40000000\n"
	    "tried = [\n"
	    "    ('unshare user', call(272, NEWUSER)),\n"
	    "    ('unshare mount', call(272, NEWNS)),\n"
	    "    ('clone user', call(56, NEWUSER | 17, 0, 0, 0, 0)),\n"
	    "    ('clone net', call(56, NEWNET | 17, 0, 0, 0, 0)),\n"
	    "    ('setns', call(308, 0, 0)),\n"
	    "    ('mount', call(165, 0, 0, 0, 0, 0)),\n"
	    "    ('ptrace', call(101, 0, 0, 0, 0)),\n"
	    "    ('bpf', call(321, 0, 0, 0)),\n"
	    "    ('keyctl', call(250, 0, 0)),\n"
	    "    ('add_key', call(248, 0, 0, 0, 0, 0)),\n"
	    "    ('init_module', call(175, 0, 0, 0)),\n"
	    "    ('finit_module', call(313, 0, 0, 0)),\n"
	    "    ('userfaultfd', call(323, 0)),\n"
	    "]\n"
	    "for name, what in tried:\n"
	    "    print(name + ':', what)\n"
	    "t = threading.Thread(target=lambda: print('thread: ok')); t.start(); t.join()\n"
	    "print('subprocess:', subprocess.run(['/bin/echo', 'ok'], capture_output=True, text=True).stdout.strip())\n"
	    "pid = os.fork()\n"
	    "if pid == 0:\n"
	    "    os._exit(7)\n"
	    "print('fork:', os.waitpid(pid, 0)[1] >> 8)\n";
	ev_sandbox_result r = run_py(NULL, code);
	if (r.verdict != EV_SANDBOX_PASSED)
		print_message("verdict %d: %s\n%s\n", r.verdict, r.detail ? r.detail : "", r.err ? r.err : "");
	assert_int_equal(r.verdict, EV_SANDBOX_PASSED);
	static const char *const want[] = {
	    "unshare user: Operation not permitted\n", "unshare mount: Operation not permitted\n",
	    "clone user: Operation not permitted\n", "clone net: Operation not permitted\n",
	    "setns: Operation not permitted\n", "mount: Operation not permitted\n", "ptrace: Operation not permitted\n",
	    "bpf: Operation not permitted\n", "keyctl: Operation not permitted\n", "add_key: Operation not permitted\n",
	    "init_module: Operation not permitted\n", "finit_module: Operation not permitted\n",
	    "userfaultfd: Operation not permitted\n", "thread: ok\n", "subprocess: ok\n", "fork: 7\n",
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		if (!strstr(r.out, want[i]))
			print_message("missing \"%s\" in:\n%s\n", want[i], r.out);
		assert_non_null(strstr(r.out, want[i]));
	}
	ev_sandbox_result_clear(&r);
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(namespaces_mounts_tracing_bpf_and_keyrings_are_denied),
		cmocka_unit_test(fork_bomb_is_contained),
		cmocka_unit_test(run_memory_is_bounded_by_processes_times_address_space),
		cmocka_unit_test(memory_hog_is_out_of_memory),
		cmocka_unit_test(infinite_loop_times_out),
		cmocka_unit_test(children_that_outlive_it_are_killed),
		cmocka_unit_test(network_is_unreachable),
		cmocka_unit_test(writes_outside_its_folder_fail),
		cmocka_unit_test(tracker_and_root_are_not_readable),
		cmocka_unit_test(kill_attempts_leave_the_host_alive),
		cmocka_unit_test(gigabyte_of_output_is_capped_fast),
		cmocka_unit_test(rm_rf_leaves_the_host_intact),
		cmocka_unit_test(c_program_cannot_escape_either),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
