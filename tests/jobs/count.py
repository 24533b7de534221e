# A job for the real DMTCP (tests/dmtcp_real.rs): counts, printing each
# step. `count.py STEPS MS`.
import sys
import time

steps, ms = int(sys.argv[1]), int(sys.argv[2])
acc = 1
for i in range(steps):
    acc = (acc * 6364136223846793005 + i) % (1 << 64)
    print("step", i, acc, flush=True)
    time.sleep(ms / 1000)
print("done", flush=True)
