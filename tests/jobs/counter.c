/* A job for the real DMTCP (tests/dmtcp_real.rs): counts, printing each
 * step to stdout and to `data`, a file it holds open for writing from the
 * start (DMTCP cuts such a file back to its checkpoint-time size on
 * restart). `counter STEPS MS [WORDS...]`: the words are printed first, so
 * that an argument's spaces are seen to survive. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 10;
    int ms = argc > 2 ? atoi(argv[2]) : 100;
    for (int i = 3; i < argc; i++)
        printf("arg [%s]\n", argv[i]);
    FILE *data = fopen("data", "w");
    if (!data)
        return 2;
    unsigned long long acc = 1;
    for (int i = 0; i < steps; i++) {
        acc = acc * 6364136223846793005ULL + 1442695040888963407ULL + i;
        printf("step %d %llu\n", i, acc);
        fflush(stdout);
        fprintf(data, "%d %llu\n", i, acc);
        fflush(data);
        usleep(ms * 1000);
    }
    printf("done\n");
    return 0;
}
