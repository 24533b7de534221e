//! `--status-file`: the job's raw wait status for an outside supervisor.
//! As PID 1, ckptrun cannot die by the job's signal, so its own exit
//! status (128+N) loses the difference between "killed by N" and "exited
//! 128+N", and the core flag; HTCondor's condor_pid_ns_init writes the raw
//! status to a file for the same reason, in the same form: `Exited: N`.

use core::fmt::Write;
use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{Mode, OFlags};

use crate::os::dir;
use crate::os::error::Error;
use crate::os::log::Log;
use crate::os::sys;
use crate::run::protocol::Ended;

pub struct StatusFile {
    path: CString,
    tmp: CString,
}

impl StatusFile {
    /// Checks that FILE can be written, before the job starts.
    pub fn prepare(path: &OsString) -> Result<Self, Error> {
        let shown = path.display();
        dir::check_dir_writable(Path::new(path), "the status file")?;
        let nul = |_| Error::usage(&shown, "contains a NUL byte");
        let mut tmp = path.as_bytes().to_vec();
        tmp.extend_from_slice(b".tmp");
        let file = Self {
            path: CString::new(path.as_bytes()).map_err(nul)?,
            tmp: CString::new(tmp).map_err(nul)?,
        };
        // A status from an earlier run must not pass for this one's.
        match rustix::fs::unlink(file.path.as_c_str()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(file),
            Err(e) => Err(Error::os(shown, e)),
        }
    }

    /// The job never started (ckptrun exits `code`): recorded as if it had
    /// exited with that code, as a shell would report it.
    pub fn record_launch_failure(&self, code: u8, log: &Log) {
        self.record(
            Ended {
                raw: i32::from(code) << 8,
                pid: 0,
            },
            log,
        );
    }

    /// Writes `Exited: RAW` whole: to FILE.tmp, synced, renamed over FILE,
    /// so a reader never sees half a line. Does not allocate.
    pub fn record(&self, ended: Ended, log: &Log) {
        if let Err(e) = self.write(ended) {
            log.warn(format_args!(
                "{}: cannot write the status file: {}",
                std::ffi::OsStr::from_bytes(self.path.as_bytes()).display(),
                sys::strerror(e)
            ));
        }
    }

    fn write(&self, ended: Ended) -> rustix::io::Result<()> {
        let mut line: heapless::String<32> = heapless::String::new();
        let _ = writeln!(line, "Exited: {}", ended.raw);
        // A fresh file: never through a symlink planted at FILE.tmp.
        match rustix::fs::unlink(self.tmp.as_c_str()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => {}
            Err(e) => return Err(e),
        }
        let flags =
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::open(self.tmp.as_c_str(), flags, Mode::from_raw_mode(0o644))?;
        sys::write_all(&fd, line.as_bytes())?;
        rustix::fs::fsync(&fd)?;
        rustix::fs::rename(self.tmp.as_c_str(), self.path.as_c_str())
    }
}
