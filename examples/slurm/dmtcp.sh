#!/bin/sh
# An unmodified program under DMTCP, here tests/jobs/counter.c (counter
# STEPS MS): put your program and its arguments in its place. ckptrun,
# the program and DMTCP's whole install tree (dmtcp/bin and dmtcp/lib)
# sit in the directory you submit from, which every node sees: the store
# that carries the job is kept there.
#SBATCH --job-name=ckptrun-dmtcp
# Preempted (PreemptMode=REQUEUE) or `scontrol requeue`d: back in the queue.
#SBATCH --requeue
# Slurm's output file, appended to at each start rather than emptied.
#SBATCH --output=job.out
#SBATCH --open-mode=append
# SIGTERM to ckptrun (B:, the script's process) 10 minutes before the
# time limit: DMTCP checkpoints, ckptrun exits 85, RequeueExit=85 requeues.
#SBATCH --time=24:00:00
#SBATCH --signal=B:TERM@600
exec ./ckptrun --log ckptrun.log --mode dmtcp --dmtcp-dir dmtcp/bin --stdout counter.out --stderr counter.err -- ./counter 150 100
