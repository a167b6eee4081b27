/*
 * base/fs.h: files and folders. Included by base/base.h.
 */
#ifndef EV_BASE_FS_H
#define EV_BASE_FS_H

#include <stddef.h>
#include <stdint.h>

/* Reads a whole file, at most `max` bytes (EV_E_LIMIT past that). *out is
 * NUL-terminated and freed with free(). */
int ev_file_read(char **out, size_t *len_out, const char *path, size_t max);
/* Creates a folder and any missing parents (mode 0755); an existing one
 * is fine. */
int ev_mkdir_p(const char *dir);
/* The same with the mode of the folders it makes (0700 for private ones). */
int ev_mkdir_p_mode(const char *dir, unsigned mode);
/* Writes a file atomically (temp file in the same folder, then rename). */
int ev_file_write(const char *path, const void *data, size_t len);
/* The same from n pieces one after another (no copy of them made). */
int ev_file_write_parts(const char *path, const void *const *parts, const size_t *lens, int n);
/* The same piece by piece, for files larger than one wants in memory:
 * open (a temp file beside `path`), write any number of times, then commit
 * (fsync and rename into place) or abort (the temp file removed; also
 * after a failed write). Nothing appears at `path` but the whole file. */
typedef struct {
	int fd;
	char *path, *tmp;
} ev_file_out;
int ev_file_out_open(ev_file_out *f, const char *path);
int ev_file_out_write(ev_file_out *f, const void *data, size_t len);
int ev_file_out_commit(ev_file_out *f);
void ev_file_out_abort(ev_file_out *f);

enum {
	/* Open up folders that lack write or search permission first (what a
	 * sandboxed program may leave behind). */
	EV_RMTREE_FORCE = 1u << 0
};
/* Removes `path` (a file or a folder and everything under it) without
 * following symbolic links and without crossing into other file systems.
 * An absent path is fine (0); NULL is fine. EV_E_IO naming the path when
 * something is left. */
int ev_rmtree(const char *path, unsigned flags);

/* Makes a new private folder named evald-TAG-XXXXXX (mkdtemp) in `base`
 * when that is given and not empty, else in $TMPDIR, else in /tmp; its
 * path malloc'd into *out. EV_E_IO naming the place when it cannot. */
int ev_mkdtemp(char **out, const char *base, const char *tag);

/* Memory the system could give without swapping, in bytes: /proc/meminfo's
 * MemAvailable, else the free pages sysconf counts; 0 when neither says. */
uint64_t ev_mem_available(void);

#endif
