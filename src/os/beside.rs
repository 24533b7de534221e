//! A computation run in a child process, beside this one: a checksum
//! that would otherwise wait for a copy of the same bytes runs on another
//! core meanwhile (both read the same page cache); a member compressed or
//! expanded with working memory of its own (see `region`), which the
//! supervising process never touches; work whose deep frames would
//! otherwise be the supervisor's pages (an archive's walk, a restore's
//! copy, a commit's archive). Its result, a few u64s (at most 8) or a
//! buffer's bytes (`bytes`: a path), comes back through a pipe. The
//! child is a copy of ckptrun that reads and writes files and exits
//! (`_exit`: no destructor runs twice); it allocates nothing on the
//! heap, and it dies with ckptrun. Anything
//! that goes wrong (no child can be made, it dies, its answer is short)
//! gives no result, and the caller says what then.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use crate::os::sys::{self, Forked, Pid};

/// A child computing `N` numbers.
pub struct Beside<const N: usize = 1> {
    pid: Pid,
    answer: OwnedFd,
}

impl<const N: usize> Beside<N> {
    /// Starts `f` in a child; none if no child can be made. Before the
    /// job runs, and while it runs: ckptrun waits for this child by its
    /// pid (`result`), and its reaping loop runs only between calls like
    /// this, so it never takes this child's end.
    pub fn start(f: impl FnOnce() -> Option<[u64; N]>) -> Option<Self> {
        const { assert!(N <= 8, "a child sends at most 8 numbers") };
        let mut f = Some(f);
        let mut run = |values: &mut [u64; 8], _: BorrowedFd| {
            let got = f.take().and_then(|f| f())?;
            values[..N].copy_from_slice(&got);
            Some(N)
        };
        let (pid, answer) = start(&mut run)?;
        Some(Self { pid, answer })
    }

    /// `work` in a child, its outcome crossing as N numbers (`send` there,
    /// `read` here); done here, as before there were children, when no
    /// child answers (none can be made, or it dies). The one rule for
    /// the work ckptrun keeps off its own stack (how-it-works.md,
    /// "Memory"). Always inlined: its code then goes with its caller's
    /// (a copy named by a caller's types could land in the segment the
    /// supervisor never maps, build.rs).
    #[inline(always)]
    pub fn or_here<T>(
        mut work: impl FnMut() -> T,
        send: impl FnOnce(T) -> [u64; N],
        read: impl FnOnce([u64; N]) -> T,
    ) -> T {
        let child = Self::start(|| Some(send(work())));
        match child.and_then(Self::result) {
            Some(sent) => read(sent),
            None => work(),
        }
    }

    /// Waits for the child: its result, if it gave one.
    pub fn result(self) -> Option<[u64; N]> {
        let all = numbers(self.pid, &self.answer, N)?;
        let mut values = [0u64; N];
        values.copy_from_slice(&all[..N]);
        Some(values)
    }
}

/// `f` in a child, which fills the start of `into` (its copy of it) and
/// says how much; those bytes come back into `into` here: how many. None
/// when no child answers, or `f` gave none (the caller does the work
/// itself then).
pub fn bytes(into: &mut [u8], f: impl FnOnce(&mut [u8]) -> Option<usize>) -> Option<usize> {
    let mut f = Some(f);
    let child = start(&mut |_, tell| {
        let n = f.take().and_then(|f| f(into))?;
        sys::write_all(tell, into.get(..n)?).ok()?;
        Some(0)
    });
    let (pid, answer) = child?;
    result(pid, &answer, into)
}

/// `Beside::result`, one copy for every caller: the `n` values the
/// child sent, if it sent them all and ended well.
#[inline(never)]
fn numbers(pid: Pid, answer: &OwnedFd, n: usize) -> Option<[u64; 8]> {
    let mut sent = [0u8; 64];
    if result(pid, answer, &mut sent[..8 * n])? != 8 * n {
        return None;
    }
    let mut values = [0u64; 8];
    for (v, chunk) in values.iter_mut().zip(sent.chunks_exact(8)) {
        *v = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
    }
    Some(values)
}

/// A child's start, one copy for every caller (each closure type would
/// otherwise get a copy of its own, all resident): `run` fills the first
/// n values, n its answer, which are sent; or sends bytes itself (through
/// the pipe it is given) and answers 0.
#[inline(never)]
fn start(
    run: &mut dyn FnMut(&mut [u64; 8], BorrowedFd) -> Option<usize>,
) -> Option<(Pid, OwnedFd)> {
    let (answer, tell) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).ok()?;
    let ckptrun = rustix::process::getpid();
    match sys::fork().ok()? {
        Forked::Child => {
            // If ckptrun died before the prctl, the signal will never
            // come: go now, before writing anything.
            let _ = sys::set_parent_death_signal(libc::SIGKILL);
            if rustix::process::getppid() != Some(ckptrun) {
                sys::exit_now(1);
            }
            drop(answer);
            let mut values = [0u64; 8];
            let code = match run(&mut values, tell.as_fd()) {
                Some(n) if n <= 8 => {
                    let mut bytes = [0u8; 64];
                    for (chunk, v) in bytes.chunks_exact_mut(8).zip(values) {
                        chunk.copy_from_slice(&v.to_le_bytes());
                    }
                    i32::from(sys::write_all(&tell, &bytes[..8 * n]).is_err())
                }
                _ => 1,
            };
            sys::exit_now(code)
        }
        Forked::Parent(pid) => Some((pid, answer)),
    }
}

/// A child's end, one copy for every caller: the bytes it sent (at
/// most `buf.len()`), read into `buf`; how many, if it then ended well.
#[inline(never)]
fn result(pid: Pid, answer: &OwnedFd, buf: &mut [u8]) -> Option<usize> {
    let got = sys::read_fill(answer, buf);
    let ended = sys::wait_exit_code(pid);
    match (got, ended) {
        (Ok(n), Some(0)) => Some(n),
        _ => None,
    }
}

/// A file whose last reference a child holds (see `Beside::hold`).
pub struct Held {
    child: Beside,
    go: OwnedFd,
}

impl Beside<1> {
    /// Hands `file` to a child that closes it only once told (`Held::let_go`):
    /// what that last close costs (freeing a large file's blocks, its
    /// pages) is then paid beside ckptrun, not in its path. The child
    /// keeps nothing else of ckptrun's: no lock, no output. None if no
    /// child can be made (`file` is then closed here).
    pub fn hold(file: OwnedFd) -> Option<Held> {
        let (wait, go) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).ok()?;
        let (keep, wait_fd) = (file.as_raw_fd(), wait.as_raw_fd());
        let child = Self::start(move || {
            // Only `wait` is needed until told; `file` goes at the exit.
            let mut byte = [0u8; 1];
            sys::close_all_but(wait_fd, keep);
            let _ = sys::read_fill(&wait, &mut byte);
            None
        });
        drop(file);
        Some(Held { child: child?, go })
    }
}

impl Held {
    /// Tells the child to close the file and exit; returns it, to be
    /// waited for (`result`) or left to the reaping loop.
    pub fn let_go(self) -> Beside {
        drop(self.go);
        self.child
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_a_child_gives_come_back_and_none_when_it_gives_none() {
        let mut into = [0u8; 4096];
        let n = bytes(&mut into, |buf| {
            buf[..5].copy_from_slice(b"state");
            buf[4095] = b'!';
            Some(5)
        });
        assert_eq!(n, Some(5));
        assert_eq!(&into[..5], b"state");
        assert_eq!(into[4095], 0, "only what it gave crosses");
        assert_eq!(bytes(&mut into, |_| None), None);
        assert_eq!(bytes(&mut into, |_| Some(4097)), None, "more than fits");
        let full = bytes(&mut into, |buf| {
            buf.fill(b'x');
            Some(4096)
        });
        assert_eq!(full, Some(4096));
        assert!(into.iter().all(|&b| b == b'x'));
    }
}
