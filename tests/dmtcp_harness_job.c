/* The job of tests/dmtcp_harness.rs, run under the real DMTCP:
 * `dmtcp_harness_job STEPS MS` counts STEPS steps, MS ms apart. Each step
 * writes one line, with a running hash of every step before it, to stdout
 * (one write(2), unbuffered) and to `data`, a file it holds open for
 * writing from its start (DMTCP cuts such a file back to its size at the
 * checkpoint on restart; it never cuts back descriptors 0-2). A step lost,
 * repeated or resumed from the wrong state shows in both. At the end:
 * `done`. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            exit(3);
        buf += n;
        len -= (size_t)n;
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: dmtcp_harness_job STEPS MS\n");
        return 2;
    }
    int steps = atoi(argv[1]);
    int ms = atoi(argv[2]);
    int data = open("data", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (data < 0)
        return 2;
    uint64_t hash = 14695981039346656037ULL;
    char line[64];
    for (int i = 0; i < steps; i++) {
        hash = (hash ^ (uint64_t)i) * 1099511628211ULL;
        int n = snprintf(line, sizeof line, "step %d %016llx\n", i, (unsigned long long)hash);
        write_all(1, line, (size_t)n);
        write_all(data, line, (size_t)n);
        usleep((useconds_t)ms * 1000);
    }
    write_all(1, "done\n", 5);
    write_all(data, "done\n", 5);
    return 0;
}
