//! Reading a process's signal dispositions from /proc/PID/status, in
//! fixed buffers: it runs in the supervision loop, where nothing may
//! allocate.

use core::fmt::Write;

use rustix::fs::{Mode, OFlags};

use crate::sys::{self, Pid, Sig};

/// Whether `pid` has a handler installed for `sig` (its `SigCgt` mask).
/// `false` if that cannot be read.
pub fn catches(pid: Pid, sig: Sig) -> bool {
    caught_mask(pid).is_some_and(|mask| mask & (1u64 << (sig - 1)) != 0)
}

fn caught_mask(pid: Pid) -> Option<u64> {
    let mut path: heapless::String<32> = heapless::String::new();
    write!(path, "/proc/{pid}/status\0").ok()?;
    let path = core::ffi::CStr::from_bytes_with_nul(path.as_bytes()).ok()?;
    let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).ok()?;
    // The whole file is about 1.5 KiB; SigCgt is in its first half.
    let mut buf = [0u8; 4096];
    let len = sys::read_fill(&fd, &mut buf).ok()?;
    parse_sigcgt(&buf[..len])
}

fn parse_sigcgt(status: &[u8]) -> Option<u64> {
    let line = status
        .split(|&b| b == b'\n')
        .find(|l| l.starts_with(b"SigCgt:"))?;
    let hex = core::str::from_utf8(&line[b"SigCgt:".len()..]).ok()?.trim();
    u64::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_sigcgt() {
        let status =
            b"Name:\tx\nSigIgn:\t0000000000000001\nSigCgt:\t0000000000080800\nCapInh:\t0\n";
        assert_eq!(parse_sigcgt(status), Some(0x80800));
        assert_eq!(parse_sigcgt(b"Name:\tx\n"), None);
    }

    #[test]
    fn sees_our_own_handlers_absent() {
        // The unit-test process installs no SIGTSTP handler.
        let me = rustix::process::getpid().as_raw_nonzero().get();
        assert!(caught_mask(me).is_some());
        assert!(!catches(me, libc::SIGTSTP));
    }
}
