#!/bin/sh
# examples/slurm/self.sh for a site without RequeueExit=85: the script
# requeues the job itself after ckptrun's checkpoint exit. It cannot
# `exec` ckptrun, so it passes Slurm's SIGTERM (--signal=B:TERM, which
# only this shell gets) on to ckptrun, and waits for it.
#SBATCH --job-name=ckptrun-self-requeue
#SBATCH --requeue
#SBATCH --output=job.out
#SBATCH --open-mode=append
#SBATCH --time=24:00:00
#SBATCH --signal=B:TERM@600
./ckptrun --log ckptrun.log --mode self --ckpt state --job-ckpt-exit 17 --ckpt-signal USR1 -- ./self_job state 3000 result &
ckptrun=$!
trap 'kill -TERM $ckptrun 2>/dev/null' TERM
# A trapped signal ends `wait` early: wait until ckptrun has ended.
wait $ckptrun
code=$?
while kill -0 $ckptrun 2>/dev/null; do
    wait $ckptrun
    code=$?
done
if [ $code -eq 85 ]; then
    # Checkpointed: back in the queue (after a preemption Slurm has
    # requeued the job already, and this says so and does nothing).
    scontrol requeue "$SLURM_JOB_ID"
    exit 0
fi
exit $code
