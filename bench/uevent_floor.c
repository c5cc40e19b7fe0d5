// SPDX-License-Identifier: MIT
// The floor for any agent driven by uevents, as a program of its own for the
// guests (tests/vm/test_peers.py; the host bench has the same listener inside
// bench.cpp): it listens to the kernel's uevents and, on the add of a whole
// disk whose name starts with one of the given prefixes, writes the given
// queue attributes once each, in the order given, and nothing else (no
// policy, no identity, no read-back, no retry, no journal).
//
// For each disk it prints one line when done:
//   NAME WRITE_US_TOTAL FAILED [ATTR:ERRNO ...]
// WRITE_US_TOTAL is the time spent inside write(2) for that disk: the part of
// the reaction the kernel itself takes (a scheduler switch or a wbt write
// freezes the queue), whoever writes.
//
// usage: uevent_floor PREFIX[,PREFIX...] ATTR=VALUE...
// Stops on SIGTERM or SIGINT. Linux only; libc only.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig) {
    (void)sig;
    stop = 1;
}

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

// The value of KEY= in a uevent's NUL-separated fields, or NULL.
static const char* field(const char* buf, size_t len, const char* key) {
    const size_t klen = strlen(key);
    for (size_t off = strlen(buf) + 1; off < len; off += strlen(buf + off) + 1)
        if (strncmp(buf + off, key, klen) == 0 && buf[off + klen] == '=') return buf + off + klen + 1;
    return NULL;
}

static int has_prefix(const char* name, const char* prefixes) {
    const char* p = prefixes;
    while (*p) {
        const size_t n = strcspn(p, ",");
        if (n > 0 && strncmp(name, p, n) == 0) return 1;
        p += n;
        if (*p == ',') ++p;
    }
    return 0;
}

int main(int argc, char** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s PREFIX[,PREFIX...] ATTR=VALUE...\n", argv[0]);
        return 2;
    }
    for (int i = 2; i < argc; ++i)
        if (!strchr(argv[i], '=')) {
            fprintf(stderr, "%s: not ATTR=VALUE: %s\n", argv[0], argv[i]);
            return 2;
        }
    const int sock = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT);
    struct sockaddr_nl addr = {.nl_family = AF_NETLINK, .nl_groups = 1};  // the kernel's own group
    if (sock < 0 || bind(sock, (struct sockaddr*)&addr, sizeof addr) < 0) {
        perror("uevent socket");
        return 1;
    }
    const int rcvbuf = 8 << 20;  // a burst of adds must not overflow it
    (void)setsockopt(sock, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready\n");

    char buf[8192];
    while (!stop) {
        const ssize_t n = recv(sock, buf, sizeof buf - 1, 0);
        if (n <= 0) {
            if (n < 0 && errno == ENOBUFS) fprintf(stderr, "uevent socket overflowed: adds were lost\n");
            continue;
        }
        buf[n] = '\0';
        const char *action = field(buf, (size_t)n, "ACTION"), *subsystem = field(buf, (size_t)n, "SUBSYSTEM"),
                   *devtype = field(buf, (size_t)n, "DEVTYPE"), *name = field(buf, (size_t)n, "DEVNAME");
        if (!action || !subsystem || !devtype || !name || strcmp(action, "add") != 0 ||
            strcmp(subsystem, "block") != 0 || strcmp(devtype, "disk") != 0 || !has_prefix(name, argv[1]))
            continue;
        double inside = 0;
        int failed = 0;
        char errs[1024] = "";
        for (int i = 2; i < argc; ++i) {
            const char* eq = strchr(argv[i], '=');
            char path[512];
            snprintf(path, sizeof path, "/sys/block/%s/queue/%.*s", name, (int)(eq - argv[i]), argv[i]);
            const int fd = open(path, O_WRONLY | O_CLOEXEC);
            int err = 0;
            if (fd < 0) {
                err = errno;
            } else {
                const double t0 = now_us();
                if (write(fd, eq + 1, strlen(eq + 1)) < 0) err = errno;
                inside += now_us() - t0;
                close(fd);
            }
            if (err) {
                ++failed;
                const size_t used = strlen(errs);
                snprintf(errs + used, sizeof errs - used, " %.*s:%s", (int)(eq - argv[i]), argv[i],
                         strerrorname_np(err));
            }
        }
        printf("%s %.0f %d%s\n", name, inside, failed, errs);
    }
    close(sock);
    return 0;
}
