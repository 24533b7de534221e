/* A job for --mode init under Slurm (tests/slurm.rs, examples/slurm/init.sh):
 * `terms STEPS MS` counts STEPS steps of MS ms each, appending `start` to
 * the file `runs` as it begins and `done STEPS` as it ends (exit 0). A
 * SIGTERM ends it: it waits one second more, counting the SIGTERMs that
 * come (one sent twice shows), appends `sigterm N` and dies by SIGTERM. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t terms;

static void on_term(int sig) {
    (void)sig;
    terms++;
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 10;
    int ms = argc > 2 ? atoi(argv[2]) : 100;
    FILE *out = fopen("runs", "a");
    if (!out)
        return 2;
    struct sigaction action = {0};
    action.sa_handler = on_term;
    sigaction(SIGTERM, &action, NULL);
    fprintf(out, "start\n");
    fflush(out);
    for (int i = 0; i < steps && !terms; i++)
        usleep(ms * 1000);
    if (terms) {
        struct timespec left = {1, 0};
        while (nanosleep(&left, &left) == -1)
            ;
        fprintf(out, "sigterm %d\n", (int)terms);
        fclose(out);
        signal(SIGTERM, SIG_DFL);
        raise(SIGTERM);
        return 3;
    }
    fprintf(out, "done %d\n", steps);
    return 0;
}
