/* Files and folders: capped whole-file reads, atomic writes, folder
 * creation and recursive removal that never follows a link. */
#include "base/base.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ev_file_read(char **out, size_t *len_out, const char *path, size_t max)
{
	*out = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ev_error_set(errno == ENOENT ? EV_E_NOTFOUND : EV_E_IO, "%s: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return ev_error_set(EV_E_IO, "%s: not a regular file", path);
	}
	if ((uint64_t)st.st_size > max) {
		close(fd);
		return ev_error_set(EV_E_LIMIT, "%s: %lld bytes, over the limit of %zu", path, (long long)st.st_size, max);
	}
	ev_buf b = EV_BUF_INIT(max);
	char chunk[65536];
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof chunk);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			close(fd);
			ev_buf_free(&b);
			return ev_error_set(EV_E_IO, "%s: %s", path, strerror(e));
		}
		if (n == 0)
			break;
		if (ev_buf_append(&b, chunk, (size_t)n)) {
			close(fd);
			ev_buf_free(&b);
			return ev_error_set(EV_E_LIMIT, "%s: over the limit of %zu bytes", path, max);
		}
	}
	close(fd);
	*out = ev_buf_detach(&b, len_out);
	return *out ? 0 : ev_error_set(EV_E_NOMEM, "out of memory");
}

int ev_mkdir_p(const char *dir) { return ev_mkdir_p_mode(dir, 0755); }

int ev_mkdtemp(char **out, const char *base, const char *tag)
{
	*out = NULL;
	if (!base || !*base)
		base = getenv("TMPDIR");
	if (!base || !*base)
		base = "/tmp";
	char *dir = ev_asprintf("%s/evald-%s-XXXXXX", base, tag);
	if (!dir)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	if (!mkdtemp(dir)) {
		int rc = ev_error_set(EV_E_IO, "%s: cannot make a temporary folder there: %s", base, strerror(errno));
		free(dir);
		return rc;
	}
	*out = dir;
	return 0;
}

int ev_mkdir_p_mode(const char *dir, unsigned mode)
{
	char *p = ev_strdup(dir);
	if (!p)
		return ev_error_set(EV_E_NOMEM, "out of memory");
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = 0;
			if (mkdir(p, (mode_t)mode) != 0 && errno != EEXIST && errno != EACCES)
				break;
			*s = '/';
		}
	int rc = mkdir(p, (mode_t)mode) != 0 && errno != EEXIST
	                 ? ev_error_set(EV_E_IO, "%s: cannot create folder: %s", dir, strerror(errno))
	                 : 0;
	free(p);
	return rc;
}

int ev_file_write(const char *path, const void *data, size_t len)
{
	return ev_file_write_parts(path, &data, &len, 1);
}

int ev_file_write_parts(const char *path, const void *const *parts, const size_t *lens, int n)
{
	ev_file_out f;
	int rc = ev_file_out_open(&f, path);
	for (int k = 0; k < n && !rc; k++)
		rc = ev_file_out_write(&f, parts[k], lens[k]);
	return rc ? (ev_file_out_abort(&f), rc) : ev_file_out_commit(&f);
}

int ev_file_out_open(ev_file_out *f, const char *path)
{
	f->fd = -1;
	f->path = f->tmp = NULL;
	/* An unpredictable temp name made with O_EXCL (mkstemp): a link planted
	 * at a guessable name cannot redirect the write. */
	if (!(f->path = ev_strdup(path)) || !(f->tmp = ev_asprintf("%s.tmp.XXXXXX", path))) {
		free(f->path), free(f->tmp);
		f->path = f->tmp = NULL;
		return ev_error_set(EV_E_NOMEM, "out of memory");
	}
	f->fd = mkostemp(f->tmp, O_CLOEXEC);
	if (f->fd < 0) {
		/* (named by the file asked for: the temp name is ours) */
		int rc = ev_error_set(EV_E_IO, "%s: cannot write it: %s", f->path, strerror(errno));
		free(f->path), free(f->tmp);
		f->path = f->tmp = NULL;
		return rc;
	}
	/* mkstemp makes 0600; the file gets what open(0644) would, under the umask */
	mode_t um = umask(0);
	umask(um);
	(void)fchmod(f->fd, 0644 & ~um);
	return 0;
}

int ev_file_out_write(ev_file_out *f, const void *data, size_t len)
{
	const char *p = data;
	while (len) {
		ssize_t w = write(f->fd, p, len);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return ev_error_set(EV_E_IO, "%s: cannot write it: %s", f->path, strerror(errno));
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

int ev_file_out_commit(ev_file_out *f)
{
	int rc = 0, synced = fsync(f->fd), closed = close(f->fd); /* (closed whatever fsync said) */
	if (synced != 0 || closed != 0 || rename(f->tmp, f->path) != 0) {
		rc = ev_error_set(EV_E_IO, "%s: %s", f->path, strerror(errno));
		unlink(f->tmp);
	}
	f->fd = -1;
	free(f->path), free(f->tmp);
	f->path = f->tmp = NULL;
	return rc;
}

void ev_file_out_abort(ev_file_out *f)
{
	if (f->fd >= 0) {
		close(f->fd);
		unlink(f->tmp);
	}
	f->fd = -1;
	free(f->path), free(f->tmp);
	f->path = f->tmp = NULL;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)ftw;
	if (flag == FTW_DP || flag == FTW_D || flag == FTW_DNR)
		(void)rmdir(path);
	else
		(void)unlink(path);
	return 0;
}

static int open_dir(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)ftw;
	if (flag == FTW_D || flag == FTW_DNR || (st && S_ISDIR(st->st_mode) && flag != FTW_SL))
		(void)chmod(path, 0700);
	return 0;
}

int ev_rmtree(const char *dir, unsigned flags)
{
	if (!dir)
		return 0;
	struct stat st;
	if (lstat(dir, &st) != 0)
		return errno == ENOENT ? 0 : ev_error_set(EV_E_IO, "%s: %s", dir, strerror(errno));
	int walk = FTW_PHYS | FTW_MOUNT;
	/* Folders left without write or search bits (by a sandboxed program,
	 * say) are opened up first, so that their entries can go. */
	if ((flags & EV_RMTREE_FORCE) && S_ISDIR(st.st_mode))
		(void)nftw(dir, open_dir, 16, walk);
	(void)nftw(dir, rm_entry, 16, walk | FTW_DEPTH);
	if (lstat(dir, &st) == 0)
		return ev_error_set(EV_E_IO, "%s: could not remove everything under it", dir);
	return 0;
}

uint64_t ev_mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	unsigned long long kb = 0;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	if (kb)
		return (uint64_t)kb * 1024;
	long pages = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	return pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
}
