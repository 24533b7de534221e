/* The job of scripts/bench-dmtcp-gzip.sh and bench-evict-budget.sh:
 * `big SIZE_MB FILE` fills SIZE_MB of memory with FILE over and over,
 * then prints a line every 20 ms ("ready N BYTE"). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    size_t size = (size_t)atol(argv[1]) << 20, at = 0;
    unsigned char *mem = malloc(size);
    if (!mem) return 2;
    while (at < size) {
        FILE *f = fopen(argv[2], "r");
        if (!f) return 2;
        size_t n;
        while (at < size && (n = fread(mem + at, 1, size - at > 65536 ? 65536 : size - at, f)) > 0) at += n;
        fclose(f);
    }
    for (long i = 0;; i++) {
        printf("ready %ld %u\n", i, mem[(i * 4096) % size]);
        fflush(stdout);
        usleep(20000);
    }
}
