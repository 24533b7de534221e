/* A job that takes SIGTERM with sigwait, installing no handler (tests/
 * supervision.rs): it blocks SIGTERM, writes `ready`, and waits for it;
 * once it has it, it writes `got` and exits 3. Whether SIGTERM is ignored
 * does not matter: the kernel queues a blocked signal either way. */
#include <signal.h>
#include <stdio.h>

int main(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, NULL);
    FILE *ready = fopen("ready", "w");
    if (!ready)
        return 2;
    fclose(ready);
    int sig = 0;
    if (sigwait(&set, &sig) != 0 || sig != SIGTERM)
        return 2;
    FILE *got = fopen("got", "w");
    if (!got)
        return 2;
    fputs("SIGTERM\n", got);
    fclose(got);
    return 3;
}
