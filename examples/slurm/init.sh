#!/bin/sh
# Any program under ckptrun as a plain init (signals passed on, orphans
# reaped, the exit status passed on), here tests/jobs/terms.c (terms
# STEPS MS): put your program and its arguments in its place. Nothing is
# checkpointed: a requeued job starts again from the beginning.
#SBATCH --job-name=ckptrun-init
# Preempted (PreemptMode=REQUEUE) or `scontrol requeue`d: back in the queue.
#SBATCH --requeue
# Slurm's output file, appended to at each start rather than emptied.
#SBATCH --output=job.out
#SBATCH --open-mode=append
exec ./ckptrun --log ckptrun.log --mode init -- ./terms 150 100
