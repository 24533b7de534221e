#!/bin/sh
# A condor_compile'd job under ckptrun, here examples/condor_job.rs's
# stand-in (condor_job STEPS MS_PER_STEP): put your a.out and its
# arguments in its place. ckptrun and the job sit in the directory you
# submit from, which every node sees: the checkpoint is kept there.
#SBATCH --job-name=ckptrun-condor
# Preempted (PreemptMode=REQUEUE) or `scontrol requeue`d: back in the queue.
#SBATCH --requeue
# Slurm's output file, appended to at each start rather than emptied.
#SBATCH --output=job.out
#SBATCH --open-mode=append
# SIGTERM to ckptrun (B:, the script's process) 10 minutes before the
# time limit: it checkpoints and exits 85, which RequeueExit=85 requeues.
#SBATCH --time=24:00:00
#SBATCH --signal=B:TERM@600
exec ./ckptrun --log ckptrun.log ./condor_job 300 50
