#!/bin/sh
# A self-checkpointing job under ckptrun, here examples/self_job.rs's
# stand-in (self_job STATE STEPS RESULT: it rewrites STATE in place and
# exits 17 after each checkpoint): put your program and its arguments in
# its place. ckptrun and the job sit in the directory you submit from,
# which every node sees: the store that carries the job is kept there.
#SBATCH --job-name=ckptrun-self
# Preempted (PreemptMode=REQUEUE) or `scontrol requeue`d: back in the queue.
#SBATCH --requeue
# Slurm's output file, appended to at each start rather than emptied.
#SBATCH --output=job.out
#SBATCH --open-mode=append
# SIGTERM to ckptrun (B:, the script's process) 10 minutes before the
# time limit: it checkpoints and exits 85, which RequeueExit=85 requeues.
#SBATCH --time=24:00:00
#SBATCH --signal=B:TERM@600
exec ./ckptrun --log ckptrun.log --mode self --ckpt state --job-ckpt-exit 17 --ckpt-signal USR1 -- ./self_job state 3000 result
