/* The progress display: a rewritten line on a TTY, log lines otherwise. */
#include "base/base.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ev_progress {
	char label[64];
	long total, done, errors;
	double score, start, last_print;
	FILE *to;
	bool tty, quiet, printed;
};

int ev_progress_new(ev_progress **out, const char *label, long total, FILE *to, bool quiet)
{
	ev_progress *p = calloc(1, sizeof *p);
	if (!p)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	snprintf(p->label, sizeof p->label, "%s", label ? label : "");
	p->total = total;
	p->to = to ? to : stderr;
	p->tty = isatty(fileno(p->to));
	p->quiet = quiet;
	p->start = ev_now();
	p->score = -1;
	*out = p;
	return 0;
}

static void fmt_eta(char out[32], double s)
{
	if (s < 0 || s > 1e7)
		snprintf(out, 32, "--:--");
	else if (s >= 3600)
		snprintf(out, 32, "%d:%02d:%02d", (int)s / 3600, (int)s / 60 % 60, (int)s % 60);
	else
		snprintf(out, 32, "%d:%02d", (int)s / 60, (int)s % 60);
}

static void print_line(ev_progress *p, bool final)
{
	double el = ev_now() - p->start;
	double rate = el > 0 ? (double)p->done / el : 0;
	char eta[32], score[32] = "";
	fmt_eta(eta, rate > 0 ? (double)(p->total - p->done) / rate : -1);
	if (p->score >= 0)
		snprintf(score, sizeof score, " score %.3f", p->score);
	if (p->tty)
		fprintf(p->to, "\r\033[K%s %ld/%ld  %.1f/s  eta %s%s%s%s", p->label, p->done, p->total, rate, eta, score,
		        p->errors ? " errors " : "", p->errors ? "" : "");
	else
		fprintf(p->to, "evald: %s %ld/%ld %.1f/s eta %s%s\n", p->label, p->done, p->total, rate, eta, score);
	if (p->tty && p->errors)
		fprintf(p->to, "%ld", p->errors);
	if (p->tty && final)
		fputc('\n', p->to);
	fflush(p->to);
	p->printed = true;
}

void ev_progress_update(ev_progress *p, long done, double score, long errors)
{
	p->done = done;
	p->score = score;
	p->errors = errors;
	if (p->quiet)
		return;
	double now = ev_now();
	double every = p->tty ? 0.1 : 10.0;
	if (now - p->last_print >= every) {
		p->last_print = now;
		print_line(p, false);
	}
}

void ev_progress_finish(ev_progress *p)
{
	if (!p->quiet && (p->tty || p->printed || p->total > 0))
		print_line(p, true);
}

void ev_progress_free(ev_progress *p) { free(p); }
