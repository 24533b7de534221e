//! `ckptrun --help`.

pub const HELP: &str = "\
Usage: ckptrun [OPTIONS] [--] PROGRAM [ARG...]
       ckptrun --mode self --ckpt PATH --job-ckpt-exit N [OPTIONS] [--] PROGRAM [ARG...]
       ckptrun --mode init [OPTIONS] [--] PROGRAM [ARG...]
       ckptrun --mode dmtcp [OPTIONS] [--] PROGRAM [ARG...]

Runs PROGRAM, a condor_compile'd job, the way HTCondor's checkpoint
wrapper did: address randomization off (as `setarch ARCH -L -B -R`),
-_condor_ckpt FILE on a fresh start, -_condor_restart FILE
-_condor_relocatable when FILE exists. SIGTERM makes the job checkpoint
and exit; ckptrun then exits with the checkpoint code (85) so HTCondor
transfers FILE and restarts the job.

With --mode self, PROGRAM checkpoints itself to --ckpt PATH (in place
if it likes) and says so by exiting N (--job-ckpt-exit) or dying by a
signal (--job-ckpt-signal). ckptrun checks the checkpoint, commits it
atomically and durably to the store, and exits 85. Before each start,
every PATH is replaced by a private copy of the last committed
checkpoint, so a torn one is never used.

With --mode dmtcp, PROGRAM is any program, checkpointed by DMTCP (4.2):
ckptrun starts a private dmtcp_coordinator, runs PROGRAM under
dmtcp_launch (or dmtcp_restart from the last committed images), and on
eviction (SIGTERM, SIGINT, the job ad's KillSig) has DMTCP checkpoint and
kill the computation, waits until the images are complete, commits them
atomically to the store, and exits 85.

Self and dmtcp mode keep each committed generation as one file at the
top of the sandbox (--store NAME: NAME.0, NAME.1, ...), which is what
HTCondor uploads on eviction and on exit 85.

With --mode init, ckptrun is only a minimal init (as tini): no
personality, no arguments added, signals and exit status passed on
unchanged; the checkpoint options are refused.

When _CONDOR_JOB_AD names HTCondor's job ad, its SuccessCheckpointExitCode,
SuccessCheckpointExitBySignal/Signal, KillSig, CheckpointSig and
JobMaxVacateTime are used where no option says otherwise.

Under Slurm, every SIGTERM but a plain scancel's is an eviction
(see docs/slurm.md).

Options for every checkpointing mode:
  -c, --ckpt PATH         (not dmtcp) condor: the checkpoint file [default:
                          PROGRAM as given + .ckpt]; self: a file or
                          directory the job writes its checkpoint to
                          (repeatable)
      --ckpt-exit-code N  exit code meaning \"checkpointed: transfer and
                          restart me\" [default: 85]
      --exit-by-signal SIG
                          after a checkpoint, die by SIG (no core dump)
                          instead of exiting with the code
      --interval SECS     ask for a checkpoint SECS after the job started,
                          and exit 85 once it is committed (self with
                          --ckpt-continue, condor and dmtcp with
                          --interval-continue: every SECS, running on)
      --ckpt-timeout SECS a job that does not answer a request within SECS
                          is logged, and killed if it was to exit (exit 124;
                          dmtcp: any checkpoint not complete in SECS)
                          [default: the job ad's JobMaxVacateTime less 10%
                          for evictions, else none]

Options for --mode condor:
      --arch auto|x86_64|i386
                          personality to run PROGRAM with; auto reads
                          PROGRAM's ELF header [default: auto]
      --keep-aslr         leave address randomization on (drop setarch -R)
      --no-compat-layout  drop setarch -L (ADDR_COMPAT_LAYOUT)
      --no-limit-32bit    drop setarch -B (ADDR_LIMIT_32BIT)
      --personality-optional
                          if the kernel refuses personality(), warn and run
      --interval-continue with --interval: send SIGUSR2 every SECS instead
                          of SIGTSTP; the job checkpoints and keeps running
                          (dmtcp: checkpoint every SECS, the job running on)

Options for --mode self and --mode dmtcp:
      --store NAME        committed checkpoints, one file per generation:
                          NAME.0 .. NAME.N [default: ckptrun.store]
      --keep N            older generations kept [default: 1]
      --fresh-if-damaged  if no generation is intact (each is verified
                          before a restart), set them aside and start the
                          job afresh instead of refusing (exit 125); also
                          condor mode's FILE, against FILE.xxh3
      --return-store      at the job's successful end, leave its newest
                          generation with its outputs (HTCondor brings it
                          back); by default only a failed end does
      --no-compress       store files uncompressed

Options for --mode dmtcp:
      --dmtcp-dir DIR     where dmtcp_launch, dmtcp_coordinator, dmtcp_command
                          and dmtcp_restart are, if not in ./ [then: PATH]
      --images-dir DIR    where DMTCP writes images before ckptrun commits
                          them; must be the same path on every node, as
                          DMTCP records it [default: /tmp]
      --interval-continue with --interval: checkpoint every SECS, the job
                          running on

Options for --mode self:
      --job-ckpt-exit N   the job's own exit code after a checkpoint
      --job-ckpt-signal SIG
                          the job dies by SIG after a checkpoint
      --ckpt-signal SIG   how to ask the job for a checkpoint; sent on
                          eviction (SIGTERM, the job ad's KillSig) and every
                          --interval, which needs it, as --ckpt-continue
                          does [default: SIGTERM is passed on as is]
      --ckpt-continue     a --interval request means \"checkpoint and keep
                          running\"; the job must replace each PATH by rename
      --restart-arg ARG   appended after ARG... when restarting from a
                          committed checkpoint; {ckpt} becomes the first
                          --ckpt PATH (repeatable)
      --restart-grace SECS
                          if a restart fails (non-zero) within SECS, restart
                          once from the generation before

Options for every mode:
      --mode condor|self|init|dmtcp
                          the checkpoint protocol [default: condor]
      --map FROM:TO       deliver signal FROM to the job as TO (names or
                          numbers; TO = 0 drops it); repeatable. Built in:
                          condor TERM:TSTP, TSTP:TSTP, USR2:USR2; self
                          TERM:SIG with --ckpt-signal SIG
      --pgroup            send forwarded signals to the job's whole process
                          group (tini -g), not only the job
      --pdeathsig SIG     when ckptrun's parent dies, ckptrun receives SIG
                          and handles it like any other signal (tini -p)
      --status-file FILE  when the job ends, write its raw wait status there
                          as `Exited: N` (as HTCondor's condor_pid_ns_init)
      --kill-after SECS   when the job has ended, SIGTERM the processes it
                          left, SIGKILL them after SECS [default: leave them]
      --stdin FILE        the job reads FILE as its standard input
      --stdout FILE       the job's standard output is appended to FILE
      --stderr FILE       the job's standard error is appended to FILE
  -v, --verbose           report progress on stderr
      --log FILE          append timestamped progress lines to FILE
  -h, --help              print this help
  -V, --version           print the version

Every option also reads from CKPTRUN_<LONG_NAME> (e.g. CKPTRUN_CKPT_EXIT_CODE=17,
CKPTRUN_VERBOSE=1); the command line wins.

Exit status:
  the job's own exit code, or 85 (--ckpt-exit-code) when it checkpointed;
  120  condor: the job stopped on SIGTSTP instead of checkpointing (it is
       not condor_compile'd); ckptrun ended it
  121  condor: the job died by SIGUSR2 but wrote no checkpoint during this
       run; self: the job reported a checkpoint that is missing, empty, or
       not written during this run
  122  the job itself exited with the checkpoint code, or died by the
       checkpoint signal (never passed on: HTCondor would restart it forever)
  123  self, dmtcp: the checkpoint could not be committed (the last one is
       kept)
  124  the job did not checkpoint and exit within --ckpt-timeout (or the
       job ad's eviction budget); ckptrun killed it. dmtcp: the checkpoint
       was not complete in time, or could not be requested
  125  ckptrun failed (dmtcp: also a DMTCP tool missing, or a coordinator
       that did not start)
  (the checkpoint code must be 1-128 and not one of 120-127)
  126 PROGRAM cannot run; 127 PROGRAM not found
  a job killed by signal N: ckptrun dies by N (exits 128+N as PID 1)
";
