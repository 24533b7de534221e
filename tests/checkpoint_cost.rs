//! What a checkpoint costs the pool (issue 25), in a real HTCondor 24
//! pool (see tests/pool): the bytes the access point receives at each
//! upload, as its `XferStatsLog` records them, for the guides' submit
//! files against HTCondor's own self-checkpointing recipe running the same
//! job beside them. Each checkpoint must send one generation (at most
//! 1.05x the recipe's upload), the job's end its outputs only, and the
//! spool must hold K+1 generations all along.

mod common;
mod pool;

use std::path::PathBuf;
use std::time::Duration;

use pool::{Job, SubmitDir, TERMINATED, dmtcp_dir, self_dir};

/// The stand-in's settings for every self mode job here: a 4 MiB state,
/// a checkpoint (exit 17) every 150 of its 2000 steps of 5 ms: 13
/// checkpoint exits, each an upload and an in-place restart.
const SELF_ENV: &str = "SELF_JOB_STEP_MS=5 SELF_JOB_QUIET=1 SELF_JOB_PAD=4194304 \
                        SELF_JOB_CKPT_EVERY=150 SELF_JOB_WRITE_US=0";

/// How long a whole job may take here.
const LIMIT: Duration = Duration::from_secs(600);

/// HTCondor's recipe for a self-checkpointing job (the manual's): the job
/// exits with its checkpoint code after each checkpoint, and
/// `transfer_checkpoint_files` names its state.
const RECIPE: &str = include_str!("pool/recipe.sub");

/// The bytes the access point received at each of job `id`'s uploads
/// (checkpoint exits, evictions, the end), in order: the shadow's
/// `File Transfer Download` lines.
fn uploads(pool: &pool::Pool, id: &str) -> Vec<u64> {
    let log = pool.daemon_log("XferStatsLog", 100_000);
    let ours = format!("File Transfer Download: JobId: {id} ");
    log.lines()
        .filter(|l| l.contains(&format!("({id}) (")) && l.contains(&ours))
        .filter_map(|l| {
            l.split(" bytes: ")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .collect()
}

/// The slot files job `id`'s spool directory holds now, and their sizes.
fn spooled_slots(pool: &pool::Pool, id: &str) -> Vec<(String, u64)> {
    let dir = pool.spool_dir(id);
    let mut found: Vec<(String, u64)> = std::fs::read_dir(&dir)
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with("ckptrun.store.")
                })
                .map(|e| {
                    let size = e.metadata().map_or(0, |m| m.len());
                    (e.file_name().to_string_lossy().into_owned(), size)
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// Waits for the end of every job of `jobs` (each with its `--keep`),
/// checking meanwhile that the spool never holds more than K+1
/// generations; returns the most each held at once.
fn watch_spools(pool: &pool::Pool, jobs: &[(&Job<'_>, usize)]) -> Vec<usize> {
    let mut most = vec![0; jobs.len()];
    let deadline = std::time::Instant::now() + LIMIT;
    loop {
        let mut running = 0;
        for ((job, keep), most) in jobs.iter().zip(&mut most) {
            if job.events().iter().any(|e| e.code == TERMINATED) {
                continue;
            }
            running += 1;
            let held = spooled_slots(pool, &job.id)
                .iter()
                .filter(|(_, size)| *size > 0)
                .count();
            assert!(
                held <= keep + 1,
                "job {}: the spool holds {held} slots",
                job.id
            );
            *most = (*most).max(held);
        }
        if running == 0 {
            return most;
        }
        assert!(std::time::Instant::now() < deadline, "the jobs did not end");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort();
    v[v.len() / 2]
}

/// Every checkpoint upload (all but the last, the end's) at most 1.05x
/// `reference`; at least 10 of them.
fn each_checkpoint_at_most(what: &str, sent: &[u64], reference: u64) {
    let (end, checkpoints) = sent.split_last().unwrap();
    assert!(
        checkpoints.len() >= 10,
        "{what}: {} checkpoint uploads: {sent:?}",
        checkpoints.len()
    );
    for (n, bytes) in checkpoints.iter().enumerate() {
        assert!(
            *bytes as f64 <= 1.05 * reference as f64,
            "{what}: checkpoint upload {} sent {bytes} bytes, more than 1.05x {reference}: {sent:?}",
            n + 1
        );
    }
    eprintln!("{what}: checkpoints {checkpoints:?}, end {end}, reference {reference} bytes");
}

fn no_slot_came_back(dir: &SubmitDir) {
    let slots: Vec<String> = dir
        .names()
        .into_iter()
        .filter(|n| n.starts_with("ckptrun.store"))
        .collect();
    assert!(slots.is_empty(), "the store came back: {slots:?}");
}

#[test]
fn each_checkpoint_uploads_one_generation_and_the_end_only_the_outputs() {
    let Some(pool) = pool::pool() else {
        return;
    };
    let (Some(recipe_dir), Some(self1), Some(self2), Some(dmtcp1), Some(dmtcp2)) = (
        self_dir("cost-recipe"),
        self_dir("cost-self-keep1"),
        self_dir("cost-self-keep2"),
        dmtcp_dir("cost-dmtcp-keep1"),
        dmtcp_dir("cost-dmtcp-keep2"),
    ) else {
        return;
    };
    let self_env = |extra: &str| format!("\"{SELF_ENV}{extra}\"");
    recipe_dir.write("recipe.sub", RECIPE);
    let recipe = recipe_dir.submit("recipe.sub", &[("environment", &self_env(""))]);
    let s1 = self1.submit_example("self", &[("environment", &self_env(""))]);
    let s2 = self2.submit_example("self", &[("environment", &self_env(" CKPTRUN_KEEP=2"))]);
    // dmtcp: a checkpoint and exit every 2 s of the counter's 30; the
    // first returns its store at the end, to weigh a generation by.
    let d1 = dmtcp1.submit_example(
        "dmtcp",
        &[
            ("interval", "2"),
            ("environment", "\"CKPTRUN_RETURN_STORE=1\""),
        ],
    );
    let d2 = dmtcp2.submit_example(
        "dmtcp",
        &[("interval", "2"), ("environment", "\"CKPTRUN_KEEP=2\"")],
    );
    let most = watch_spools(pool, &[(&s1, 1), (&s2, 2), (&d1, 1), (&d2, 2)]);
    for job in [&recipe, &s1, &s2, &d1, &d2] {
        assert_eq!(job.exit_code(LIMIT), 0, "job {}", job.id);
    }
    assert_eq!(
        most,
        [2, 3, 2, 3],
        "slots the spool held at most (keep 1, 2, 1, 2)"
    );

    // The same job, the same result, the same outputs.
    let result = recipe_dir.read_text("result");
    for dir in [&self1, &self2] {
        assert_eq!(dir.read_text("result"), result);
    }
    let recipe_sent = uploads(pool, &recipe.id);
    let (recipe_end, recipe_checkpoints) = recipe_sent.split_last().unwrap();
    let reference = median(recipe_checkpoints.to_vec());
    eprintln!("HTCondor's recipe: checkpoints {recipe_checkpoints:?}, end {recipe_end}");
    for (what, job, dir) in [
        ("self --keep 1", &s1, &self1),
        ("self --keep 2", &s2, &self2),
    ] {
        let sent = uploads(pool, &job.id);
        each_checkpoint_at_most(what, &sent, reference);
        let end = *sent.last().unwrap();
        assert!(
            end as f64 <= 1.05 * *recipe_end as f64,
            "{what}: the end sent {end} bytes, the recipe's {recipe_end}"
        );
        no_slot_came_back(dir);
    }

    // dmtcp: a generation weighs what the returned slot does.
    let returned: Vec<PathBuf> = dmtcp1
        .names()
        .into_iter()
        .filter(|n| n.starts_with("ckptrun.store."))
        .map(|n| dmtcp1.path(&n))
        .collect();
    assert_eq!(
        returned.len(),
        1,
        "--return-store: the newest generation, alone"
    );
    let generation = std::fs::metadata(&returned[0]).unwrap().len();
    // Beside it, an upload carries the job's outputs and logs.
    let outputs = 64 * 1024;
    for (what, job) in [("dmtcp --keep 1", &d1), ("dmtcp --keep 2", &d2)] {
        each_checkpoint_at_most(what, &uploads(pool, &job.id), generation + outputs);
    }
    let end = *uploads(pool, &d2.id).last().unwrap();
    assert!(end < outputs, "dmtcp --keep 2: the end sent {end} bytes");
    no_slot_came_back(&dmtcp2);
}

#[test]
fn a_text_like_state_uploads_compressed() {
    // The same stand-in with a text-like state (SELF_JOB_PAD_TEXT=1,
    // lines of a simulation's log: zstd -1 makes some 0.5 MB of its
    // 4 MiB), under HTCondor's recipe and under self.sub: each of
    // ckptrun's checkpoint uploads must weigh at most half the recipe's
    // (measured: 0.21x), for the same result.
    let Some(pool) = pool::pool() else {
        return;
    };
    let (Some(recipe_dir), Some(self_text)) = (self_dir("cost-text-recipe"), self_dir("cost-text"))
    else {
        return;
    };
    let env = format!("\"{SELF_ENV} SELF_JOB_PAD_TEXT=1\"");
    recipe_dir.write("recipe.sub", RECIPE);
    let recipe = recipe_dir.submit("recipe.sub", &[("environment", &env)]);
    let job = self_text.submit_example("self", &[("environment", &env)]);
    for job in [&recipe, &job] {
        assert_eq!(job.exit_code(LIMIT), 0, "job {}", job.id);
    }
    assert_eq!(
        self_text.read_text("result"),
        recipe_dir.read_text("result")
    );
    let recipe_sent = uploads(pool, &recipe.id);
    let reference = median(recipe_sent[..recipe_sent.len() - 1].to_vec());
    let half = (reference as f64 / 2.0 / 1.05) as u64;
    each_checkpoint_at_most("self, text-like state", &uploads(pool, &job.id), half);
    no_slot_came_back(&self_text);
}
