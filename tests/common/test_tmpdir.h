/* A scratch folder for a test: made fresh, removed with its files (and empty subfolders). */
#ifndef METRALE_TEST_TMPDIR_H
#define METRALE_TEST_TMPDIR_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[64];

static inline void make_tmpdir(void) {
  strcpy(tmpdir, "/tmp/metrale-test-XXXXXX");
  cr_assert_not_null(mkdtemp(tmpdir));
}

static inline void remove_tmpdir(void) {
  DIR *d = opendir(tmpdir);
  if (!d) return;
  struct dirent *e;
  char p[512];
  while ((e = readdir(d))) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
    unlink(p);
    rmdir(p);
  }
  closedir(d);
  rmdir(tmpdir);
}

#endif
