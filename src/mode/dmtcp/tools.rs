//! DMTCP's four tools (`dmtcp_launch`, `dmtcp_coordinator`,
//! `dmtcp_command`, `dmtcp_restart`): found, and checked to come with the
//! rest of their install tree, before anything is started.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::os::error::Error;

/// The four tools, as found.
pub struct Tools {
    pub launch: PathBuf,
    pub coordinator: PathBuf,
    pub command: PathBuf,
    pub restart: PathBuf,
}

impl Tools {
    /// Looks for each tool in ./ (a copy transferred into the sandbox
    /// wins), then in `dir` (--dmtcp-dir), then along `path_var`.
    pub fn find(dir: Option<&OsStr>, path_var: Option<OsString>) -> Result<Self, Error> {
        let find = |name: &str| find_one(name, dir, path_var.as_deref());
        Ok(Self {
            launch: find("dmtcp_launch")?,
            coordinator: find("dmtcp_coordinator")?,
            command: find("dmtcp_command")?,
            restart: find("dmtcp_restart")?,
        })
    }

    /// Checks that the tools come with the rest of their install tree:
    /// dmtcp_launch looks for its libraries in `../lib/dmtcp` (or
    /// `../lib64/dmtcp`) beside its own directory, and dmtcp_restart for
    /// `mtcp_restart` beside itself. Without them dmtcp_launch runs the
    /// program unprotected, saying only that a library could not be
    /// preloaded; ckptrun never starts a job it could not checkpoint.
    pub fn check_install(&self) -> Result<(), Error> {
        let real =
            |tool: &Path| crate::os::dir::real_path(tool).map_err(|e| Error::os(tool.display(), e));
        let launch = real(&self.launch)?;
        let install = launch
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("/"));
        let libs = ["lib/dmtcp", "lib64/dmtcp"].map(|d| install.join(d).join("libdmtcp.so"));
        if !libs.iter().any(|lib| lib.is_file()) {
            return Err(Error::usage(
                self.launch.display(),
                format_args!(
                    "DMTCP's libraries are not beside it (no {}): it would run the job \
                     unprotected; transfer the whole install tree (bin/ and lib/), not the tools alone",
                    libs[0].display()
                ),
            ));
        }
        let restart = real(&self.restart)?;
        let mtcp = restart.with_file_name("mtcp_restart");
        if !mtcp.is_file() {
            return Err(Error::usage(
                self.restart.display(),
                format_args!(
                    "{} is missing: it could not restart a checkpoint; transfer the whole install tree",
                    mtcp.display()
                ),
            ));
        }
        Ok(())
    }
}

fn find_one(name: &str, dir: Option<&OsStr>, path_var: Option<&OsStr>) -> Result<PathBuf, Error> {
    let here = Path::new(".").join(name);
    let in_dir = dir.map(|d| Path::new(d).join(name));
    let along_path = path_var
        .into_iter()
        .flat_map(std::env::split_paths)
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.join(name));
    let found = std::iter::once(here)
        .chain(in_dir)
        .chain(along_path)
        .find(|p| crate::os::program::check_executable(p).is_ok())
        // Absolute: the coordinator runs in another directory.
        .map(|p| match p.is_absolute() {
            true => p,
            false => std::env::current_dir().map_or(p.clone(), |cwd| cwd.join(&p)),
        });
    found.ok_or_else(|| {
        let dir = dir.map_or(String::new(), |d| format!(", {}", d.display()));
        Error::usage(
            name,
            format_args!(
                "not found in ./{dir} or PATH (transfer the DMTCP tools into the sandbox, or name their directory with --dmtcp-dir)"
            ),
        )
    })
}

/// Finds DMTCP's tools and checks that PROGRAM can run under them:
/// dmtcp_launch execs it only once the coordinator runs, so this says now,
/// as an exec would, if it cannot.
pub fn find_tools(config: &Config, path: &Path) -> Result<Tools, Error> {
    let tools = Tools::find(config.dmtcp_dir.as_deref(), crate::os::sys::var_os("PATH"))?;
    tools.check_install()?;
    crate::os::program::check_executable(path)?;
    if crate::os::program::is_static_elf(path) == Some(true) {
        return Err(Error::usage(
            path.display(),
            "is linked statically: DMTCP cannot preload itself into it, so it would run \
             unprotected; link it dynamically",
        ));
    }
    Ok(tools)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::temp_dir::TempDir;

    #[test]
    fn a_tool_in_the_sandbox_wins_and_a_missing_one_is_named() {
        let dir = TempDir::new("tools");
        let tool = dir.join("dmtcp_command");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let found = find_one("dmtcp_command", Some(dir.as_os_str()), None).unwrap();
        assert_eq!(found, tool);
        let missing = find_one(
            "dmtcp_restart",
            Some(dir.as_os_str()),
            Some("/nonexistent".as_ref()),
        )
        .unwrap_err();
        assert_eq!(missing.what, "dmtcp_restart");
        assert!(missing.why.contains("not found in ./"), "{}", missing.why);
        assert_eq!(missing.code, crate::os::error::LAUNCHER_FAILED);
    }
}
