# A job for the real DMTCP (tests/dmtcp_real.rs) that forks a worker: the
# worker computes, the parent prints what it gets through a pipe, then
# waits for it. `worker.py STEPS MS`.
import os
import sys
import time

steps, ms = int(sys.argv[1]), int(sys.argv[2])
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    for i in range(steps):
        os.write(w, b"%d\n" % (i * i + 7))
        time.sleep(ms / 1000)
    os._exit(0)
os.close(w)
for i, line in enumerate(os.fdopen(r)):
    print("square", i, line.strip(), flush=True)
_, status = os.waitpid(pid, 0)
print("worker exited", status, flush=True)
