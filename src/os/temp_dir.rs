//! A directory for one unit test: fresh, in the temporary directory, and
//! removed with everything in it when the test is done (passed or not),
//! so that runs leave nothing behind.

use std::path::{Path, PathBuf};

pub struct TempDir(PathBuf);

impl TempDir {
    /// `ckptrun-unit-PID-NAME`, empty (whatever an earlier run left there
    /// is removed first).
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("ckptrun-unit-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl core::ops::Deref for TempDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
