// SPDX-License-Identifier: MIT
/* The syscall floor for apply, as its own program: lists <root>/block and,
 * for every device, opens, reads, writes and reads back each attribute given
 * as attr=value. No policy, no facts, no report: only the file work.
 *   blkpolicy-bench-floor ROOT ATTR=VALUE...
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void touch(const char *path, const char *value) {
    char buf[4096];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)!read(fd, buf, sizeof buf);
        close(fd);
    }
    fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd >= 0) {
        (void)!write(fd, value, strlen(value));
        close(fd);
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)!read(fd, buf, sizeof buf);
        close(fd);
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s ROOT ATTR=VALUE...\n", argv[0]);
        return 2;
    }
    char dir[2048], path[4096];
    snprintf(dir, sizeof dir, "%s/block", argv[1]);
    DIR *d = opendir(dir);
    if (!d) return 1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        for (int i = 2; i < argc; ++i) {
            const char *eq = strchr(argv[i], '=');
            if (!eq) continue;
            if (snprintf(path, sizeof path, "%s/%s/queue/%.*s", dir, e->d_name, (int)(eq - argv[i]), argv[i]) >=
                (int)sizeof path)
                continue;
            touch(path, eq + 1);
        }
    }
    closedir(d);
    return 0;
}
